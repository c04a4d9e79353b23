#include "hyperpack/scheduler/metrics.h"

#include <gtest/gtest.h>
#include <time.h>

#include <cmath>
#include <string>
#include <vector>

namespace hyperpack::scheduler {
namespace {

double Get(const MetricLine& m, const std::string& name) {
  for (const auto& [n, v] : m.values)
    if (n == name) return v;
  ADD_FAILURE() << "no metric " << name;
  return 0;
}

TEST(MetricsTest, JsonLineReportsEveryNumericMemberAtItsStep) {
  auto m = ParseMetricLine(R"({"step": 3, "val_accuracy": 0.88, "train_loss": 0.31})");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->step, 3);
  ASSERT_EQ(m->values.size(), 2u);
  EXPECT_EQ(Get(*m, "val_accuracy"), 0.88);
  EXPECT_EQ(Get(*m, "train_loss"), 0.31);
}

TEST(MetricsTest, EpochServesAsTheStepOnlyWhenThereIsNoStep) {
  auto m = ParseMetricLine(R"({"epoch": 2, "loss": 1.5})");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->step, 2);
  auto both = ParseMetricLine(R"({"epoch": 2, "step": 700, "loss": 1.5})");
  ASSERT_TRUE(both);
  EXPECT_EQ(both->step, 700);
  EXPECT_EQ(both->values.size(), 1u);
}

TEST(MetricsTest, AcceptsPythonsNaNAndInfinity) {
  auto m =
      ParseMetricLine(R"({"loss": NaN, "grad": Infinity, "low": -Infinity, "note": "NaN here"})");
  ASSERT_TRUE(m);
  EXPECT_TRUE(std::isnan(Get(*m, "loss")));
  EXPECT_EQ(Get(*m, "grad"), INFINITY);
  EXPECT_EQ(Get(*m, "low"), -INFINITY);
  EXPECT_EQ(m->values.size(), 3u);  // the string member is not a metric
}

TEST(MetricsTest, IgnoresBooleansStringsAndNestedValues) {
  auto m = ParseMetricLine(R"({"done": true, "name": "x", "cfg": {"a": 1}, "acc": 0.5})");
  ASSERT_TRUE(m);
  ASSERT_EQ(m->values.size(), 1u);
  EXPECT_EQ(m->values[0].first, "acc");
  EXPECT_FALSE(m->step.has_value());
}

TEST(MetricsTest, JsonWithoutNumbersOrNotAnObjectIsOutput) {
  EXPECT_FALSE(ParseMetricLine(R"({"msg": "starting"})"));
  EXPECT_FALSE(ParseMetricLine(R"([1, 2, 3])"));
  EXPECT_FALSE(ParseMetricLine(R"({"broken": )"));
}

TEST(MetricsTest, KatibStyleNameValueTokens) {
  auto m = ParseMetricLine("epoch=3 accuracy=0.88 loss=3.1e-1");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->step, 3);
  EXPECT_EQ(Get(*m, "accuracy"), 0.88);
  EXPECT_EQ(Get(*m, "loss"), 0.31);
}

TEST(MetricsTest, NameValueTokensInsideOrdinaryText) {
  auto m = ParseMetricLine("Epoch 3: accuracy=0.88, loss = 0.5");
  ASSERT_TRUE(m);
  EXPECT_EQ(Get(*m, "accuracy"), 0.88);
  EXPECT_EQ(Get(*m, "loss"), 0.5);
  EXPECT_FALSE(m->step.has_value());
}

TEST(MetricsTest, TextWithoutNumericAssignmentsIsOutput) {
  EXPECT_FALSE(ParseMetricLine("loading data from /tmp/x"));
  EXPECT_FALSE(ParseMetricLine("mode=train path=/data"));
  EXPECT_FALSE(ParseMetricLine("version=1.2.3"));
  EXPECT_FALSE(ParseMetricLine(""));
  EXPECT_FALSE(ParseMetricLine("   "));
}

// ---- metric patterns (objective.regex, trial.metrics) -------------------------------------------

MetricPatterns Patterns(const std::vector<study::MetricPattern>& patterns) {
  auto made = MetricPatterns::Make(patterns);
  EXPECT_TRUE(made.ok()) << made.status().message();
  return made.ok() ? *made : MetricPatterns();
}

// The patterns a study would give PyTorch's MNIST example (examples/mnist/main.py).
MetricPatterns MnistPatterns() {
  return Patterns({{"accuracy", R"(Accuracy: (\d+)/10000)"},
                   {"epoch", R"(Train Epoch: (\d+))"},
                   {"train_loss", R"(\tLoss: ([0-9.eE+-]+))"},
                   {"test_loss", R"(Average loss: ([0-9.eE+-]+))"}});
}

TEST(MetricPatternsTest, ReadThePyTorchMnistExamplesLines) {
  const MetricPatterns patterns = MnistPatterns();
  auto train = ParseMetricLine("Train Epoch: 1 [0/60000 (0%)]\tLoss: 2.300000", patterns);
  ASSERT_TRUE(train);
  EXPECT_EQ(train->epoch, 1);
  EXPECT_EQ(train->step, 1);  // the epoch, as JSON's `epoch` is where there is no step
  ASSERT_EQ(train->values.size(), 1u);
  EXPECT_EQ(Get(*train, "train_loss"), 2.3);

  auto test =
      ParseMetricLine("Test set: Average loss: 0.0324, Accuracy: 9898/10000 (99%)", patterns);
  ASSERT_TRUE(test);
  ASSERT_EQ(test->values.size(), 2u);
  EXPECT_EQ(test->values[0].first, "accuracy");  // in the patterns' order
  EXPECT_EQ(Get(*test, "accuracy"), 9898);
  EXPECT_EQ(Get(*test, "test_loss"), 0.0324);
  EXPECT_FALSE(test->step.has_value());
  EXPECT_FALSE(test->epoch.has_value());
}

TEST(MetricPatternsTest, ALineNoPatternMatchesIsOutputAndTheProtocolStillCounts) {
  const MetricPatterns patterns = MnistPatterns();
  EXPECT_FALSE(ParseMetricLine("Downloading http://yann.lecun.com/exdb/mnist/", patterns));
  EXPECT_FALSE(ParseMetricLine("", patterns));
  // Only an epoch: like a JSON line with no metric beside its step, it reports nothing.
  EXPECT_FALSE(ParseMetricLine("Train Epoch: 3 [starting]", patterns));
  auto json = ParseMetricLine(R"({"step": 4, "val_loss": 0.5})", patterns);
  ASSERT_TRUE(json);
  EXPECT_EQ(json->step, 4);
  EXPECT_EQ(Get(*json, "val_loss"), 0.5);
  auto tokens = ParseMetricLine("epoch=2 lr=0.1", patterns);
  ASSERT_TRUE(tokens);
  EXPECT_EQ(tokens->step, 2);
  EXPECT_EQ(Get(*tokens, "lr"), 0.1);
}

TEST(MetricPatternsTest, AGroupThatIsNotAFiniteNumberReportsNothing) {
  const MetricPatterns patterns = Patterns({{"accuracy", R"(Accuracy: (\S+))"}});
  EXPECT_FALSE(ParseMetricLine("Accuracy: high", patterns));
  EXPECT_FALSE(ParseMetricLine("Accuracy: 98%", patterns));  // the whole group must be a number
  EXPECT_FALSE(ParseMetricLine("Accuracy: nan", patterns));
  EXPECT_FALSE(ParseMetricLine("Accuracy: inf", patterns));
  EXPECT_FALSE(ParseMetricLine("Accuracy: 1e999", patterns));  // out of a double's range
  auto ok = ParseMetricLine("Accuracy: +0.5e1", patterns);
  ASSERT_TRUE(ok);
  EXPECT_EQ(Get(*ok, "accuracy"), 5.0);
  // A group in an alternative that did not take part in the match.
  const MetricPatterns optional = Patterns({{"acc", R"(acc(?:uracy)?(?: (\d+)|: n/a))"}});
  EXPECT_FALSE(ParseMetricLine("accuracy: n/a", optional));
}

TEST(MetricPatternsTest, APatternsValueReplacesOneOfTheSameNameOnTheLine) {
  const MetricPatterns patterns = Patterns({{"acc", R"(\(acc ([0-9.]+)\))"}});
  auto m = ParseMetricLine("epoch=3 acc=0.5 (acc 0.75)", patterns);
  ASSERT_TRUE(m);
  ASSERT_EQ(m->values.size(), 1u);
  EXPECT_EQ(Get(*m, "acc"), 0.75);
  EXPECT_EQ(m->step, 3);
}

TEST(MetricPatternsTest, StepAndEpochPatternsTakeWholeNumbersAndTheStepWinsOverTheEpoch) {
  const MetricPatterns patterns =
      Patterns({{"epoch", R"(epoch (\S+))"}, {"step", R"(step (\S+))"}, {"loss", R"(loss (\S+))"}});
  auto both = ParseMetricLine("epoch 2 step 700 loss 1.5", patterns);
  ASSERT_TRUE(both);
  EXPECT_EQ(both->epoch, 2);
  EXPECT_EQ(both->step, 700);
  ASSERT_EQ(both->values.size(), 1u);  // epoch and step are positions, not metrics
  auto fraction = ParseMetricLine("epoch 2.5 loss 1.5", patterns);
  ASSERT_TRUE(fraction);
  EXPECT_FALSE(fraction->epoch.has_value());
  EXPECT_FALSE(fraction->step.has_value());
  // A step pattern wins over the epoch a name=value token gave as the step.
  auto mixed = ParseMetricLine("epoch=2 step 700 loss=1", patterns);
  ASSERT_TRUE(mixed);
  EXPECT_EQ(mixed->epoch, 2);
  EXPECT_EQ(mixed->step, 700);
}

TEST(MetricPatternsTest, MakeRefusesAPatternWithoutExactlyOneGroupOrThatDoesNotCompile) {
  std::vector<study::MetricPattern> none = {{"loss", R"(loss: \d+)"}};
  auto made = MetricPatterns::Make(none);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.status().message().find("0 capture groups"), std::string::npos);
  std::vector<study::MetricPattern> two = {{"acc", R"((\d+)/(\d+))"}};
  EXPECT_FALSE(MetricPatterns::Make(two).ok());
  std::vector<study::MetricPattern> broken = {{"acc", "(a"}};
  made = MetricPatterns::Make(broken);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.status().message().find("not a regular expression"), std::string::npos);
  EXPECT_TRUE(MetricPatterns().empty());
  EXPECT_TRUE(MetricPatterns::Make({}).value().empty());
}

// A pattern that backtracks without end on a hostile line: Boost gives up on that pattern within
// its step bound (about 0.1 s), the line reports what the other patterns find, and nothing crashes.
TEST(MetricPatternsTest, CatastrophicBacktrackingOnALongLineGivesUpPromptly) {
  const std::string line(60 * 1024, 'a');
  // Boost's own bound grows with the square of the pattern's length: a long one is bounded too.
  const std::string long_pattern = "(a+)+b|" + std::string(200, 'z');
  const MetricPatterns patterns =
      Patterns({{"x", "(a+)+b"}, {"y", long_pattern}, {"n", R"((a{1,8})+\d)"}});
  // This thread's CPU time, not the wall clock: under a sanitizer with other tests sharing two
  // cores, the wall clock measured the load (5.2 s once in CI).
  auto cpu_seconds = [] {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  };
  const double start = cpu_seconds();
  EXPECT_FALSE(ParseMetricLine(line, patterns));
  EXPECT_FALSE(ParseMetricLine(line + " loss", patterns));
  const double seconds = cpu_seconds() - start;
  // Unbounded, these searches would not end in a lifetime; bounded, they take ~0.1 s each, and
  // several times that under a sanitizer (6.7 s of CPU for the six once under ASan).
#if defined(HYPERPACK_SANITIZED) || defined(__SANITIZE_THREAD__)
  constexpr double kLimit = 30.0;
#else
  constexpr double kLimit = 5.0;
#endif
  EXPECT_LT(seconds, kLimit) << "six searches that each should give up within about 0.1 s";

  const MetricPatterns with_good = Patterns({{"x", "(a+)+b"}, {"loss", R"(loss=(\d+))"}});
  auto m = ParseMetricLine(line + " loss=4", with_good);
  ASSERT_TRUE(m);
  EXPECT_EQ(Get(*m, "loss"), 4);
}

TEST(MetricPatternsTest, AnOrdinaryPatternFindsItsValueAtTheEndOfA64KiBLine) {
  const MetricPatterns patterns = MnistPatterns();
  std::string line(64 * 1024 - 64, '#');
  line += " Accuracy: 9000/10000";
  auto m = ParseMetricLine(line, patterns);
  ASSERT_TRUE(m);
  EXPECT_EQ(Get(*m, "accuracy"), 9000);
}

}  // namespace
}  // namespace hyperpack::scheduler
