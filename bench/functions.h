// Test functions for measuring how quickly a tuner finds good configurations.
//
// Every function is to be MINIMIZED and comes with its search space (the parameters a tuner
// sees), its global minimum value and one global minimiser. bench/optuna_regret.py defines the same
// functions over the same spaces; tests/bench_functions_test.cc checks that the two agree.
//
//   branin       2-d, x1 in [-5, 10], x2 in [0, 15]. With b = 5.1/(4 pi^2), c = 5/pi,
//                t = 1/(8 pi): f = (x2 - b x1^2 + c x1 - 6)^2 + 10 (1 - t) cos(x1) + 10.
//                Minimum 10 t = 0.397887 at (-pi, 12.275), (pi, 2.275) and (3 pi, 2.475).
//   hartmann6    6-d in [0, 1]. f = -sum_i alpha_i exp(-sum_j A_ij (x_j - P_ij)^2) with the
//                usual alpha, A, P (Dixon & Szego). Minimum -3.32237 (-3.322368011415512) at
//                (0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573).
//   ackley5      5-d in [-32.768, 32.768]. f = -20 exp(-0.2 sqrt(mean x_i^2))
//                - exp(mean cos(2 pi x_i)) + 20 + e. Minimum 0 at the origin.
//   levy10       10-d in [-10, 10]. With w_i = 1 + (x_i - 1)/4: f = sin^2(pi w_1)
//                + sum_{i<d} (w_i - 1)^2 (1 + 10 sin^2(pi w_i + 1)) + (w_d - 1)^2 (1 + sin^2(2 pi
//                w_d)). Minimum 0 at (1, ..., 1).
//   rosenbrock4  4-d in [-5, 10]. f = sum_{i<d} 100 (x_{i+1} - x_i^2)^2 + (x_i - 1)^2.
//                Minimum 0 at (1, ..., 1).
//   mixed        A training run's loss as a function of four hyperparameters of mixed types:
//                  lr         float in [1e-5, 1], log scale
//                  batch      int in [16, 1024], log scale (the function reads log2(batch))
//                  optimizer  categorical: sgd, adam, rmsprop
//                  dropout    float in [0, 0.8]
//                With u = log10(lr), v = log2(batch) and, per optimizer,
//                  (u*, v*, offset) = sgd (-1, 5, 0.25), adam (-3, 7, 0), rmsprop (-2.5, 9, 0.1),
//                du = u - u*, dv = (v - v*) / 2:
//                  f = offset + du^2 - 1.6 du dv + dv^2 + 0.3 sin^2(pi du) + 2 (dropout - 0.25)^2.
//                The quadratic form is positive definite (eigenvalues 0.2 and 1.8; a tilted valley
//                along which a larger batch wants a larger learning rate) and every other term is
//                >= 0, so f >= offset >= 0 with equality only at adam, lr = 1e-3, batch = 128,
//                dropout = 0.25: minimum exactly 0. Each optimizer's best value is its offset.
//   stump5       5-d in [0, 1], flat in pieces, as a decision tree's loss is: where x1 > 0.8 (a
//                tree too constrained to split: a fifth of the space) f = 0.4; elsewhere
//                v = 0.25 + 0.3 x1 + 1.2 ((x2 - 0.3)^2 + (x3 - 0.7)^2 + (x4 - 0.5)^2), rounded down
//                to a multiple of 0.02 (a finite validation set): f = 0.02 floor(v / 0.02). x5 does
//                nothing. The stump is better than most of the space (v's mean is about 0.77), so
//                it draws trials; values tie everywhere. Minimum 0.02 * 12 = 0.24 where v < 0.26,
//                around (0, 0.3, 0.7, 0.5, any).
//   ledge2       2-d, c and s in [1e-2, 1e2], both log scale, flat in pieces as an accuracy over a
//                small validation set is (steps of 0.007): a wide plateau beside a thin ridge that
//                leads to a narrow band, the shape of a logistic regression's error over its
//                strength and intercept scaling on a small data set. With u, w = (log10 c + 2) / 4,
//                (log10 s + 2) / 4 and d = w - (0.58 + 0.07 clamp((u - 0.4) / 0.32, 0, 1)):
//                0.014 (the band) where u >= 0.72 and |d| <= 0.0125; else 0.021 (the ridge) where
//                u >= 0.4 and |d| <= 0.0125; else 0.028 (the plateau) where |u - 0.38| <= 0.05 or
//                (u > 0.38 and 0 < d <= 0.1); elsewhere 0.028 + 0.5 e^2 + 0.01 w with
//                e = |u - 0.38| - 0.05, each rounded up to a multiple of 0.007. Minimum 0.014 on
//                0.7% of the space, around (10^1.4, 10^0.6). The functions whose values tie are
//                stump5 and ledge2.
//
// Thread-safety: the table of functions is built once and immutable; Evaluate is a pure function.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hyperpack/space.h"

namespace hyperpack::bench {

struct TestFunction {
  std::string name;   // "branin": the name on the command line
  std::string title;  // "Branin (2-d)": for people
  SearchSpace space;
  double f_min = 0.0;           // the global minimum value
  Config argmin;                // one configuration where f_min is attained
  bool flat_in_pieces = false;  // its values tie: a small step need not change them

  // The function's value at `config`, which must hold every parameter of `space`.
  double Evaluate(const Config& config) const { return evaluate(config); }
  double (*evaluate)(const Config& config) = nullptr;
};

// All of them, in the order listed above.
const std::vector<TestFunction>& AllFunctions();
// nullptr for an unknown name.
const TestFunction* FindFunction(std::string_view name);
std::vector<std::string> FunctionNames();

// The functions on plain vectors, for the tests and anyone who wants them without a Config.
double Branin(double x1, double x2);
double Hartmann6(std::span<const double> x);  // x.size() == 6
double Ackley(std::span<const double> x);
double Levy(std::span<const double> x);
double Rosenbrock(std::span<const double> x);
double Mixed(double lr, double batch, std::string_view optimizer, double dropout);
double Stump5(std::span<const double> x);  // x.size() == 5
double Ledge2(double c, double s);

}  // namespace hyperpack::bench
