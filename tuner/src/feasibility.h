// Where configurations can run: a least-squares GP classifier on +1 (ran) / -1 (infeasible: the
// trial exited 3, or no node could hold it), whose probit gives a probability of feasibility that
// multiplies the GP tuners' acquisitions. Cheap, and it is only fitted once a trial was
// infeasible. Its hyperparameters are fixed: fitted ones chase the few labels into length scales
// so short that the classifier forgets an infeasible point a step away from it.
// Thread-safety: not thread-safe; const methods may run concurrently with each other.
#pragma once

#include <Eigen/Dense>
#include <memory>
#include <vector>

#include "gp.h"
#include "hyperpack/status.h"

namespace hyperpack::tuner {

class FeasibilityModel {
 public:
  // Refits to the rows of `x` labelled by `ran` (the caller calls it once a trial was
  // infeasible, and Clear while none is).
  Status Update(const Eigen::MatrixXd& x, const std::vector<bool>& ran);
  void Clear() { gp_.reset(); }
  bool active() const { return gp_ != nullptr; }
  // log P(feasible) at x (0 without a model), its gradient added into *grad when not null.
  double LogProbability(const Eigen::VectorXd& x, Eigen::VectorXd* grad) const;
  // log P(feasible) at the rows of xs.
  Eigen::VectorXd LogProbabilities(const Eigen::MatrixXd& xs) const;

 private:
  std::unique_ptr<GaussianProcess> gp_;
};

}  // namespace hyperpack::tuner
