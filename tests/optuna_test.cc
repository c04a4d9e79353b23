// hyperpack and the Optuna releases users run (3.1, Debian's; 4.6 and 5.0, released): the
// export opened by each release's own optuna.load_study. Each test runs once per release, under
// that release's python (tests/python/optuna_python), and is skipped, saying why, where the
// release is not at hand.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "test_util.h"

namespace hyperpack {
namespace {

using hyperpack::testing::RunCommand;
using hyperpack::testing::TempDir;
using hyperpack::testing::WriteFile;
using ::testing::HasSubstr;
using Json = nlohmann::json;

class OptunaTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const testing::OptunaPython found = testing::FindOptunaPython(release());
    if (found.skip) GTEST_SKIP() << found.why;
    ASSERT_FALSE(found.path.empty()) << found.why;
    python_ = found.path;
  }

  const std::string& release() const { return GetParam(); }
  bool Optuna31() const { return release() == "3.1"; }

  testing::Ran Cli(std::vector<std::string> args) {
    args.insert(args.begin(), HYPERPACK_CLI);
    args.insert(args.end(), {"--storage", db_});
    return RunCommand(args, dir_.path().string());
  }

  std::string Write(const std::string& name, const std::string& text) {
    std::string path = dir_ / name;
    WriteFile(path, text);
    return path;
  }

  // `script` run by this release's python with `args`; its standard output as JSON.
  Json Python(const std::string& script, std::vector<std::string> args) {
    args.insert(args.begin(), {python_, Write("script.py", script)});
    auto r = RunCommand(args, dir_.path().string());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? Json::parse(r.out.substr(r.out.rfind("\n{") + 1)) : Json();
  }

  // The export as this release opens it: Optuna 3.1's schema where asked, else the default.
  testing::Ran Export(const std::string& study, const std::string& file) {
    std::vector<std::string> args = {"export", study, "--format", "optuna-sqlite", "-o", file};
    if (Optuna31()) args.insert(args.end(), {"--optuna", "3.1"});
    return Cli(args);
  }

  TempDir dir_;
  std::string db_ = dir_ / "hp.db";
  std::string python_;
};

std::string ReleaseName(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = "Optuna" + info.param;
  name.erase(std::remove(name.begin(), name.end(), '.'), name.end());
  return name;
}

INSTANTIATE_TEST_SUITE_P(Releases, OptunaTest, ::testing::Values("3.1", "4.6", "5.0"), ReleaseName);

// The exported study "op" as Optuna reads it.
constexpr char kReadStudy[] = R"(
import json, sys, optuna
optuna.logging.set_verbosity(optuna.logging.WARNING)
study = optuna.load_study(study_name="op", storage="sqlite:///" + sys.argv[1])
print(json.dumps({
    "direction": study.direction.name,
    "best": [study.best_trial.number, study.best_value],
    "trials": [{"number": t.number, "state": t.state.name, "value": t.value, "params": t.params,
                "steps": {str(k): v for k, v in t.intermediate_values.items()},
                "hyperpack_state": t.user_attrs["hyperpack_state"]} for t in study.trials]}))
)";

// Every trial with its state, value, parameters (a log float, a stepped int, a categorical of
// mixed types, a fixed value, a conditional one only where active) and intermediate values, and
// the best trial, as hyperpack's own reports say.
TEST_P(OptunaTest, TheExportOpensWithEveryTrialAsHyperpackHasIt) {
  constexpr char kStudy[] = R"(
name: op
objective: {metric: loss, direction: minimize}
search_space:
  x: {type: float, low: 0.001, high: 1, log: true}
  n: {type: int, low: 1, high: 9, step: 2}
  opt: {type: categorical, values: [sgd, adam, true, 3]}
  f: 7
  m: {type: float, low: 0, high: 1, when: opt == sgd}
trial:
  command: >-
    printf '{{"step": 1, "loss": 1}}\n{{"step": 2, "loss": {x}}}\n'; [ {n} -gt 6 ] && exit 1; true
tuner: {algorithm: sobol, seed: 3}
budget: {max_trials: 8, max_parallel: 2, max_failed: 10}
)";
  ASSERT_EQ(Cli({"run", Write("op.yaml", kStudy)}).exit_code, 0);
  Json ours = Json::parse(Cli({"trials", "op", "--json"}).out);
  Json best = Json::parse(Cli({"best", "op", "--json"}).out);
  std::string file = dir_ / "optuna.db";
  auto exported = Export("op", file);
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_THAT(exported.err,
              HasSubstr(Optuna31() ? "for Optuna 3.0 and 3.1" : "for Optuna 3.2 and later"));

  Json theirs = Python(kReadStudy, {file});
  EXPECT_EQ(theirs["direction"], "MINIMIZE");
  EXPECT_EQ(theirs["best"][0], best["trial"]);
  EXPECT_EQ(theirs["best"][1], best["value"]);
  ASSERT_EQ(theirs["trials"].size(), ours.size());
  int failed = 0;
  for (size_t i = 0; i < ours.size(); ++i) {
    const Json& a = ours[i];
    const Json& b = theirs["trials"][i];
    EXPECT_EQ(b["number"], a["trial"]);
    EXPECT_EQ(b["hyperpack_state"], a["state"]);
    EXPECT_EQ(b["params"], a["params"]) << "trial " << i;
    EXPECT_EQ(b["steps"]["1"], 1.0);
    EXPECT_EQ(b["steps"]["2"], a["params"]["x"]);
    if (a["state"] == "completed") {
      EXPECT_EQ(b["state"], "COMPLETE");
      EXPECT_EQ(b["value"], a["value"]);
    } else {
      EXPECT_EQ(a["state"], "failed");
      EXPECT_EQ(b["state"], "FAIL");
      EXPECT_TRUE(b["value"].is_null());
      ++failed;
    }
  }
  EXPECT_GT(failed, 0);  // the space's n > 6 fails: both kinds of trial were checked
}

// A study whose trials a program asks for and tells: completed, pruned at a step, failed and one
// still running, each in Optuna's state, a pruned one with its value and intermediate value.
TEST_P(OptunaTest, AskedAndToldTrialsKeepTheirStatesInTheExport) {
  ASSERT_EQ(Cli({"create", Write("q.yaml", R"(name: q
objective: {metric: acc, direction: maximize}
search_space:
  x: {type: float, low: 0, high: 1}
tuner: {algorithm: sobol, seed: 1}
budget: {max_trials: 8}
)")})
                .exit_code,
            0);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(Cli({"ask", "q"}).exit_code, 0);
  ASSERT_EQ(Cli({"tell", "q", "0", "--value", "0.75"}).exit_code, 0);
  auto pruned = Cli({"tell", "q", "1", "--state", "pruned", "--value", "0.25", "--step", "3"});
  ASSERT_EQ(pruned.exit_code, 0) << pruned.err;
  ASSERT_EQ(Cli({"tell", "q", "2", "--state", "failed"}).exit_code, 0);
  std::string file = dir_ / "q.db";
  ASSERT_EQ(Export("q", file).exit_code, 0);
  Json theirs = Python(R"(
import json, sys, optuna
optuna.logging.set_verbosity(optuna.logging.WARNING)
study = optuna.load_study(study_name="q", storage="sqlite:///" + sys.argv[1])
print(json.dumps({"direction": study.direction.name, "best": study.best_value,
                  "trials": [[t.state.name, t.value, {str(k): v for k, v in
                              t.intermediate_values.items()}] for t in study.trials]}))
)",
                       {file});
  EXPECT_EQ(theirs["direction"], "MAXIMIZE");
  EXPECT_EQ(theirs["best"], 0.75);
  ASSERT_EQ(theirs["trials"].size(), 4u);
  EXPECT_EQ(theirs["trials"][0][0], "COMPLETE");
  EXPECT_EQ(theirs["trials"][0][1], 0.75);
  EXPECT_EQ(theirs["trials"][1], Json::parse(R"(["PRUNED", 0.25, {"3": 0.25}])"));
  EXPECT_EQ(theirs["trials"][2][0], "FAIL");
  EXPECT_EQ(theirs["trials"][3][0], "RUNNING");
}

// The exported study "mo" as Optuna reads it: its trials, best_trials and feasible front.
constexpr char kReadFront[] = R"(
import json, sys, optuna
from optuna.study._multi_objective import _get_pareto_front_trials_by_trials
optuna.logging.set_verbosity(optuna.logging.WARNING)
study = optuna.load_study(study_name="mo", storage="sqlite:///" + sys.argv[1])
done = study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
feasible = [t for t in done if all(v <= 0 for v in t.system_attrs["constraints"])]
print(json.dumps({
    "directions": [d.name for d in study.directions],
    "best_trials": sorted(t.number for t in study.best_trials),
    "feasible_front": sorted(t.number for t in
                             _get_pareto_front_trials_by_trials(feasible, study.directions)),
    "named": [getattr(t, "constraints", {"0": t.system_attrs["constraints"][0]}) for t in done],
    "trials": {str(t.number): {"values": t.values, "constraints": t.system_attrs["constraints"]}
               for t in done}}))
)";

// Two objectives (one maximised) and a constraint: the directions, every completed trial's
// values, the constraints' violations as Optuna's samplers write them, and the Pareto set. Optuna
// 4.x and 5.x's best_trials is hyperpack's front (both leave out trials that break a
// constraint); 3.1's ignores constraints, so there it holds no feasible trial off that front.
TEST_P(OptunaTest, AMultiObjectiveExportHasHyperpacksParetoSetAsBestTrials) {
  Write("f.sh", R"(awk -v x="$1" -v y="$2" 'BEGIN {
  printf "{\"a\": %.6f, \"c\": %.6f, \"mem\": %.6f}\n", x, -(1 - x) * (1 - x) - y, y }')");
  auto run = Cli({"run", Write("mo.yaml", R"(name: mo
objectives:
  - {metric: a, direction: minimize}
  - {metric: c, direction: maximize}
constraints: [{metric: mem, max: 0.5}]
search_space:
  x: {type: float, low: 0, high: 1}
  y: {type: float, low: 0, high: 1}
trial: {command: "sh f.sh {x} {y}"}
tuner: {algorithm: sobol, seed: 5}
budget: {max_trials: 16}
)")});
  ASSERT_EQ(run.exit_code, 0) << run.err << run.out;
  Json ours = Json::parse(Cli({"trials", "mo", "--json"}).out);
  auto best = Cli({"best", "mo", "--json"});
  ASSERT_EQ(best.exit_code, 0) << best.err;
  std::set<int> front;
  const Json set = Json::parse(best.out);
  for (const Json& t : set["front"]) front.insert(t["trial"].get<int>());
  std::string file = dir_ / "mo.db";
  ASSERT_EQ(Export("mo", file).exit_code, 0);

  Json theirs = Python(kReadFront, {file});
  EXPECT_EQ(theirs["directions"], Json::parse(R"(["MINIMIZE", "MAXIMIZE"])"));
  ASSERT_EQ(theirs["trials"].size(), ours.size());  // every trial completed
  std::set<int> breakers;
  for (const Json& t : ours) {
    ASSERT_EQ(t["state"], "completed") << t.dump();
    const Json& o = theirs["trials"][std::to_string(t["trial"].get<int>())];
    EXPECT_EQ(o["values"], Json::array({t["values"]["a"], t["values"]["c"]})) << t.dump();
    ASSERT_EQ(o["constraints"].size(), 1u);
    EXPECT_NEAR(o["constraints"][0].get<double>(), t["values"]["mem"].get<double>() - 0.5, 1e-12);
    EXPECT_EQ(o["constraints"][0].get<double>() <= 0, t["feasible"].get<bool>()) << t.dump();
    if (!t["feasible"].get<bool>()) breakers.insert(t["trial"].get<int>());
  }
  for (const Json& named : theirs["named"]) EXPECT_EQ(named.size(), 1u) << named;  // 5.0's view
  ASSERT_FALSE(breakers.empty());
  ASSERT_GE(front.size(), 2u);
  EXPECT_EQ(theirs["feasible_front"].get<std::set<int>>(), front);
  if (!Optuna31()) {
    EXPECT_EQ(theirs["best_trials"].get<std::set<int>>(), front);
    return;
  }
  for (int n : theirs["best_trials"].get<std::set<int>>())
    EXPECT_TRUE(breakers.count(n) || front.count(n)) << "trial " << n;
}

// Studies made by this release's own optimize(), in its RDB storage and in a journal file: a
// conditional space (a log float under one classifier, a log int and a stepped int under the
// other), a float on a grid, a categorical of mixed types; pruned, failed and enqueued trials; and
// a study of two named objectives with a constraint (Trial.set_constraint where the release has
// it, else NSGA-II's constraints_func). Prints what Optuna holds of each, as JSON.
constexpr char kMakeStudies[] = R"(
import json, math, sys, warnings, optuna
warnings.simplefilter("ignore")
optuna.logging.set_verbosity(optuna.logging.WARNING)
def storage(kind):
    if kind == "db":
        return "sqlite:///optuna.db"
    try:
        from optuna.storages.journal import JournalFileBackend as Backend
    except ImportError:  # Optuna 3.1
        from optuna.storages import JournalFileStorage as Backend
    return optuna.storages.JournalStorage(Backend("journal.log"))
def clf(trial):
    kind = trial.suggest_categorical("classifier", ["svc", "forest"])
    if kind == "svc":
        loss = (math.log10(trial.suggest_float("svc_c", 1e-3, 1e3, log=True)) - 1) ** 2
    else:
        loss = abs(trial.suggest_int("depth", 2, 32, log=True) - 8) / 8
        loss += trial.suggest_int("n_estimators", 10, 200, step=10) / 1000
    loss += trial.suggest_float("lr", 0.0, 1.0, step=0.1)
    trial.suggest_categorical("flag", [True, False, 3, 2.5])
    if trial.number == 7:
        raise RuntimeError("a trial that fails")
    for step in range(3):
        trial.report(loss + 1.0 / (step + 1), step)
        if trial.should_prune():
            raise optuna.TrialPruned()
    return loss
named = hasattr(optuna.trial.Trial, "set_constraint")
def mo(trial):
    x, y = trial.suggest_float("x", 0, 1), trial.suggest_float("y", 0, 1)
    if named:
        trial.set_constraint("mem", y - 0.5)
    return x, -(1 - x) ** 2 - y
out = {}
for kind in ["db", "journal"]:
    s = optuna.create_study(study_name="clf", storage=storage(kind),
                            sampler=optuna.samplers.RandomSampler(seed=1),
                            pruner=optuna.pruners.MedianPruner(n_startup_trials=4, n_warmup_steps=1))
    s.enqueue_trial({"classifier": "svc", "svc_c": 10.0, "lr": 0.0, "flag": True})
    s.optimize(clf, n_trials=24, catch=(RuntimeError,))
    s.enqueue_trial({"classifier": "forest", "depth": 8, "n_estimators": 10, "lr": 0.0, "flag": 3})
    sampler = (optuna.samplers.RandomSampler(seed=2) if named else optuna.samplers.NSGAIISampler(
        seed=2, constraints_func=lambda t: [t.params["y"] - 0.5]))
    m = optuna.create_study(study_name="mo", storage=storage(kind), sampler=sampler,
                            directions=["minimize", "maximize"])
    if hasattr(m, "set_metric_names"):
        m.set_metric_names(["error", "score"])
    m.optimize(mo, n_trials=12)
out["clf"] = [{"state": t.state.name, "params": t.params, "value": t.value,
               "steps": {str(k): v for k, v in t.intermediate_values.items()}} for t in s.trials]
out["enqueued"] = s.trials[-1].system_attrs["fixed_params"]
from optuna.study._multi_objective import _get_pareto_front_trials_by_trials
feasible = [t for t in m.trials if t.params["y"] <= 0.5]
out["mo"] = {"metrics": getattr(m, "metric_names", None) or ["value_0", "value_1"],
             "trials": [{"values": t.values, "constraint": t.params["y"] - 0.5} for t in m.trials],
             "front": sorted(t.number for t in
                             _get_pareto_front_trials_by_trials(feasible, m.directions))}
print(json.dumps(out))
)";

// Each release's own studies, from its database and from its journal, imported with their
// history: every trial that ended with its state, parameters and value, the enqueued one queued,
// the space's conditions as the trials show them; then exported again and opened by the same
// release with the same intermediate values; and `hyperpack run` goes on from them.
TEST_P(OptunaTest, ItsOwnStudiesImportWithTheirHistoryAndRunOn) {
  const Json optuna = Python(kMakeStudies, {});
  ASSERT_FALSE(optuna.is_null());
  for (const std::string file : {"optuna.db", "journal.log"}) {
    SCOPED_TRACE(file);
    db_ = dir_ / (file + ".hp.db");
    auto imported = Cli({"import", file, "--study", "clf", "-o", "clf.yaml", "--trials", "3",
                         "--command", "printf '{{\"value\": %s}}\\n' {lr}"});
    ASSERT_EQ(imported.exit_code, 0) << imported.err;
    EXPECT_THAT(imported.err, HasSubstr("1 queued to run first"));
    EXPECT_THAT(imported.err, HasSubstr("Optuna's step (a grid of floats) is dropped"));
    const std::string yaml = testing::ReadFile(dir_ / "clf.yaml");
    EXPECT_THAT(yaml, HasSubstr("svc_c: {type: float, low: 0.001, high: 1000.0, log: true, "
                                "when: classifier == svc}"));
    EXPECT_THAT(yaml, HasSubstr("n_estimators: {type: int, low: 10, high: 200, step: 10, when: "
                                "classifier == forest}"));
    const Json ours = Json::parse(Cli({"trials", "clf", "--json"}).out);
    const Json& theirs = optuna["clf"];
    ASSERT_EQ(ours.size() + 1, theirs.size());  // all but the enqueued one, still WAITING
    std::map<std::string, std::string> states = {
        {"COMPLETE", "completed"}, {"PRUNED", "pruned"}, {"FAIL", "failed"}};
    std::set<std::string> seen;
    for (size_t i = 0; i < ours.size(); ++i) {
      EXPECT_EQ(ours[i]["state"], states[theirs[i]["state"]]) << i;
      EXPECT_EQ(ours[i]["params"], theirs[i]["params"]) << i;
      seen.insert(ours[i]["state"]);
      if (theirs[i]["state"] == "COMPLETE") {
        EXPECT_EQ(ours[i]["value"], theirs[i]["value"]) << i;
      }
    }
    EXPECT_EQ(seen, (std::set<std::string>{"completed", "pruned", "failed"}));

    // Exported again, the same release opens it with the intermediate values it recorded.
    ASSERT_EQ(Export("clf", dir_ / (file + ".back.db")).exit_code, 0);
    const Json back = Python(R"(
import json, sys, optuna
s = optuna.load_study(study_name="clf", storage="sqlite:///" + sys.argv[1])
print(json.dumps([{"state": t.state.name, "params": t.params,
                   "steps": {str(k): v for k, v in t.intermediate_values.items()}}
                  for t in s.trials]))
)",
                             {dir_ / (file + ".back.db")});
    ASSERT_EQ(back.size(), ours.size());
    for (size_t i = 0; i < back.size(); ++i) {
      EXPECT_EQ(back[i]["state"], theirs[i]["state"]) << i;
      EXPECT_EQ(back[i]["steps"], theirs[i]["steps"]) << i;
      EXPECT_EQ(back[i]["params"], theirs[i]["params"]) << i;
    }

    // hyperpack run goes on: the enqueued configuration first, then its own proposals.
    auto run = Cli({"run", "clf.yaml"});
    ASSERT_EQ(run.exit_code, 0) << run.err << run.out;
    const Json after = Json::parse(Cli({"trials", "clf", "--json"}).out);
    ASSERT_EQ(after.size(), ours.size() + 3);
    EXPECT_EQ(after[ours.size()]["params"], optuna["enqueued"]);
    EXPECT_EQ(after[ours.size()]["state"], "completed");
    EXPECT_EQ(after.back()["trial"], ours.size() + 2);
  }
}

// Two objectives (named by set_metric_names where the release has it) and a constraint: the
// objectives and the constraint as the study file's, each trial's values by metric, and the
// Pareto set as Optuna takes it (the trials whose constraint holds).
TEST_P(OptunaTest, AMultiObjectiveStudyImportsWithItsConstraint) {
  const Json optuna = Python(kMakeStudies, {});
  ASSERT_FALSE(optuna.is_null());
  const Json& mo = optuna["mo"];
  const std::string a = mo["metrics"][0], b = mo["metrics"][1];
  for (const std::string file : {"optuna.db", "journal.log"}) {
    SCOPED_TRACE(file);
    db_ = dir_ / (file + ".hp.db");
    auto imported = Cli({"import", file, "--study", "mo", "-o", "mo.yaml"});
    ASSERT_EQ(imported.exit_code, 0) << imported.err;
    EXPECT_THAT(imported.err, HasSubstr("go on with hyperpack ask mo"));
    const std::string yaml = testing::ReadFile(dir_ / "mo.yaml");
    EXPECT_THAT(yaml, HasSubstr("- {metric: " + a + ", direction: minimize}"));
    EXPECT_THAT(yaml, HasSubstr("- {metric: " + b + ", direction: maximize}"));
    const std::string constraint =
        Optuna31() || release() == "4.6" ? "constraint_0" : "constraint_mem";
    EXPECT_THAT(yaml, HasSubstr("- {metric: " + constraint + ", max: 0}"));
    const Json ours = Json::parse(Cli({"trials", "mo", "--json"}).out);
    ASSERT_EQ(ours.size(), mo["trials"].size());
    for (size_t i = 0; i < ours.size(); ++i) {
      const Json& t = mo["trials"][i];
      EXPECT_EQ(ours[i]["values"][a], t["values"][0]) << i;
      EXPECT_EQ(ours[i]["values"][b], t["values"][1]) << i;
      EXPECT_NEAR(ours[i]["values"][constraint].get<double>(), t["constraint"].get<double>(),
                  1e-12);
      EXPECT_EQ(ours[i]["feasible"].get<bool>(), t["constraint"].get<double>() <= 0) << i;
    }
    auto best = Cli({"best", "mo", "--json"});
    ASSERT_EQ(best.exit_code, 0) << best.err;
    std::set<int> front;
    const Json set = Json::parse(best.out);
    for (const Json& t : set["front"]) front.insert(t["trial"].get<int>());
    EXPECT_FALSE(front.empty());
    EXPECT_EQ(front, mo["front"].get<std::set<int>>());
  }
}

// What --optuna takes (a bad one writes nothing), and the note that says which flag an older
// Optuna needs.
TEST(OptunaExportTest, TheReleaseFlagSaysWhatItTakes) {
  TempDir dir;
  const std::string db = dir / "hp.db";
  auto cli = [&](std::vector<std::string> args) {
    args.insert(args.begin(), HYPERPACK_CLI);
    args.insert(args.end(), {"--storage", db});
    return RunCommand(args, dir.path().string());
  };
  WriteFile(dir / "s.yaml", R"(name: s
objective: {metric: loss, direction: minimize}
search_space: {x: {type: float, low: 0, high: 1}}
trial: {command: "echo '{{\"loss\": {x}}}'"}
budget: {max_trials: 2}
)");
  ASSERT_EQ(cli({"run", dir / "s.yaml"}).exit_code, 0);
  for (const char* bad : {"2.10", "banana", "3", "4.x"}) {
    auto r = cli({"export", "s", "--format", "optuna-sqlite", "-o", dir / "x.db", "--optuna", bad});
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_THAT(r.err, HasSubstr("--optuna")) << bad;
    EXPECT_FALSE(std::filesystem::exists(dir / "x.db")) << bad;
  }
  EXPECT_THAT(
      cli({"export", "s", "--format", "optuna-sqlite", "-o", dir / "x.db", "--optuna", "2.10"}).err,
      HasSubstr("Optuna before 3.0 has another schema"));
  auto yaml = cli({"export", "s", "--optuna", "3.1"});
  EXPECT_EQ(yaml.exit_code, 2);
  EXPECT_THAT(yaml.err, HasSubstr("--optuna goes with --format optuna-sqlite"));
  for (const char* good : {"3.1", "3.0.6", "3.2", "4.6.0", "5.0.0rc1", "5"}) {
    const std::string file = dir / (std::string("ok-") + good + ".db");
    auto r = cli({"export", "s", "--format", "optuna-sqlite", "-o", file, "--optuna", good});
    EXPECT_EQ(r.exit_code, 0) << good << r.err;
    const bool old = std::string(good).rfind("3.0", 0) == 0 || std::string(good) == "3.1";
    EXPECT_THAT(r.err, HasSubstr(old ? "for Optuna 3.0 and 3.1" : "for Optuna 3.2 and later"));
  }
  auto plain = cli({"export", "s", "--format", "optuna-sqlite", "-o", dir / "plain.db"});
  EXPECT_THAT(plain.err, HasSubstr("for Optuna 3.0 or 3.1, export with --optuna 3.1"));
}

// What cannot be imported says why, and stores nothing: a storage of several studies without
// --study, a study stored already (its trials kept as they were), a database an Optuna before 3.0
// set up, an SQLite file that is not Optuna's, a damaged journal; and a storage given to `run`.
TEST(OptunaImportCliTest, WhatCannotGoOverSaysWhyAndStoresNothing) {
  TempDir dir;
  const std::string hp = dir / "hp.db";
  auto cli = [&](std::vector<std::string> args) {
    args.insert(args.begin(), HYPERPACK_CLI);
    args.insert(args.end(), {"--storage", hp});
    return RunCommand(args, dir.path().string());
  };
  WriteFile(dir / "make.py", R"(
import shutil, sqlite3, optuna
optuna.logging.set_verbosity(optuna.logging.WARNING)
for name in ["a", "b"]:
    s = optuna.create_study(study_name=name, storage="sqlite:///optuna.db")
    s.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=3)
shutil.copy("optuna.db", "old.db")
with sqlite3.connect("old.db") as c:
    c.execute("UPDATE alembic_version SET version_num = 'v2.6.0.a'")
shutil.copy("optuna.db", "older.db")  # as Optuna 0.9 left one: no alembic revision at all
with sqlite3.connect("older.db") as c:
    c.execute("DROP TABLE alembic_version")
    c.execute("UPDATE version_info SET library_version = '0.9.0'")
)");
  auto made = RunCommand({"/usr/bin/python3", dir / "make.py"}, dir.path().string());
  ASSERT_EQ(made.exit_code, 0) << made.err;

  auto which = cli({"import", "optuna.db", "-o", "a.yaml"});
  EXPECT_NE(which.exit_code, 0);
  EXPECT_THAT(which.err, HasSubstr("holds 2 Optuna studies ('a', 'b'): name one with --study"));
  EXPECT_FALSE(std::filesystem::exists(dir / "a.yaml"));
  ASSERT_EQ(cli({"import", "optuna.db", "--study", "a", "-o", "a.yaml"}).exit_code, 0);
  auto again = cli({"import", "optuna.db", "--study", "a", "-o", "a.yaml"});
  EXPECT_NE(again.exit_code, 0);
  EXPECT_THAT(again.err, HasSubstr("study 'a' is stored in"));
  EXPECT_THAT(again.err, HasSubstr("already; nothing was imported"));
  EXPECT_EQ(Json::parse(cli({"trials", "a", "--json"}).out).size(), 3u);

  auto old = cli({"import", "old.db", "--study", "b"});
  EXPECT_NE(old.exit_code, 0);
  EXPECT_THAT(old.err, HasSubstr("was set up by an Optuna before 3.0 (schema revision v2.6.0.a); "
                                 "upgrade it first with Optuna 3.0 or later: optuna storage "
                                 "upgrade --storage sqlite:///old.db"));
  auto older = cli({"import", "older.db", "--study", "b"});
  EXPECT_NE(older.exit_code, 0);
  EXPECT_THAT(older.err, HasSubstr("was set up by Optuna 0.9.0 (no schema revision); upgrade it"));
  auto ours = cli({"import", hp});
  EXPECT_NE(ours.exit_code, 0);
  EXPECT_THAT(ours.err, HasSubstr("is an SQLite database but not Optuna's"));
  WriteFile(dir / "bad.log",
            "{\"op_code\":0,\"study_name\":\"s\",\"directions\":[1]}\n{oops\n"
            "{\"op_code\":1,\"study_id\":0}\n");
  auto bad = cli({"import", "bad.log", "--from", "optuna"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.err, HasSubstr("bad.log:2: not a line of Optuna's journal"));
  auto run = cli({"run", "optuna.db"});
  EXPECT_NE(run.exit_code, 0);
  EXPECT_THAT(run.err, HasSubstr("an Optuna storage holds a study and its trials, not a sweep: "
                                 "store it with hyperpack import optuna.db"));
  auto listed = Json::parse(cli({"status", "--json"}).out);
  EXPECT_EQ(listed.size(), 1u) << listed;  // a alone
}

}  // namespace
}  // namespace hyperpack
