#include "hyperpack/tuner/tuner.h"

#include <random>

#include "hyperpack/tuner/encoding.h"
#include "sobol.h"

namespace hyperpack::tuner {
namespace {

// Shared by the random and Sobol samplers: proposal i of the sequence is a pure function of
// (seed, i), and the sequence resumes after the trials already observed, so a study rebuilt after
// a crash does not repeat its first configurations.
class SequenceSampler : public Tuner {
 public:
  SequenceSampler(SearchSpace space, uint64_t seed) : encoder_(std::move(space)), seed_(seed) {}

  Result<std::vector<Config>> Propose(int n, std::span<const Config> pending) override {
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

  void Observe(const TrialOutcome& outcome) override { observed_.push_back(outcome.config); }

 protected:
  // One coordinate in [0, 1) per parameter for proposal `index`.
  virtual std::vector<double> Unit(uint64_t index) const = 0;
  const Encoder& encoder() const { return encoder_; }
  uint64_t seed() const { return seed_; }

 private:
  bool Seen(const Config& c, std::span<const Config> pending,
            const std::vector<Config>& out) const {
    for (const Config& o : observed_)
      if (SameConfig(o, c)) return true;
    for (const Config& o : pending)
      if (SameConfig(o, c)) return true;
    for (const Config& o : out)
      if (SameConfig(o, c)) return true;
    return false;
  }

  Encoder encoder_;
  uint64_t seed_;
  uint64_t next_index_ = 0;
  std::vector<Config> observed_;
};

class RandomSampler : public SequenceSampler {
 public:
  using SequenceSampler::SequenceSampler;
  std::string name() const override { return "random"; }

 protected:
  std::vector<double> Unit(uint64_t index) const override {
    std::mt19937_64 rng(Mix64(seed() ^ Mix64(index)));
    std::vector<double> u(encoder().space().size());
    // 53 random bits per coordinate: the same numbers on every platform.
    for (double& x : u) x = static_cast<double>(rng() >> 11) * 0x1.0p-53;
    return u;
  }
};

class SobolSampler : public SequenceSampler {
 public:
  SobolSampler(SearchSpace space, uint64_t seed)
      : SequenceSampler(space, seed), sobol_(static_cast<int>(space.size()), seed) {}
  std::string name() const override { return "sobol"; }

 protected:
  std::vector<double> Unit(uint64_t index) const override { return sobol_.Point(index); }

 private:
  SobolSequence sobol_;
};

}  // namespace

Result<std::unique_ptr<Tuner>> MakeTuner(const SearchSpace& space, const TunerOptions& options) {
  if (options.algorithm == "random")
    return std::unique_ptr<Tuner>(new RandomSampler(space, options.seed));
  if (options.algorithm == "sobol") {
    if (space.size() > static_cast<size_t>(SobolSequence::kMaxDims))
      return Status::Invalid("sobol supports up to ", SobolSequence::kMaxDims, " parameters");
    return std::unique_ptr<Tuner>(new SobolSampler(space, options.seed));
  }
  return Status::Invalid("unknown tuner algorithm '", options.algorithm,
                         "'; expected random or sobol");
}

}  // namespace hyperpack::tuner
