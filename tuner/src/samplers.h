// The model-free samplers: random search and scrambled Sobol. Also the GP tuner's initial design.
// Thread-safety: not thread-safe (one owner, as every Tuner).
#pragma once

#include <memory>

#include "hyperpack/tuner/encoding.h"
#include "hyperpack/tuner/tuner.h"
#include "sobol.h"

namespace hyperpack::tuner {

// Proposal i of the sequence is a pure function of (seed, i), and the sequence resumes after the
// trials already observed, so a study rebuilt after a crash does not repeat its first
// configurations.
class SequenceSampler : public Tuner {
 public:
  SequenceSampler(SearchSpace space, uint64_t seed) : encoder_(std::move(space)), seed_(seed) {}

  Result<std::vector<Config>> Propose(int n, std::span<const Config> pending) override;
  void Observe(const TrialOutcome& outcome) override { observed_.push_back(outcome.config); }

 protected:
  // One coordinate in [0, 1) per parameter for proposal `index`.
  virtual std::vector<double> Unit(uint64_t index) const = 0;
  const Encoder& encoder() const { return encoder_; }
  uint64_t seed() const { return seed_; }

 private:
  bool Seen(const Config& c, std::span<const Config> pending, const std::vector<Config>& out) const;

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
  std::vector<double> Unit(uint64_t index) const override;
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

// The Gaussian-process tuner (gp_tuner.cc).
std::unique_ptr<Tuner> MakeGpTuner(const SearchSpace& space, const TunerOptions& options);
// Several objectives, or constraints (mo_gp_tuner.cc).
std::unique_ptr<Tuner> MakeMultiObjectiveGpTuner(const SearchSpace& space,
                                                 const TunerOptions& options);

}  // namespace hyperpack::tuner
