// hyperpack._hyperpack: the tuner for Python (pybind11), behind hyperpack.optuna.GPSampler.
//
//   Tuner(params, seed=0, maximize=False, algorithm="gp", initial_trials=0, directions=[],
//         constraints=0)
//   tuner.observe(config, state, value=None, resource=0.0, values=[], violations=[])
//   tuner.propose(n, pending) -> [config, ...]
// With several objectives, `directions` holds each one's (True: maximised) and a completed trial
// is observed with `values`, one per direction; with `constraints`, each trial's `violations`
// (<= 0 holds) are its constraints' (the tuner models them: tuner.h).
//
// `params` is a list of dicts, one a parameter: {"name", "type": "float" | "int" | "categorical",
// "low", "high", "log", "step" (int only), "choices" (categorical: how many; its values are then
// 0 .. choices - 1, and the caller maps them to its own objects)}. A config is a dict of name to
// bool, int, float or str. Bad input raises ValueError naming the parameter and what would do.
// Thread-safety: a Tuner is used by one thread at a time (the sampler holds a lock around it).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "hyperpack/space.h"
#include "hyperpack/tuner/tuner.h"
#include "study_binding.h"

namespace py = pybind11;

namespace hyperpack::python {
namespace {

using ParamDict = std::map<std::string, py::object>;

// p[key] as a T; a ValueError naming the parameter and the key when it is missing or not one.
template <typename T>
T Field(const ParamDict& p, const std::string& name, const char* key, const char* what) {
  auto it = p.find(key);
  if (it == p.end()) throw py::value_error("parameter '" + name + "' needs '" + key + "'");
  try {
    return it->second.cast<T>();
  } catch (const py::cast_error&) {
    throw py::value_error("parameter '" + name + "': '" + key + "' must be " + what);
  }
}

// The words Python uses, parsed once here into the tuner's enums.
ParamType ToParamType(const std::string& name, const std::string& word) {
  for (ParamType t : {ParamType::kFloat, ParamType::kInt, ParamType::kCategorical})
    if (word == ParamTypeName(t)) return t;
  throw py::value_error("parameter '" + name + "': type '" + word +
                        "' is not one of float, int, categorical");
}

ParamSpec ToParamSpec(const ParamDict& p) {
  auto name_it = p.find("name");
  if (name_it == p.end()) throw py::value_error("a parameter needs a 'name'");
  ParamSpec spec;
  spec.name = Field<std::string>(p, "?", "name", "a string");
  spec.type = ToParamType(spec.name, Field<std::string>(p, spec.name, "type", "a string"));
  auto flag = [&](const char* key) {
    return p.count(key) && Field<bool>(p, spec.name, key, "a bool");
  };
  if (spec.type != ParamType::kCategorical) {
    spec.low = Field<double>(p, spec.name, "low", "a number");
    spec.high = Field<double>(p, spec.name, "high", "a number");
    spec.log = flag("log");
    if (p.count("step")) spec.step = Field<int64_t>(p, spec.name, "step", "an int");
    if (!(std::isfinite(spec.low) && std::isfinite(spec.high) && spec.low <= spec.high))
      throw py::value_error("parameter '" + spec.name + "': low must not exceed high");
    if (spec.log && !(spec.low > 0))
      throw py::value_error("parameter '" + spec.name + "': a log scale needs low > 0");
    if (spec.step < 1) throw py::value_error("parameter '" + spec.name + "': step must be >= 1");
  } else {
    const int64_t n = p.count("choices") ? Field<int64_t>(p, spec.name, "choices", "an int") : 0;
    if (n < 1) throw py::value_error("parameter '" + spec.name + "': 'choices' must be >= 1");
    for (int64_t i = 0; i < n; ++i) spec.values.emplace_back(i);
  }
  return spec;
}

tuner::TrialOutcome::Kind ToKind(const std::string& state) {
  using Kind = tuner::TrialOutcome::Kind;
  static const std::pair<Kind, const char*> kKinds[] = {{Kind::kCompleted, "completed"},
                                                        {Kind::kPruned, "pruned"},
                                                        {Kind::kFailed, "failed"},
                                                        {Kind::kInfeasible, "infeasible"}};
  for (const auto& [kind, word] : kKinds)
    if (state == word) return kind;
  throw py::value_error("state '" + state +
                        "' is not one of completed, pruned, failed, infeasible");
}

class PyTuner {
 public:
  PyTuner(const std::vector<ParamDict>& params, uint64_t seed, bool maximize,
          const std::string& algorithm, int initial_trials, const std::vector<bool>& directions,
          int constraints) {
    std::vector<ParamSpec> specs;
    std::set<std::string> names;
    for (const ParamDict& p : params) {
      specs.push_back(ToParamSpec(p));
      if (!names.insert(specs.back().name).second)
        throw py::value_error("parameter '" + specs.back().name + "' is given twice");
    }
    space_ = SearchSpace(std::move(specs));
    auto parsed = tuner::ParseTunerAlgorithm(algorithm);
    if (!parsed.ok()) throw py::value_error(parsed.status().message());
    tuner::TunerOptions options;
    options.algorithm = *parsed;
    options.seed = seed;
    options.maximize = maximize;
    if (initial_trials < 0) throw py::value_error("initial_trials must be >= 0");
    options.initial_trials = initial_trials;
    if (directions.size() == 1) throw py::value_error("directions: give 2 to 4, or none");
    options.objectives = directions;
    if (constraints < 0) throw py::value_error("constraints must be >= 0");
    options.constraints = constraints;
    objectives_ = static_cast<int>(directions.size());
    auto made = tuner::MakeTuner(space_, options);
    if (!made.ok()) throw py::value_error(made.status().message());
    tuner_ = std::move(made).value();
  }

  void Observe(const Config& config, const std::string& state, std::optional<double> value,
               double resource, const std::vector<double>& values,
               const std::vector<double>& violations) {
    Status valid = space_.Validate(config);
    if (!valid.ok()) throw py::value_error(valid.message());
    tuner::TrialOutcome o;
    o.config = config;
    o.kind = ToKind(state);
    if (objectives_ > 0) {
      // Several objectives: `values`, one per direction.
      if (o.kind == tuner::TrialOutcome::Kind::kCompleted &&
          static_cast<int>(values.size()) != objectives_)
        throw py::value_error("a completed trial needs " + std::to_string(objectives_) +
                              " values, one per direction");
      o.values = values;
      if (!values.empty()) value = values[0];
    }
    if (value && !std::isfinite(*value)) {
      o.kind = tuner::TrialOutcome::Kind::kFailed;  // as a trial that reported NaN
      value.reset();
    }
    if ((o.kind == tuner::TrialOutcome::Kind::kCompleted ||
         o.kind == tuner::TrialOutcome::Kind::kPruned) &&
        !value)
      throw py::value_error("a " + state + " trial needs a value");
    o.value = value;
    o.violations = violations;
    o.resource = resource;
    tuner_->Observe(o);
  }

  std::vector<Config> Propose(int n, const std::vector<Config>& pending) {
    if (n < 1) throw py::value_error("n must be >= 1");
    std::vector<Config> valid;  // a pending trial from another space is skipped, not an error
    for (const Config& c : pending)
      if (space_.Validate(c).ok()) valid.push_back(c);
    Result<std::vector<Config>> out = [&] {
      py::gil_scoped_release release;  // fitting takes a while: let other threads run
      return tuner_->Propose(n, valid);
    }();
    if (!out.ok()) throw std::runtime_error(out.status().message());
    return *std::move(out);
  }

 private:
  SearchSpace space_;
  std::unique_ptr<tuner::Tuner> tuner_;
  int objectives_ = 0;  // several objectives: how many; 0 for one
};

}  // namespace
}  // namespace hyperpack::python

PYBIND11_MODULE(_hyperpack, m) {
  using hyperpack::python::PyTuner;
  m.doc() = "hyperpack's tuner (Gaussian-process Bayesian optimisation) for Python";
  py::class_<PyTuner>(m, "Tuner")
      .def(py::init<const std::vector<hyperpack::python::ParamDict>&, uint64_t, bool,
                    const std::string&, int, const std::vector<bool>&, int>(),
           py::arg("params"), py::kw_only(), py::arg("seed") = 0, py::arg("maximize") = false,
           py::arg("algorithm") = "gp", py::arg("initial_trials") = 0,
           py::arg("directions") = std::vector<bool>(), py::arg("constraints") = 0)
      .def("observe", &PyTuner::Observe, py::arg("config"), py::arg("state"),
           py::arg("value") = py::none(), py::arg("resource") = 0.0,
           py::arg("values") = std::vector<double>(), py::arg("violations") = std::vector<double>())
      .def("propose", &PyTuner::Propose, py::arg("n"), py::arg("pending"));
  hyperpack::python::BindStudy(m);
}
