#include "hyperpack/tuner/tuner.h"

#include <random>

#include "samplers.h"

namespace hyperpack::tuner {

Result<std::vector<Config>> SequenceSampler::Propose(int n, std::span<const Config> pending) {
  std::vector<Config> out;
  uint64_t index = std::max<uint64_t>(next_index_, observed_.size() + pending.size());
  // Skipping duplicates can exhaust a small discrete space; give up after many misses.
  int misses = 0;
  const int max_misses = 64 + 16 * n;
  while (static_cast<int>(out.size()) < n && misses < max_misses) {
    Config c = encoder_.FromUnitPerParam(Unit(index++));
    if (Seen(c, pending, out)) {
      ++misses;
      continue;
    }
    out.push_back(std::move(c));
  }
  next_index_ = index;
  return out;
}

bool SequenceSampler::Seen(const Config& c, std::span<const Config> pending,
                           const std::vector<Config>& out) const {
  for (const Config& o : observed_)
    if (SameConfig(o, c)) return true;
  for (const Config& o : pending)
    if (SameConfig(o, c)) return true;
  for (const Config& o : out)
    if (SameConfig(o, c)) return true;
  return false;
}

std::vector<double> RandomSampler::Unit(uint64_t index) const {
  std::mt19937_64 rng(Mix64(seed() ^ Mix64(index)));
  std::vector<double> u(encoder().space().size());
  // 53 random bits per coordinate: the same numbers on every platform.
  for (double& x : u) x = static_cast<double>(rng() >> 11) * 0x1.0p-53;
  return u;
}

Result<std::unique_ptr<Tuner>> MakeTuner(const SearchSpace& space, const TunerOptions& options) {
  if (space.size() > static_cast<size_t>(SobolSequence::kMaxDims))
    return Status::Invalid("at most ", SobolSequence::kMaxDims, " parameters are supported");
  if (options.algorithm == "random")
    return std::unique_ptr<Tuner>(new RandomSampler(space, options.seed));
  if (options.algorithm == "sobol")
    return std::unique_ptr<Tuner>(new SobolSampler(space, options.seed));
  if (options.algorithm == "gp") {
    if (options.max_fit_points < 10 || options.max_model_points < options.max_fit_points)
      return Status::Invalid("max_fit_points must be >= 10 and <= max_model_points");
    if (options.acquisition != "ei" && options.acquisition != "ucb")
      return Status::Invalid("unknown acquisition '", options.acquisition, "'; expected ei or ucb");
    return MakeGpTuner(space, options);
  }
  return Status::Invalid("unknown tuner algorithm '", options.algorithm,
                         "'; expected gp, random or sobol");
}

}  // namespace hyperpack::tuner
