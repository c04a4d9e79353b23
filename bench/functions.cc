#include "functions.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numbers>
#include <string>

namespace hyperpack::bench {
namespace {

constexpr double kPi = std::numbers::pi;

// "x1", "x2", ... (appended rather than `"x" + std::to_string(i)`, which trips a false
// -Wrestrict warning in GCC 12 at -O2).
std::string VarName(size_t i) {
  std::string name = "x";
  name += std::to_string(i);
  return name;
}

ParamSpec Float(std::string name, double low, double high, bool log = false) {
  ParamSpec p;
  p.name = std::move(name);
  p.type = ParamType::kFloat;
  p.low = low;
  p.high = high;
  p.log = log;
  return p;
}

// x1..xd, each in [low, high].
SearchSpace Box(int d, double low, double high) {
  std::vector<ParamSpec> params;
  for (int i = 1; i <= d; ++i) params.push_back(Float(VarName(i), low, high));
  return SearchSpace(std::move(params));
}

Config Point(std::span<const double> x) {
  Config c;
  for (size_t i = 0; i < x.size(); ++i) c[VarName(i + 1)] = x[i];
  return c;
}

double Number(const Config& config, const std::string& name) {
  auto it = config.find(name);
  assert(it != config.end());
  return ValueAsNumber(it->second).value_or(std::nan(""));
}

std::vector<double> Vector(const Config& config, int d) {
  std::vector<double> x(d);
  for (int i = 0; i < d; ++i) x[i] = Number(config, VarName(i + 1));
  return x;
}

// The mixed function's per-optimizer optimum: log10(lr), log2(batch) and the best value.
struct OptimizerOptimum {
  const char* name;
  double u, v, offset;
};
constexpr OptimizerOptimum kOptimizers[] = {
    {"sgd", -1.0, 5.0, 0.25},
    {"adam", -3.0, 7.0, 0.0},
    {"rmsprop", -2.5, 9.0, 0.1},
};

// The classic continuous functions, in the suite's order.
std::vector<TestFunction> Classics() {
  std::vector<TestFunction> all;

  TestFunction branin;
  branin.name = "branin";
  branin.title = "Branin (2-d)";
  branin.space = SearchSpace({Float("x1", -5, 10), Float("x2", 0, 15)});
  branin.f_min = 10.0 / (8.0 * kPi);  // 0.397887...
  branin.argmin = {{"x1", kPi}, {"x2", 2.275}};
  branin.evaluate = [](const Config& c) { return Branin(Number(c, "x1"), Number(c, "x2")); };
  all.push_back(std::move(branin));

  TestFunction hartmann;
  hartmann.name = "hartmann6";
  hartmann.title = "Hartmann (6-d)";
  hartmann.space = Box(6, 0, 1);
  // The minimiser to 8 decimals (DiceKriging); the value there, to double precision.
  const double h_argmin[] = {0.20168952, 0.15001069, 0.47687398,
                             0.27533243, 0.31165162, 0.65730054};
  hartmann.f_min = -3.322368011415512;
  hartmann.argmin = Point(h_argmin);
  hartmann.evaluate = [](const Config& c) { return Hartmann6(Vector(c, 6)); };
  all.push_back(std::move(hartmann));

  TestFunction ackley;
  ackley.name = "ackley5";
  ackley.title = "Ackley (5-d)";
  ackley.space = Box(5, -32.768, 32.768);
  ackley.f_min = 0.0;
  ackley.argmin = Point(std::vector<double>(5, 0.0));
  ackley.evaluate = [](const Config& c) { return Ackley(Vector(c, 5)); };
  all.push_back(std::move(ackley));

  TestFunction levy;
  levy.name = "levy10";
  levy.title = "Levy (10-d)";
  levy.space = Box(10, -10, 10);
  levy.f_min = 0.0;
  levy.argmin = Point(std::vector<double>(10, 1.0));
  levy.evaluate = [](const Config& c) { return Levy(Vector(c, 10)); };
  all.push_back(std::move(levy));

  TestFunction rosenbrock;
  rosenbrock.name = "rosenbrock4";
  rosenbrock.title = "Rosenbrock (4-d)";
  rosenbrock.space = Box(4, -5, 10);
  rosenbrock.f_min = 0.0;
  rosenbrock.argmin = Point(std::vector<double>(4, 1.0));
  rosenbrock.evaluate = [](const Config& c) { return Rosenbrock(Vector(c, 4)); };
  all.push_back(std::move(rosenbrock));
  return all;
}

// A search space of every kind: a log float, a log int, a categorical and a float.
TestFunction MixedFunction() {
  TestFunction mixed;
  mixed.name = "mixed";
  mixed.title = "Mixed (log float, log int, categorical, float)";
  ParamSpec batch;
  batch.name = "batch";
  batch.type = ParamType::kInt;
  batch.low = 16;
  batch.high = 1024;
  batch.log = true;
  ParamSpec optimizer;
  optimizer.name = "optimizer";
  optimizer.type = ParamType::kCategorical;
  for (const OptimizerOptimum& o : kOptimizers) optimizer.values.emplace_back(std::string(o.name));
  mixed.space = SearchSpace(
      {Float("lr", 1e-5, 1.0, /*log=*/true), batch, optimizer, Float("dropout", 0.0, 0.8)});
  mixed.f_min = 0.0;
  mixed.argmin = {
      {"lr", 1e-3}, {"batch", int64_t{128}}, {"optimizer", std::string("adam")}, {"dropout", 0.25}};
  mixed.evaluate = [](const Config& c) {
    auto it = c.find("optimizer");
    assert(it != c.end() && std::holds_alternative<std::string>(it->second));
    return Mixed(Number(c, "lr"), Number(c, "batch"), std::get<std::string>(it->second),
                 Number(c, "dropout"));
  };
  return mixed;
}

// The functions flat in pieces.
std::vector<TestFunction> FlatInPieces() {
  std::vector<TestFunction> all;
  TestFunction stump;
  stump.name = "stump5";
  stump.title = "Stump (5-d, flat in pieces)";
  stump.space = Box(5, 0, 1);
  stump.f_min = 0.02 * 12;
  const double s_argmin[] = {0.0, 0.3, 0.7, 0.5, 0.5};
  stump.argmin = Point(s_argmin);
  stump.flat_in_pieces = true;
  stump.evaluate = [](const Config& c) { return Stump5(Vector(c, 5)); };
  all.push_back(std::move(stump));

  TestFunction ledge;
  ledge.name = "ledge2";
  ledge.title = "Ledge (2-d, log scales, a wide plateau beside a thin ridge)";
  ledge.space = SearchSpace({Float("c", 1e-2, 1e2, /*log=*/true), Float("s", 1e-2, 1e2, true)});
  ledge.f_min = 0.014;
  ledge.argmin = {{"c", std::pow(10.0, 0.85 * 4 - 2)}, {"s", std::pow(10.0, 0.65 * 4 - 2)}};
  ledge.flat_in_pieces = true;
  ledge.evaluate = [](const Config& c) { return Ledge2(Number(c, "c"), Number(c, "s")); };
  all.push_back(std::move(ledge));
  return all;
}

std::vector<TestFunction> BuildAll() {
  std::vector<TestFunction> all = Classics();
  all.push_back(MixedFunction());
  for (TestFunction& f : FlatInPieces()) all.push_back(std::move(f));
  return all;
}

}  // namespace

double Branin(double x1, double x2) {
  const double b = 5.1 / (4.0 * kPi * kPi);
  const double c = 5.0 / kPi;
  const double t = 1.0 / (8.0 * kPi);
  const double q = x2 - b * x1 * x1 + c * x1 - 6.0;
  return q * q + 10.0 * (1.0 - t) * std::cos(x1) + 10.0;
}

double Hartmann6(std::span<const double> x) {
  static constexpr double kAlpha[4] = {1.0, 1.2, 3.0, 3.2};
  static constexpr double kA[4][6] = {{10, 3, 17, 3.5, 1.7, 8},
                                      {0.05, 10, 17, 0.1, 8, 14},
                                      {3, 3.5, 1.7, 10, 17, 8},
                                      {17, 8, 0.05, 10, 0.1, 14}};
  static constexpr double kP[4][6] = {{1312, 1696, 5569, 124, 8283, 5886},
                                      {2329, 4135, 8307, 3736, 1004, 9991},
                                      {2348, 1451, 3522, 2883, 3047, 6650},
                                      {4047, 8828, 8732, 5743, 1091, 381}};
  assert(x.size() == 6);
  double sum = 0.0;
  for (int i = 0; i < 4; ++i) {
    double inner = 0.0;
    for (int j = 0; j < 6; ++j) {
      const double d = x[j] - kP[i][j] * 1e-4;
      inner += kA[i][j] * d * d;
    }
    sum += kAlpha[i] * std::exp(-inner);
  }
  return -sum;
}

double Ackley(std::span<const double> x) {
  const double n = static_cast<double>(x.size());
  double squares = 0.0, cosines = 0.0;
  for (double xi : x) {
    squares += xi * xi;
    cosines += std::cos(2.0 * kPi * xi);
  }
  return -20.0 * std::exp(-0.2 * std::sqrt(squares / n)) - std::exp(cosines / n) + 20.0 +
         std::numbers::e;
}

double Levy(std::span<const double> x) {
  const size_t d = x.size();
  auto w = [&](size_t i) { return 1.0 + (x[i] - 1.0) / 4.0; };
  auto sq = [](double v) { return v * v; };
  double f = sq(std::sin(kPi * w(0)));
  for (size_t i = 0; i + 1 < d; ++i)
    f += sq(w(i) - 1.0) * (1.0 + 10.0 * sq(std::sin(kPi * w(i) + 1.0)));
  f += sq(w(d - 1) - 1.0) * (1.0 + sq(std::sin(2.0 * kPi * w(d - 1))));
  return f;
}

double Rosenbrock(std::span<const double> x) {
  double f = 0.0;
  for (size_t i = 0; i + 1 < x.size(); ++i) {
    const double a = x[i + 1] - x[i] * x[i];
    const double b = x[i] - 1.0;
    f += 100.0 * (a * a) + b * b;
  }
  return f;
}

double Mixed(double lr, double batch, std::string_view optimizer, double dropout) {
  const OptimizerOptimum* o = nullptr;
  for (const OptimizerOptimum& candidate : kOptimizers)
    if (optimizer == candidate.name) o = &candidate;
  if (o == nullptr) return std::nan("");
  const double du = std::log10(lr) - o->u;
  const double dv = (std::log2(batch) - o->v) / 2.0;
  const double s = std::sin(kPi * du);
  const double dd = dropout - 0.25;
  return o->offset + du * du - 1.6 * du * dv + dv * dv + 0.3 * s * s + 2.0 * dd * dd;
}

double Stump5(std::span<const double> x) {
  assert(x.size() == 5);
  if (x[0] > 0.8) return 0.4;
  const double a = x[1] - 0.3, b = x[2] - 0.7, c = x[3] - 0.5;
  const double v = 0.25 + 0.3 * x[0] + 1.2 * (a * a + b * b + c * c);
  return 0.02 * std::floor(v / 0.02);
}

double Ledge2(double c, double s) {
  // Both in log10 units over [-2, 2], as a regularisation strength and a scale are.
  const double u = (std::log10(c) + 2.0) / 4.0, w = (std::log10(s) + 2.0) / 4.0;
  constexpr double kStep = 0.007, kHalfWidth = 0.0125;
  const double d = w - (0.58 + 0.07 * std::clamp((u - 0.40) / 0.32, 0.0, 1.0));
  double v;
  if (u >= 0.72 && std::abs(d) <= kHalfWidth) {
    v = 2 * kStep;  // the band
  } else if (u >= 0.40 && std::abs(d) <= kHalfWidth) {
    v = 3 * kStep;  // the ridge
  } else if (std::abs(u - 0.38) <= 0.05 || (u > 0.38 && d > 0 && d <= 0.1)) {
    v = 4 * kStep;  // the plateau and its strip along the ridge
  } else {
    const double e = std::abs(u - 0.38) - 0.05;  // positive here: off the plateau's width
    v = 4 * kStep + 0.5 * e * e + 0.01 * w + 1e-9;
  }
  return kStep * std::ceil(v / kStep - 1e-9);
}

const std::vector<TestFunction>& AllFunctions() {
  static const std::vector<TestFunction> all = BuildAll();
  return all;
}

const TestFunction* FindFunction(std::string_view name) {
  for (const TestFunction& f : AllFunctions())
    if (f.name == name) return &f;
  return nullptr;
}

std::vector<std::string> FunctionNames() {
  std::vector<std::string> names;
  for (const TestFunction& f : AllFunctions()) names.push_back(f.name);
  return names;
}

}  // namespace hyperpack::bench
