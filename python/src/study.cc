// hyperpack._hyperpack.Study: a stored study for Python, the same calls the CLI makes.
//
//   Study(name, storage)                  # kNotFound -> KeyError; other errors -> RuntimeError
//   Study.create(path, storage) -> name   # stores a study file (no trial: needed), or finds it
//   study.ask() -> (number, params_json)
//   study.tell(number, state, value=None, step=None)
//   study.trials() -> [(number, state, value, params_json), ...]  by number
//   study.best() -> (that tuple, value, runs), or None: the trial `hyperpack best` names, and its
//                   value or, with budget.finalists, its configuration's mean over `runs` runs
//   study.recommend() -> (that tuple, noise_share): the trial `hyperpack best --by-model` names
//   study.control(verb, params_json="", results_text="", results_path="", max_trials=None,
//                 max_parallel=None, time_limit_s=None, priority=None) -> (refused, outcome)
//
// Parameters cross as JSON text (ConfigToJson); hyperpack/__init__.py turns them into dicts.
// Thread-safety: each call opens its own storage handle, so a Study may be used from any thread.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "hyperpack/config_json.h"
#include "hyperpack/host.h"
#include "hyperpack/report/report.h"
#include "hyperpack/scheduler/ask_tell.h"
#include "hyperpack/scheduler/control.h"
#include "hyperpack/storage/storage.h"
#include "hyperpack/study/spec.h"
#include "study_binding.h"

namespace py = pybind11;

namespace hyperpack::python {
namespace {

using TrialTuple = std::tuple<int, std::string, std::optional<double>, std::string>;

// A Status as the Python exception that says the same: KeyError for what is not there,
// ValueError for bad input, RuntimeError for the rest.
[[noreturn]] void Raise(const Status& s) {
  switch (s.code()) {
    case StatusCode::kNotFound:
      throw py::key_error(s.message());
    case StatusCode::kInvalidArgument:
      throw py::value_error(s.message());
    default:
      throw std::runtime_error(s.message());
  }
}

template <typename T>
T OrRaise(Result<T> r) {
  if (!r.ok()) Raise(r.status());
  return *std::move(r);
}

class PyStudy {
 public:
  PyStudy(std::string name, std::string storage)
      : name_(std::move(name)), storage_(std::move(storage)) {
    auto db = Open();
    if (!OrRaise(db->FindStudy(name_)))
      Raise(Status::NotFound("no study named '", name_, "' in ", storage_,
                             "; make one with hyperpack.create_study(FILE, storage)"));
  }

  static std::string Create(const std::string& path, const std::string& storage) {
    study::ParseOutcome parsed = study::LoadStudyFile(path);
    if (!parsed.spec) throw py::value_error(parsed.ErrorText());
    auto db = OrRaise(storage::OpenStorage(storage));
    bool created = false;
    return OrRaise(scheduler::CreateStudy(*db, *parsed.spec, &created)).name;
  }

  std::pair<int, std::string> Ask() {
    auto db = Open();
    scheduler::AskedTrial t = OrRaise(scheduler::Ask(*db, name_, HostName(), WallNow()));
    return {t.number, ConfigToJson(t.params)};
  }

  void Tell(int number, const std::string& state, std::optional<double> value,
            std::optional<int64_t> step, const std::map<std::string, double>& values) {
    scheduler::Tell tell;
    tell.values = values;
    const std::optional<storage::TrialState> parsed = storage::ParseTrialState(state);
    if (!parsed) throw py::value_error("state '" + state + "' is not a trial state");
    tell.state = *parsed;
    tell.value = value;
    tell.step = step;
    auto db = Open();
    Status s = scheduler::TellTrial(*db, name_, number, tell, WallNow());
    if (!s.ok()) Raise(s);
  }

  void Heartbeat(int number) {
    auto db = Open();
    Status s = scheduler::HeartbeatTrial(*db, name_, number, WallNow());
    if (!s.ok()) Raise(s);
  }

  std::vector<TrialTuple> Trials() {
    auto db = Open();
    const storage::StudyRecord study = Stored(*db);
    std::vector<TrialTuple> out;
    for (const storage::TrialRecord& t : OrRaise(db->ListTrials(study.id))) out.push_back(Tuple(t));
    return out;
  }

  // As `hyperpack best`: the constraints met, and with finalists the best mean (report.h).
  std::optional<std::tuple<TrialTuple, double, int>> Best() {
    auto db = Open();
    std::optional<report::BestTrial> best = OrRaise(report::FindBestTrial(*db, name_));
    if (!best) return std::nullopt;
    return std::tuple{Tuple(best->trial), best->value, best->runs};
  }

  // As `hyperpack best --by-model`: the trial a model of every completed one recommends.
  std::pair<TrialTuple, double> Recommend() {
    auto db = Open();
    report::ModelRecommendation r = OrRaise(report::RecommendTrial(*db, name_));
    return {Tuple(r.trial), r.noise_share};
  }

  std::pair<bool, std::string> Control(const std::string& verb, const std::string& params_json,
                                       const std::string& results_text,
                                       const std::string& results_path,
                                       std::optional<int> max_trials,
                                       std::optional<int> max_parallel,
                                       std::optional<double> time_limit_s,
                                       std::optional<double> priority) {
    scheduler::ControlRequest r;
    const std::optional<scheduler::Verb> parsed = scheduler::ParseVerb(verb);
    if (!parsed) throw py::value_error("'" + verb + "' is not a verb");
    r.verb = *parsed;
    r.study = name_;
    r.params_json = params_json;
    r.results_text = results_text;
    r.results_path = results_path;
    r.max_trials = max_trials;
    r.max_parallel = max_parallel;
    r.time_limit_s = time_limit_s;
    r.priority = priority;
    auto db = Open();
    scheduler::ControlAnswer a;
    {
      py::gil_scoped_release release;  // it may wait for a runner's answer
      a = OrRaise(scheduler::ApplyControl(*db, r));
    }
    return {a.refused, a.outcome};
  }

  const std::string& name() const { return name_; }
  const std::string& storage() const { return storage_; }

 private:
  std::unique_ptr<storage::Storage> Open() const { return OrRaise(storage::OpenStorage(storage_)); }
  // The study's record now; KeyError when it was deleted since it was loaded.
  storage::StudyRecord Stored(storage::Storage& db) const {
    auto found = OrRaise(db.FindStudy(name_));
    if (!found) Raise(Status::NotFound("study '", name_, "' is gone from ", storage_));
    return *found;
  }
  static TrialTuple Tuple(const storage::TrialRecord& t) {
    return {t.number, storage::TrialStateName(t.state), t.value, ConfigToJson(t.params)};
  }

  std::string name_, storage_;
};

}  // namespace

void BindStudy(py::module_& m) {
  py::class_<PyStudy>(m, "Study")
      .def(py::init<std::string, std::string>(), py::arg("name"), py::arg("storage"))
      .def_static("create", &PyStudy::Create, py::arg("path"), py::arg("storage"))
      .def("ask", &PyStudy::Ask)
      .def("tell", &PyStudy::Tell, py::arg("number"), py::arg("state"),
           py::arg("value") = py::none(), py::arg("step") = py::none(),
           py::arg("values") = std::map<std::string, double>())
      .def("heartbeat", &PyStudy::Heartbeat, py::arg("number"))
      .def("trials", &PyStudy::Trials)
      .def("best", &PyStudy::Best)
      .def("recommend", &PyStudy::Recommend)
      .def("control", &PyStudy::Control, py::arg("verb"), py::arg("params_json") = "",
           py::arg("results_text") = "", py::arg("results_path") = "",
           py::arg("max_trials") = py::none(), py::arg("max_parallel") = py::none(),
           py::arg("time_limit_s") = py::none(), py::arg("priority") = py::none())
      .def_property_readonly("name", &PyStudy::name)
      .def_property_readonly("storage", &PyStudy::storage);
}

}  // namespace hyperpack::python
