#include "hyperpack/scheduler/metrics.h"

#include <gtest/gtest.h>

#include <cmath>

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

}  // namespace
}  // namespace hyperpack::scheduler
