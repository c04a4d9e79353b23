// The study page's data (report/src/page_data.h) and its HTML (page.h), on records written here:
// the timeline's lanes and segments, costs, curves and their marks, importance, and bytes from
// trials that must not break the page.
#include "page_data.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "costs.h"
#include "page.h"

namespace hyperpack::report {
namespace {

using nlohmann::json;
using storage::EventRecord;
using storage::JournalEntry;
using storage::JournalKind;
using storage::TrialRecord;
using storage::TrialState;
using study::ParseOutcome;
using study::ParseStudy;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kSpec[] = R"(name: s
objective: {metric: loss, direction: minimize}
search_space:
  x: {type: float, low: 0, high: 1}
  opt: {type: categorical, values: [sgd, adam]}
  seed: {type: fixed, value: 1}
trial: {command: "true"}
pruner: {algorithm: asha, max_resource: 9}
)";

TrialRecord Trial(int number, TrialState state, double started, std::optional<double> ended,
                  const std::string& placement = "") {
  TrialRecord t;
  t.number = number;
  t.state = state;
  t.params = {{"x", 0.5}, {"opt", "sgd"}, {"seed", int64_t{1}}};
  t.started = started;
  t.ended = ended;
  t.host = "h";
  t.placement = storage::DecodePlacement(placement);  // as a stored row reads
  return t;
}

StudyView Input() {
  StudyView in;
  in.study.name = "s";
  in.study.metric = "loss";
  in.study.direction = Direction::kMinimize;
  ParseOutcome parsed = ParseStudy(kSpec, "s.yaml");
  EXPECT_TRUE(parsed.errors.empty()) << parsed.ErrorText();
  in.spec = parsed.spec;
  in.now = 1000;
  return in;
}

std::vector<std::string> BarsOf(const Timeline& t, int trial) {
  std::vector<std::string> out;
  for (const TimelineBar& b : t.bars)
    if (b.trial == trial) out.push_back(b.lane + "@" + std::to_string(b.start));
  return out;
}

TEST(PageDataTest, CpuTrialsTakeTheLowestFreeSlotsAndGpuTrialsTheirDevices) {
  StudyView in = Input();
  const std::string cpu = R"([{"host":"h","gpus":[],"cpus":1}])";
  in.trials = {Trial(0, TrialState::kCompleted, 10, 20, cpu),
               Trial(1, TrialState::kCompleted, 12, 30, cpu),
               Trial(2, TrialState::kCompleted, 21, 25, cpu),  // after 0 ended: slot 0 again
               Trial(3, TrialState::kCompleted, 11, 40, R"([{"host":"g","gpus":[2,5],"cpus":4}])"),
               Trial(4, TrialState::kFailed, 50, 51, "not json"),  // one slot of its host
               Trial(5, TrialState::kPending, 0, std::nullopt)};
  in.trials[5].started.reset();  // never ran: no bar
  Timeline t = BuildTimeline(in);
  EXPECT_THAT(BarsOf(t, 0), ElementsAre("h/cpu0@10.000000"));
  EXPECT_THAT(BarsOf(t, 1), ElementsAre("h/cpu1@12.000000"));
  EXPECT_THAT(BarsOf(t, 2), ElementsAre("h/cpu0@21.000000"));
  EXPECT_THAT(BarsOf(t, 3), ElementsAre("g/gpu2@11.000000", "g/gpu5@11.000000"));
  EXPECT_THAT(BarsOf(t, 4), ElementsAre("h/cpu0@50.000000"));
  EXPECT_THAT(BarsOf(t, 5), ElementsAre());
  std::vector<std::string> lanes;
  for (const TimelineLane& l : t.lanes) lanes.push_back(l.id);
  EXPECT_THAT(lanes, ElementsAre("h/cpu0", "h/cpu1", "g/gpu2", "g/gpu5"));

  json d = PageData(in);
  EXPECT_EQ(d["trials"][3]["gpus"], 2);
  EXPECT_EQ(d["trials"][3]["cost"], 58.0);  // 29 s x 2 GPUs
  EXPECT_EQ(d["trials"][3]["cost_unit"], "GPU-s");
  EXPECT_EQ(d["trials"][1]["cost"], 18.0);  // 18 s x 1 CPU slot
  EXPECT_EQ(d["trials"][1]["cost_unit"], "CPU-s");
  EXPECT_TRUE(d["trials"][5]["cost"].is_null());
  EXPECT_EQ(d["timeline"]["bars"].size(), t.bars.size());
}

// Trials sharing a GPU each take the first free share lane under it, so packed trials do not
// draw over one another; a GPU also used whole keeps its own lane, one used only by shares has
// none.
TEST(PageDataTest, TrialsSharingAGpuTakeItsShareLanesInTurn) {
  StudyView in = Input();
  const std::string share0 = R"([{"host":"g","gpus":[0],"cpus":1,"gpu_share":0.25}])";
  const std::string share1 = R"([{"host":"g","gpus":[1],"cpus":1,"gpu_share":0.5}])";
  in.trials = {Trial(0, TrialState::kCompleted, 10, 20, share0),
               Trial(1, TrialState::kCompleted, 12, 30, share0),
               Trial(2, TrialState::kCompleted, 15, 25, share0),
               Trial(3, TrialState::kCompleted, 21, 40, share0),  // after 0 ended: share 1 again
               Trial(4, TrialState::kCompleted, 50, 60, R"([{"host":"g","gpus":[0],"cpus":1}])"),
               Trial(5, TrialState::kCompleted, 10, 20, share1)};
  Timeline t = BuildTimeline(in);
  EXPECT_THAT(BarsOf(t, 0), ElementsAre("g/gpu0/share0@10.000000"));
  EXPECT_THAT(BarsOf(t, 1), ElementsAre("g/gpu0/share1@12.000000"));
  EXPECT_THAT(BarsOf(t, 2), ElementsAre("g/gpu0/share2@15.000000"));
  EXPECT_THAT(BarsOf(t, 3), ElementsAre("g/gpu0/share0@21.000000"));
  EXPECT_THAT(BarsOf(t, 4), ElementsAre("g/gpu0@50.000000"));
  EXPECT_THAT(BarsOf(t, 5), ElementsAre("g/gpu1/share0@10.000000"));
  std::vector<std::string> lanes, labels;
  for (const TimelineLane& l : t.lanes) {
    lanes.push_back(l.id);
    labels.push_back(l.label);
  }
  EXPECT_THAT(lanes, ElementsAre("g/gpu0", "g/gpu0/share0", "g/gpu0/share1", "g/gpu0/share2",
                                 "g/gpu1/share0"));
  EXPECT_EQ(labels[1], "g gpu 0 share 1");
}

TEST(PageDataTest, APausedTrialIsCutAtItsPauseAndARunningOneEndsNow) {
  StudyView in = Input();
  in.trials = {Trial(0, TrialState::kRunning, 100, std::nullopt),
               Trial(1, TrialState::kRunning, 100, std::nullopt)};
  in.events = {{150, 0, "trial_paused", "rung 1"},
               {400, 0, "trial_resumed", "to epoch 3"},
               {160, 1, "trial_finished", "completed"}};
  Timeline t = BuildTimeline(in);
  std::vector<std::pair<double, double>> zero;
  for (const TimelineBar& b : t.bars)
    if (b.trial == 0) zero.emplace_back(b.start, b.end);
  EXPECT_THAT(zero, ElementsAre(std::pair(100.0, 150.0), std::pair(400.0, 1000.0)));
  json d = PageData(in);
  EXPECT_EQ(d["trials"][0]["duration"], 50.0 + 600.0);
  EXPECT_EQ(d["trials"][1]["duration"], 900.0);  // still running at `now`
}

TEST(TrialCostsTest, RunTimeLessPausesTimesTheGpusOrTheirShareOrElseTheCpuSlots) {
  StudyView in = Input();
  in.trials = {
      Trial(0, TrialState::kCompleted, 100, 400, R"([{"host":"g","gpus":[0,1],"cpus":1}])"),
      Trial(1, TrialState::kCompleted, 100, 130, R"([{"host":"h","gpus":[],"cpus":3}])"),
      Trial(2, TrialState::kCompleted, 100, 150),  // no placement: one slot
      Trial(3, TrialState::kPending, 0, std::nullopt),
      Trial(4, TrialState::kCompleted, 100, 140,
            R"([{"host":"g","gpus":[1],"cpus":1,"gpu_share":0.25}])")};  // a quarter of a GPU
  in.trials[3].started.reset();
  in.events = {{150, 0, "trial_paused", "rung 1"}, {350, 0, "trial_resumed", "to epoch 3"}};
  const std::map<int, TrialCost> costs = TrialCosts(in);
  ASSERT_EQ(costs.size(), 4u) << "the trial that never started has none";
  EXPECT_DOUBLE_EQ(costs.at(0).seconds, 50 + 50);
  EXPECT_EQ(costs.at(0).gpus, 2);
  EXPECT_DOUBLE_EQ(costs.at(0).cost, 200);  // GPU-seconds
  EXPECT_TRUE(costs.at(0).gpu());
  EXPECT_DOUBLE_EQ(costs.at(1).cost, 90);  // 30 s x 3 CPU slots
  EXPECT_FALSE(costs.at(1).gpu());
  EXPECT_DOUBLE_EQ(costs.at(2).cost, 50);
  EXPECT_DOUBLE_EQ(costs.at(4).cost, 10);  // 40 s x a quarter of a GPU, as the budget charges
  EXPECT_TRUE(costs.at(4).gpu());
  // The page says the same.
  json d = PageData(in);
  EXPECT_EQ(d["trials"][0]["cost"], 200.0);
  EXPECT_EQ(d["trials"][1]["cost"], 90.0);
}

TEST(ParseToleranceTest, AbsoluteOrAPercentageOfTheBest) {
  Result<Tolerance> abs = ParseTolerance("0.002");
  ASSERT_TRUE(abs.ok()) << abs.status().message();
  EXPECT_DOUBLE_EQ(abs->amount, 0.002);
  EXPECT_FALSE(abs->relative);
  Result<Tolerance> rel = ParseTolerance("0.2%");
  ASSERT_TRUE(rel.ok()) << rel.status().message();
  EXPECT_DOUBLE_EQ(rel->amount, 0.002);
  EXPECT_TRUE(rel->relative);
  for (const char* bad : {"", "%", "-1", "abc", "nan", "inf", "1%%", "0.2 %x"}) {
    Result<Tolerance> t = ParseTolerance(bad);
    EXPECT_FALSE(t.ok()) << bad;
    if (!t.ok()) {
      EXPECT_THAT(t.status().message(), HasSubstr("--within")) << bad;
    }
  }
}

TEST(CheapestWithinTest, TheCheapestTrialNoFurtherFromTheBestThanAllowed) {
  // Maximize accuracy: trial 0 is best (0.90, 100 CPU-s); 1 is 0.899 at 20; 2 is 0.895 at 5.
  std::vector<TrialRecord> trials = {Trial(0, TrialState::kCompleted, 0, 100),
                                     Trial(1, TrialState::kCompleted, 0, 20),
                                     Trial(2, TrialState::kCompleted, 0, 5)};
  trials[0].value = 0.90;
  trials[1].value = 0.899;
  trials[2].value = 0.895;
  std::vector<const TrialRecord*> ranked = {&trials[0], &trials[1], &trials[2]};
  std::map<int, TrialCost> costs = {{0, {100, 0, 1, 100}}, {1, {20, 0, 1, 20}}, {2, {5, 0, 1, 5}}};
  auto pick = [&](double amount, bool relative) {
    return CheapestWithin(ranked, costs, {amount, relative}, /*maximize=*/true)->number;
  };
  EXPECT_EQ(pick(0, false), 0);      // only the best itself
  EXPECT_EQ(pick(0.002, false), 1);  // 0.899 is within 0.002; 0.895 is not
  EXPECT_EQ(pick(0.01, false), 2);   // both are; 2 is cheaper
  EXPECT_EQ(pick(0.005, true), 1);   // 0.5% of 0.90 = 0.0045: 0.895 is 0.005 below
  EXPECT_EQ(pick(0.006, true), 2);
  // GPU time is dearer than CPU time, whatever the seconds.
  costs[2] = {1, 1, 0, 1};
  EXPECT_EQ(pick(0.01, false), 1);
  // A trial without a cost is no candidate; equal costs go to the better value.
  costs.erase(1);
  costs[2] = {100, 0, 1, 100};
  EXPECT_EQ(pick(0.01, false), 0);
  EXPECT_EQ(CheapestWithin({}, costs, {0.1, false}, true), nullptr);
}

TEST(CheapestWithinTest, WhenMinimizingWorseMeansHigher) {
  std::vector<TrialRecord> trials = {Trial(0, TrialState::kCompleted, 0, 100),
                                     Trial(1, TrialState::kCompleted, 0, 10)};
  trials[0].value = -2.0;  // the best loss; |best| scales a relative tolerance
  trials[1].value = -1.9;
  std::vector<const TrialRecord*> ranked = {&trials[0], &trials[1]};
  std::map<int, TrialCost> costs = {{0, {100, 0, 1, 100}}, {1, {10, 0, 1, 10}}};
  EXPECT_EQ(CheapestWithin(ranked, costs, {0.05, false}, false)->number, 0);
  // Exactly at the tolerance counts, though -1.9 - -2.0 is a hair over 0.1 in doubles.
  EXPECT_EQ(CheapestWithin(ranked, costs, {0.1, false}, false)->number, 1);
  EXPECT_EQ(CheapestWithin(ranked, costs, {0.05, true}, false)->number, 1);  // 5% of 2 = 0.1
  EXPECT_EQ(CheapestWithin(ranked, costs, {0.04, true}, false)->number, 0);
}

// The pruner's journal entry for a report of `v` at resource `r`.
JournalEntry ReportEntry(int trial, double r, double v) {
  JournalEntry e;
  e.trial = trial;
  e.kind = JournalKind::kReport;
  e.resource = r;
  e.value = v;
  return e;
}

TEST(PageDataTest, CurvesFollowTheJournalAndMarkPromotionsPausesAndPrunes) {
  StudyView in = Input();
  in.trials = {Trial(0, TrialState::kPruned, 1, 2), Trial(1, TrialState::kPaused, 1, 2),
               Trial(2, TrialState::kNodeLost, 1, 2), Trial(3, TrialState::kCompleted, 3, 4)};
  in.trials[3].retry_of = 2;  // trial 3 re-runs trial 2: the same curve
  auto report = ReportEntry;
  JournalEntry promoted;
  promoted.trial = 2;
  promoted.kind = JournalKind::kPromoted;
  promoted.resource = 3;
  in.journal = {report(0, 1, 0.9), report(1, 1, 0.5), report(2, 1, 0.4), report(0, 3, std::nan("")),
                promoted,          report(2, 3, 0.3), report(1, 3, 0.45)};
  json curves = PageData(in)["curves"];
  ASSERT_EQ(curves.size(), 3u);
  EXPECT_EQ(curves[0]["trial"], 0);
  EXPECT_EQ(curves[0]["points"].size(), 1u);  // a NaN report is no point
  EXPECT_EQ(curves[0]["marks"], json::parse(R"([{"resource": 1.0, "kind": "pruned"}])"));
  EXPECT_EQ(curves[1]["marks"], json::parse(R"([{"resource": 3.0, "kind": "paused"}])"));
  EXPECT_EQ(curves[2]["trial"], 2);
  EXPECT_EQ(curves[2]["points"], json::parse("[[1.0, 0.4], [3.0, 0.3]]"));
  EXPECT_EQ(curves[2]["marks"], json::parse(R"([{"resource": 1.0, "kind": "promoted"}])"));
}

TEST(PageDataTest, ImportanceNeedsEnoughCompletedTrialsAndSaysWhy) {
  StudyView in = Input();
  in.trials = {Trial(0, TrialState::kCompleted, 1, 2)};
  in.trials[0].value = 0.3;
  json d = PageData(in);
  EXPECT_TRUE(d["importance"].is_null());
  EXPECT_THAT(d["importance_note"].get<std::string>(), HasSubstr("needs 5 scored trials, has 1"));

  in.trials.clear();
  for (int i = 0; i < 12; ++i) {
    TrialRecord t = Trial(i, TrialState::kCompleted, 1, 2);
    const double x = (i + 0.5) / 12;
    t.params = {{"x", x}, {"opt", i % 2 ? "sgd" : "adam"}, {"seed", int64_t{1}}};
    t.value = std::sin(6 * x);
    in.trials.push_back(t);
  }
  d = PageData(in);
  ASSERT_TRUE(d["importance"].is_object()) << d["importance_note"];
  ASSERT_EQ(d["importance"]["values"].size(), 2u);  // x and opt; the fixed seed takes no part
  EXPECT_EQ(d["importance"]["values"][0]["param"], "x");
  EXPECT_THAT(d["importance"]["method"].get<std::string>(), HasSubstr("the 12 completed trials"));
  EXPECT_EQ(d["params"].size(), 2u);
}

// Two objectives (acc maximised, ms minimised) and a constraint: the page's front is the Pareto
// set, and its hypervolume after each feasible completed trial never falls, stays put for a
// dominated trial, and is the exact area against a reference 10% past the worst values.
TEST(PageDataTest, TheFrontsHypervolumeGrowsWithEachTrialThatImprovesIt) {
  StudyView in = Input();
  in.spec = ParseStudy(R"(name: mo
objectives:
  - {metric: acc, direction: maximize}
  - {metric: ms, direction: minimize}
constraints: [{metric: mem, max: 40}]
search_space: {x: {type: float, low: 0, high: 1}}
trial: {command: "true"}
)",
                       "mo.yaml")
                .spec;
  ASSERT_TRUE(in.spec);
  const double rows[][3] = {{0.5, 20, 1},
                            {0.7, 30, 1},
                            {0.6, 25, 1},
                            {0.4, 40, 1},   // dominated: the hypervolume stays
                            {0.9, 5, 50}};  // breaks mem: left out
  for (int n = 0; n < 5; ++n) {
    TrialRecord t = Trial(n, TrialState::kCompleted, 10 + n, 11 + n);
    t.values = {{"acc", rows[n][0]}, {"ms", rows[n][1]}, {"mem", rows[n][2]}};
    t.value = rows[n][0];
    in.trials.push_back(t);
  }
  const json front = PageData(in)["front"];
  EXPECT_EQ(front["members"], json::parse("[0, 1, 2]"));
  // Minimised: (-acc, ms). Worst: -0.4 and 40, ranges 0.3 and 20: reference (-0.37, 42) shown as
  // acc 0.37, ms 42.
  EXPECT_NEAR(front["reference"][0].get<double>(), 0.37, 1e-12);
  EXPECT_NEAR(front["reference"][1].get<double>(), 42, 1e-12);
  std::vector<double> hv;
  for (const json& p : front["hypervolume"]) hv.push_back(p["value"].get<double>());
  ASSERT_EQ(hv.size(), 4u);
  EXPECT_NEAR(hv[0], (0.5 - 0.37) * (42 - 20), 1e-12);
  // Adding (0.7, 30): its box (0.7 - 0.37) x (42 - 30) less the overlap (0.5 - 0.37) x (42 - 30).
  EXPECT_NEAR(hv[1], hv[0] + (0.7 - 0.5) * (42 - 30), 1e-12);
  EXPECT_NEAR(hv[2], hv[1] + (0.6 - 0.5) * (30 - 25), 1e-12);
  EXPECT_EQ(hv[3], hv[2]);
  const json trials = PageData(in)["trials"];
  EXPECT_EQ(trials[4]["feasible"], false);
  EXPECT_EQ(trials[0]["values"]["ms"], 20);
  // One objective: no front.
  EXPECT_TRUE(PageData(Input())["front"].is_null());
}

// The page's best is `hyperpack best`'s: the constraints met, and with finalists the best mean of a
// configuration's runs; each finalist names the trial it repeats.
TEST(PageDataTest, TheBestMeetsTheConstraintsAndWithFinalistsIsTheBestMean) {
  StudyView in = Input();
  in.spec = ParseStudy(R"(name: c
objective: {metric: loss, direction: minimize}
constraints: [{metric: mem, max: 40}]
search_space: {x: {type: float, low: 0, high: 1}}
trial: {command: "true"}
budget: {max_trials: 5, finalists: 1}
)",
                       "c.yaml")
                .spec;
  ASSERT_TRUE(in.spec);
  const double rows[][3] = {{0.1, 50, 0.1}, {0.2, 10, 0.2}, {0.3, 10, 0.3}, {0.4, 10, 0.2}};
  for (int n = 0; n < 4; ++n) {
    TrialRecord t = Trial(n, TrialState::kCompleted, 10 + n, 11 + n);
    t.params = {{"x", rows[n][2]}};
    t.values = {{"loss", rows[n][0]}, {"mem", rows[n][1]}};
    t.value = rows[n][0];
    in.trials.push_back(t);
  }
  json best = PageData(in)["best"];
  EXPECT_EQ(best["trial"], 1) << "trial 0 breaks mem";
  in.finalists = {3};  // trial 1's configuration again: 0.2 and 0.4
  const json data = PageData(in);
  // Trial 2's single 0.3 is no candidate: only configurations a finalist re-ran are.
  EXPECT_EQ(data["best"]["trial"], 1);
  EXPECT_NEAR(data["best"]["value"].get<double>(), 0.3, 1e-12);
  EXPECT_EQ(data["best"]["runs"], 2);
  EXPECT_EQ(data["trials"][3]["finalist_of"], 1);
  EXPECT_FALSE(data["trials"][1].contains("finalist_of"));
}

// A finalist's curve comes from its stored metric points (the pruner's journal never has one), at
// the epoch each line gave, and names the trial it repeats.
TEST(PageDataTest, AFinalistsCurveComesFromItsMetricsAndNamesTheTrialItRepeats) {
  StudyView in = Input();
  in.spec = ParseStudy(R"(name: c
objective: {metric: loss, direction: minimize}
search_space: {x: {type: float, low: 0, high: 1}}
trial: {command: "true"}
budget: {max_trials: 3, finalists: 1}
)",
                       "c.yaml")
                .spec;
  ASSERT_TRUE(in.spec);
  in.study.metric = "loss";
  for (int n = 0; n < 3; ++n) {
    TrialRecord t = Trial(n, TrialState::kCompleted, 10 + n, 11 + n);
    t.params = {{"x", n == 2 ? 0.1 : 0.1 * (n + 1)}};  // trial 2 repeats trial 0
    t.value = 0.5;
    in.trials.push_back(t);
  }
  in.journal = {ReportEntry(0, 1, 0.6), ReportEntry(1, 1, 0.7)};
  in.finalists = {2};
  // Two lines with an epoch, a NaN and a line of another metric only.
  in.finalist_metrics[2] = {{0, "loss", 0.9, 1}, {0, "epoch", 1, 1},  {1, "loss", 0.4, 2},
                            {1, "epoch", 2, 2},  {2, "loss", NAN, 3}, {3, "acc", 0.8, 4}};
  const json curves = PageData(in)["curves"];
  ASSERT_EQ(curves.size(), 3u);
  EXPECT_EQ(curves[2]["trial"], 2);
  EXPECT_EQ(curves[2]["finalist_of"], 0);
  EXPECT_EQ(curves[2]["points"], json::parse("[[1, 0.9], [2, 0.4]]"));
  EXPECT_FALSE(curves[0].contains("finalist_of"));
  // Where the pruner counts steps, the step is the resource.
  in.spec->pruner.resource = study::PrunerResource::kStep;
  EXPECT_EQ(PageData(in)["curves"][2]["points"], json::parse("[[0, 0.9], [1, 0.4]]"));
}

TEST(PageDataTest, TrialBytesCannotBreakOutOfThePageOrItsJson) {
  StudyView in = Input();
  in.study.name = "<b>s</b>";
  in.trials = {Trial(0, TrialState::kFailed, 1, 2)};
  in.trials[0].error = "boom </script><script>alert(1)</script> \xff\xfe not UTF-8";
  in.trials[0].params["opt"] = "</script><script>alert(2)</script>\xff";
  const std::string html = StudyPageHtml(PageData(in), in.study.name, "");
  EXPECT_THAT(html, Not(HasSubstr("alert(1)</script>")));
  EXPECT_THAT(html, HasSubstr("\\u003c/script>\\u003cscript>alert(1)"));
  EXPECT_THAT(html, HasSubstr("<title>&lt;b&gt;s&lt;/b&gt;"));
  EXPECT_THAT(html, HasSubstr("\xef\xbf\xbd"));  // the bad bytes, replaced
  EXPECT_THAT(html, Not(HasSubstr("alert(2)</script>")));
  // The data reads back as JSON, the parameter's bad bytes replaced.
  const size_t open = html.find("<script id=\"hp-data\" type=\"application/json\">");
  ASSERT_NE(open, std::string::npos);
  const size_t from = html.find('>', open) + 1;
  json back = json::parse(html.substr(from, html.find("</script>", from) - from));
  EXPECT_EQ(back["trials"][0]["params"]["opt"], "</script><script>alert(2)</script>\xef\xbf\xbd");
  EXPECT_THAT(back["trials"][0]["error"].get<std::string>(), HasSubstr("</script><script>"));
}

}  // namespace
}  // namespace hyperpack::report
