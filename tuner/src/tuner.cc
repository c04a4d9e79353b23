#include "hyperpack/tuner/tuner.h"

#include <algorithm>
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

const char* TunerAlgorithmName(TunerAlgorithm algorithm) {
  switch (algorithm) {
    case TunerAlgorithm::kGp:
      return "gp";
    case TunerAlgorithm::kRandom:
      return "random";
    case TunerAlgorithm::kSobol:
      return "sobol";
  }
  return "?";
}

Result<TunerAlgorithm> ParseTunerAlgorithm(std::string_view name) {
  for (TunerAlgorithm a : {TunerAlgorithm::kGp, TunerAlgorithm::kRandom, TunerAlgorithm::kSobol})
    if (name == TunerAlgorithmName(a)) return a;
  return Status::Invalid("unknown tuner algorithm '", name, "'; expected gp, random or sobol");
}

const char* AcquisitionName(Acquisition acquisition) {
  return acquisition == Acquisition::kUcb ? "ucb" : "ei";
}

Result<Acquisition> ParseAcquisition(std::string_view name) {
  for (Acquisition a : {Acquisition::kEi, Acquisition::kUcb})
    if (name == AcquisitionName(a)) return a;
  return Status::Invalid("unknown acquisition '", name, "'; expected ei or ucb");
}

double CostExponent(double budget_spent) {
  if (!(budget_spent > 0)) return 1.0;  // NaN too: nothing known to be spent
  return std::clamp(1.0 - budget_spent, 0.0, 1.0);
}

Result<std::unique_ptr<Tuner>> MakeTuner(const SearchSpace& space, const TunerOptions& options) {
  if (space.size() > static_cast<size_t>(SobolSequence::kMaxDims))
    return Status::Invalid("at most ", SobolSequence::kMaxDims, " parameters are supported");
  switch (options.algorithm) {
    case TunerAlgorithm::kRandom:
      return std::unique_ptr<Tuner>(new RandomSampler(space, options.seed));
    case TunerAlgorithm::kSobol:
      return std::unique_ptr<Tuner>(new SobolSampler(space, options.seed));
    case TunerAlgorithm::kGp:
      if (options.max_fit_points < 10 || options.max_model_points < options.max_fit_points)
        return Status::Invalid("max_fit_points must be >= 10 and <= max_model_points");
      if (options.objectives.size() == 1 || options.objectives.size() > 4)
        return Status::Invalid("gp models 2 to 4 objectives (or one), not ",
                               options.objectives.size());
      if (options.objectives.size() > 1 || options.constraints > 0)
        return MakeMultiObjectiveGpTuner(space, options);
      return MakeGpTuner(space, options);
  }
  return Status::Internal("tuner algorithm ", static_cast<int>(options.algorithm));
}

}  // namespace hyperpack::tuner
