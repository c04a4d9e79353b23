// The trainer's parts that need no training run: the loss scaler's policy with injected
// overflows, unscaling on tensors, and compressed gradient all-reduce between two ranks that
// meet over real Gloo on loopback (two threads of this process).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <thread>

#include "comm.h"
#include "ddp.h"
#include "loss_scaler.h"
#include "test_util.h"

namespace hyperpack::trainer {
namespace {

LossScaleOptions Options(int64_t window) {
  LossScaleOptions o;
  o.initial = 1024;
  o.growth_interval = window;
  o.min_scale = 1;
  o.give_up_after = 3;
  return o;
}

TEST(LossScalePolicyTest, GrowsAfterAWindowOfCleanStepsAndNotBefore) {
  LossScalePolicy p(Options(3));
  EXPECT_EQ(p.Update(true), StepAction::kApply);
  EXPECT_EQ(p.Update(true), StepAction::kApply);
  EXPECT_EQ(p.scale(), 1024);
  EXPECT_EQ(p.Update(true), StepAction::kApply);
  EXPECT_EQ(p.scale(), 2048);
  EXPECT_EQ(p.state().clean_steps, 0);
}

TEST(LossScalePolicyTest, AnOverflowSkipsTheStepHalvesTheScaleAndRestartsTheWindow) {
  LossScalePolicy p(Options(3));
  p.Update(true);
  p.Update(true);
  EXPECT_EQ(p.Update(false), StepAction::kSkip);
  EXPECT_EQ(p.scale(), 512);
  EXPECT_EQ(p.state().skipped_steps, 1);
  // Two clean steps after the skip are not yet a window of three.
  p.Update(true);
  p.Update(true);
  EXPECT_EQ(p.scale(), 512);
  p.Update(true);
  EXPECT_EQ(p.scale(), 1024);
}

TEST(LossScalePolicyTest, StopsHalvingAtTheFloorAndGivesUpWhenThatDoesNotHelp) {
  LossScaleOptions o = Options(100);
  o.initial = 4;
  LossScalePolicy p(o);
  EXPECT_EQ(p.Update(false), StepAction::kSkip);  // 4 -> 2
  EXPECT_EQ(p.Update(false), StepAction::kSkip);  // 2 -> 1
  EXPECT_EQ(p.scale(), 1);
  EXPECT_EQ(p.Update(false), StepAction::kSkip);  // at the floor: 1 of 3
  EXPECT_EQ(p.Update(false), StepAction::kSkip);  // 2 of 3
  EXPECT_EQ(p.scale(), 1);
  EXPECT_EQ(p.Update(false), StepAction::kGiveUp);
  EXPECT_EQ(p.state().skipped_steps, 5);
}

TEST(LossScalePolicyTest, ACleanStepResetsTheCountTowardsGivingUp) {
  LossScaleOptions o = Options(100);
  o.initial = 1;
  LossScalePolicy p(o);
  p.Update(false);
  p.Update(false);
  EXPECT_EQ(p.Update(true), StepAction::kApply);
  EXPECT_EQ(p.Update(false), StepAction::kSkip);
  EXPECT_EQ(p.Update(false), StepAction::kSkip);
  EXPECT_EQ(p.Update(false), StepAction::kGiveUp);
}

TEST(LossScalePolicyTest, AStaticScaleNeverMovesButOverflowsAreStillSkipped) {
  LossScaleOptions o = Options(1);
  o.dynamic = false;
  o.initial = 128;
  LossScalePolicy p(o);
  for (int i = 0; i < 5; ++i) p.Update(true);
  EXPECT_EQ(p.scale(), 128);
  EXPECT_EQ(p.Update(false), StepAction::kSkip);
  EXPECT_EQ(p.scale(), 128);
}

TEST(LossScalePolicyTest, ARestoredStateContinuesWhereItWas) {
  LossScalePolicy a(Options(3));
  a.Update(true);
  a.Update(false);
  a.Update(true);
  LossScalePolicy b(Options(3));
  b.Restore(a.state());
  for (bool finite : {true, true, false, true}) EXPECT_EQ(a.Update(finite), b.Update(finite));
  EXPECT_EQ(a.scale(), b.scale());
  EXPECT_EQ(a.state().skipped_steps, b.state().skipped_steps);
}

torch::Tensor WithGrad(torch::Tensor value, torch::Tensor grad) {
  value.mutable_grad() = grad;
  return value;
}

TEST(UnscaleGradientsTest, DividesEveryGradientAndSaysTheyAreFinite) {
  auto g1 = torch::tensor({2048.0f, -1024.0f}), g2 = torch::tensor({512.0f});
  std::vector<torch::Tensor> params = {WithGrad(torch::zeros({2}), g1.clone()),
                                       WithGrad(torch::zeros({1}), g2.clone()),
                                       torch::zeros({3})};  // no gradient: skipped
  EXPECT_TRUE(UnscaleGradients(params, 1024));
  EXPECT_TRUE(torch::equal(params[0].grad(), g1 / 1024));
  EXPECT_TRUE(torch::equal(params[1].grad(), g2 / 1024));
}

TEST(UnscaleGradientsTest, FindsAnInfOrANaNInAnyParameter) {
  for (float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()}) {
    std::vector<torch::Tensor> params = {WithGrad(torch::zeros({2}), torch::ones({2})),
                                         WithGrad(torch::zeros({2}), torch::tensor({1.0f, bad}))};
    EXPECT_FALSE(UnscaleGradients(params, 8)) << bad;
  }
}

// Each of two ranks has two parameters (odd sizes, so that buckets need padding) whose gradients
// are rank-specific; returns each rank's gradients after GradientSync::Finish.
std::vector<std::vector<torch::Tensor>> SyncTwoRanks(GradCompression compression, double magnitude,
                                                     size_t bucket_bytes) {
  const int port = hyperpack::testing::FreeLoopbackPort();
  std::vector<std::vector<torch::Tensor>> out(2);
  std::vector<std::string> errors(2);
  auto rank_main = [&](int rank) {
    try {
      Rendezvous rdv;
      rdv.rank = rank;
      rdv.world_size = 2;
      rdv.master_port = port;
      auto comm = MakeC10dCommunicator(rdv);
      std::vector<torch::Tensor> params = {torch::zeros({7}, torch::requires_grad()),
                                           torch::zeros({13}, torch::requires_grad())};
      GradientSync sync(params, comm.get(), bucket_bytes, /*overlap=*/true, compression);
      auto gen = at::make_generator<at::CPUGeneratorImpl>(100 + rank);
      torch::Tensor a = torch::randn({7}, gen) * magnitude, b = torch::randn({13}, gen) * magnitude;
      sync.BeginMicroStep(true);
      ((params[0] * a).sum() + (params[1] * b).sum()).backward();
      sync.Finish();
      out[rank] = {params[0].grad().clone(), params[1].grad().clone()};
    } catch (const std::exception& e) {
      errors[rank] = e.what();
    }
  };
  std::thread r0(rank_main, 0), r1(rank_main, 1);
  r0.join();
  r1.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  return out;
}

// The mean over the two ranks of what SyncTwoRanks gives each, computed here in fp64.
std::vector<torch::Tensor> ExactMean(double magnitude) {
  std::vector<torch::Tensor> mean = {torch::zeros({7}, torch::kFloat64),
                                     torch::zeros({13}, torch::kFloat64)};
  for (int rank = 0; rank < 2; ++rank) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(100 + rank);
    torch::Tensor a = torch::randn({7}, gen) * magnitude, b = torch::randn({13}, gen) * magnitude;
    mean[0] += a.to(torch::kFloat64) / 2;
    mean[1] += b.to(torch::kFloat64) / 2;
  }
  return mean;
}

double MaxRelativeError(const std::vector<torch::Tensor>& got,
                        const std::vector<torch::Tensor>& want) {
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].scalar_type(), torch::kFloat32);
    auto err = ((got[i].to(torch::kFloat64) - want[i]).abs() / want[i].abs().clamp_min(1e-12));
    worst = std::max(worst, err.max().item<double>());
  }
  return worst;
}

TEST(CompressedAllReduceTest, UncompressedGivesTheMeanToFloatPrecision) {
  auto got = SyncTwoRanks(GradCompression::kNone, 1.0, 1 << 20);
  auto want = ExactMean(1.0);
  EXPECT_LT(MaxRelativeError(got[0], want), 1e-6);
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(torch::equal(got[0][i], got[1][i]));
}

// Both ranks end with the same gradients; their error is that of rounding each rank's gradient
// and the fp32 sum once to the wire's width (8 bits of mantissa for bf16, 11 for fp16), and no
// more; and it is not zero, so the buckets did travel compressed.
TEST(CompressedAllReduceTest, Bf16AndFp16BucketsAreSummedInFp32ToTheirOwnPrecision) {
  struct Case {
    GradCompression compression;
    double unit_roundoff;
  };
  for (Case c : {Case{GradCompression::kBf16, std::ldexp(1.0, -8)},
                 Case{GradCompression::kFp16, std::ldexp(1.0, -11)}}) {
    for (size_t bucket_bytes : {size_t{0}, size_t{1} << 20}) {  // a bucket per parameter, or one
      auto got = SyncTwoRanks(c.compression, 1.0, bucket_bytes);
      auto want = ExactMean(1.0);
      for (int i = 0; i < 2; ++i) EXPECT_TRUE(torch::equal(got[0][i], got[1][i]));
      double err = MaxRelativeError(got[0], want);
      EXPECT_GT(err, 0);
      // Two roundings of each addend and one of the result, relative to a sum that may cancel:
      // bounded loosely by a few unit roundoffs times the addends' size over the sum's.
      auto got_flat = torch::cat({got[0][0], got[0][1]}).to(torch::kFloat64);
      auto want_flat = torch::cat({want[0], want[1]});
      double abs_err = (got_flat - want_flat).abs().max().item<double>();
      EXPECT_LT(abs_err, 4 * c.unit_roundoff * 4.0) << "bucket_bytes " << bucket_bytes;
    }
  }
}

// fp16 holds nothing above 65504: a gradient that large arrives as an inf, which the loss scaler
// then sees and skips; bf16 has fp32's range.
TEST(CompressedAllReduceTest, Fp16OverflowArrivesAsAnInfThatTheScalerCatchesButBf16DoesNot) {
  auto fp16 = SyncTwoRanks(GradCompression::kFp16, 1e6, 1 << 20);
  std::vector<torch::Tensor> p16 = {WithGrad(torch::zeros({7}), fp16[0][0]),
                                    WithGrad(torch::zeros({13}), fp16[0][1])};
  EXPECT_FALSE(UnscaleGradients(p16, 1));
  auto bf16 = SyncTwoRanks(GradCompression::kBf16, 1e6, 1 << 20);
  std::vector<torch::Tensor> pb = {WithGrad(torch::zeros({7}), bf16[0][0]),
                                   WithGrad(torch::zeros({13}), bf16[0][1])};
  EXPECT_TRUE(UnscaleGradients(pb, 1));
}

}  // namespace
}  // namespace hyperpack::trainer
