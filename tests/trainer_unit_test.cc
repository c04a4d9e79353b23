// The trainer's parts that need no training run: the loss scaler's policy with injected
// overflows, unscaling on tensors, subnormal floats flushed, int8 rounding, and compressed gradient
// all-reduce between two ranks that meet over real Gloo on loopback (two threads of this process).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <thread>

#include "attention.h"
#include "comm.h"
#include "ddp.h"
#include "denormals.h"
#include "gpu.h"
#include "int8_wire.h"
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

// The kernels this libtorch has for the CPU: the separate ones always, the fused one from 2.4.
std::vector<UnscaleKernel> CpuUnscaleKernels() {
  std::vector<UnscaleKernel> kernels = {UnscaleKernel::kSeparate};
  if (FusedUnscaleAvailable(torch::Device(torch::kCPU))) kernels.push_back(UnscaleKernel::kFused);
  return kernels;
}

TEST(UnscaleGradientsTest, DividesEveryGradientAndSaysTheyAreFinite) {
  for (UnscaleKernel kernel : CpuUnscaleKernels()) {
    auto g1 = torch::tensor({2048.0f, -1024.0f}), g2 = torch::tensor({512.0f});
    std::vector<torch::Tensor> params = {WithGrad(torch::zeros({2}), g1.clone()),
                                         WithGrad(torch::zeros({1}), g2.clone()),
                                         torch::zeros({3})};  // no gradient: skipped
    EXPECT_TRUE(UnscaleGradients(params, 1024, kernel));
    EXPECT_TRUE(torch::equal(params[0].grad(), g1 / 1024));
    EXPECT_TRUE(torch::equal(params[1].grad(), g2 / 1024));
  }
}

TEST(UnscaleGradientsTest, FindsAnInfOrANaNInAnyParameter) {
  for (UnscaleKernel kernel : CpuUnscaleKernels()) {
    for (float bad :
         {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
          std::numeric_limits<float>::quiet_NaN()}) {
      std::vector<torch::Tensor> params = {WithGrad(torch::zeros({2}), torch::ones({2})),
                                           WithGrad(torch::zeros({2}), torch::tensor({1.0f, bad}))};
      EXPECT_FALSE(UnscaleGradients(params, 8, kernel)) << bad;
    }
  }
}

// The fused kernel (one launch for the model, as torch.amp.GradScaler) leaves the same gradients
// and verdict as the separate ones, bit for bit, on every device this libtorch has it for: so the
// loss-scale trace of an fp16 run does not change with the kernel.
TEST(UnscaleGradientsTest, TheFusedKernelGivesWhatTheSeparateOnesGive) {
  std::vector<torch::Device> devices;
  for (torch::Device d : {torch::Device(torch::kCPU), torch::Device(torch::kCUDA)})
    if ((d.is_cpu() || GpuCount() > 0) && FusedUnscaleAvailable(d)) devices.push_back(d);
  if (devices.empty()) GTEST_SKIP() << "this libtorch has the fused kernel for no device here";
  torch::manual_seed(50);
  for (const torch::Device& device : devices) {
    for (bool overflow : {false, true}) {
      SCOPED_TRACE(device.str() + (overflow ? " with an inf" : ""));
      std::vector<torch::Tensor> a, b;
      for (int64_t n : {1, 7, 1000, 65536}) {
        torch::Tensor g = torch::randn({n}, torch::TensorOptions().device(device)) * 65536;
        if (overflow && n == 1000) g[3] = std::numeric_limits<float>::infinity();
        a.push_back(WithGrad(torch::zeros({n}, g.options()), g.clone()));
        b.push_back(WithGrad(torch::zeros({n}, g.options()), g.clone()));
      }
      EXPECT_EQ(UnscaleGradients(a, 65536, UnscaleKernel::kSeparate), !overflow);
      EXPECT_EQ(UnscaleGradients(b, 65536, UnscaleKernel::kFused), !overflow);
      for (size_t i = 0; i < a.size(); ++i)
        EXPECT_TRUE(torch::equal(a[i].grad().cpu(), b[i].grad().cpu())) << i;
    }
  }
}

// ---- The char transformer's attention ---------------------------------------------------------

// The devices here, each with the attention kernels this libtorch has there.
std::vector<std::pair<torch::Device, AttentionKernel>> AttentionCases() {
  std::vector<std::pair<torch::Device, AttentionKernel>> cases;
  std::vector<torch::Device> devices = {torch::Device(torch::kCPU)};
  if (GpuCount() > 0) devices.push_back(torch::Device(torch::kCUDA));
  for (const torch::Device& d : devices) {
    cases.push_back({d, AttentionKernel::kMath});
    if (FusedAttentionAvailable()) cases.push_back({d, AttentionKernel::kFused});
  }
  return cases;
}

// How many products of a subnormal float and 2 stay non-zero, computed across the intra-op pool
// (enough of them that ATen splits the work between its threads).
int64_t NonZeroProducts(const torch::Tensor& subnormals) {
  return (subnormals * 2).count_nonzero().item<int64_t>();
}

// Flushed on this thread, on every thread of the pool and on a thread started afterwards; and
// computed exactly again when turned off. (Without the pool's part, the pool's threads, started
// before with the mode off, keep their share of the products.)
TEST(DenormalsTest, FlushedOnThisThreadThePoolAndThreadsStartedAfterAndOffAgain) {
  at::set_num_threads(2);
  if (!SetFlushDenormals(false)) GTEST_SKIP() << "this CPU has no flush-to-zero mode";
  constexpr int64_t kN = 1 << 20;
  const torch::Tensor x = torch::full({kN}, 1e-39f);  // below FLT_MIN, 1.18e-38
  ASSERT_EQ(NonZeroProducts(x), kN);

  ASSERT_TRUE(SetFlushDenormals(true));
  EXPECT_EQ(NonZeroProducts(x), 0);
  int64_t in_new_thread = -1;
  std::thread([&] { in_new_thread = NonZeroProducts(x); }).join();
  EXPECT_EQ(in_new_thread, 0);

  ASSERT_TRUE(SetFlushDenormals(false));
  EXPECT_EQ(NonZeroProducts(x), kN);
}

// A layer of width 16 with 4 heads on `device`, from seed 50, and the case's name for a trace.
torch::nn::TransformerEncoderLayer SeededLayer(const torch::Device& device, double dropout) {
  torch::manual_seed(50);
  torch::nn::TransformerEncoderLayer layer(
      torch::nn::TransformerEncoderLayerOptions(16, 4).dim_feedforward(64).dropout(dropout));
  layer->to(device);
  return layer;
}
std::string CaseName(const torch::Device& device, AttentionKernel kernel) {
  return device.str() + (kernel == AttentionKernel::kFused ? " fused" : " math");
}

// Our layer on libtorch's layer's parameters computes what that layer computes with a causal mask,
// forward and backward, with either kernel: the model trains as it did, on any libtorch.
TEST(AttentionTest, TheLayerComputesWhatLibtorchsLayerComputesForwardAndBackward) {
  for (auto [device, kernel] : AttentionCases()) {
    SCOPED_TRACE(CaseName(device, kernel));
    torch::nn::TransformerEncoderLayer layer = SeededLayer(device, 0.0);
    const int64_t L = 10;
    torch::Tensor x = torch::randn({3, L, 16}, torch::TensorOptions().device(device));
    torch::Tensor mask =
        torch::triu(torch::full({L, L}, -std::numeric_limits<float>::infinity(), x.options()), 1);
    torch::Tensor want = layer->forward(x.transpose(0, 1), mask).transpose(0, 1);
    want.square().sum().backward();
    std::vector<torch::Tensor> want_grads;
    for (const torch::Tensor& p : layer->parameters()) want_grads.push_back(p.grad().clone());
    layer->zero_grad();
    torch::Tensor got = CausalEncoderLayer(*layer, x, kernel);
    got.square().sum().backward();
    EXPECT_TRUE(torch::allclose(got, want, 1e-4, 1e-5)) << (got - want).abs().max().item<double>();
    std::vector<torch::Tensor> params = layer->parameters();
    for (size_t i = 0; i < params.size(); ++i)
      EXPECT_TRUE(torch::allclose(params[i].grad(), want_grads[i], 1e-3, 1e-4)) << i;
    // A position's output depends on the past only: changing the last token changes nothing before.
    torch::Tensor later = x.clone();
    later.select(1, L - 1).add_(1.0);
    torch::NoGradGuard no_grad;
    torch::Tensor moved = CausalEncoderLayer(*layer, later, kernel);
    EXPECT_TRUE(torch::allclose(moved.narrow(1, 0, L - 1), got.narrow(1, 0, L - 1), 1e-5, 1e-6));
    EXPECT_FALSE(torch::allclose(moved.select(1, L - 1), got.select(1, L - 1)));
  }
}

// Dropout on the attention weights (the layer's other dropouts off) acts in training mode only,
// with either kernel.
TEST(AttentionTest, DropoutOnTheWeightsActsInTrainingOnly) {
  for (auto [device, kernel] : AttentionCases()) {
    SCOPED_TRACE(CaseName(device, kernel));
    torch::nn::TransformerEncoderLayer layer = SeededLayer(device, 0.5);
    for (torch::nn::Dropout d : {layer->dropout, layer->dropout1, layer->dropout2})
      d->options.p(0.0);
    torch::Tensor x = torch::randn({2, 8, 16}, torch::TensorOptions().device(device));
    torch::NoGradGuard no_grad;
    layer->eval();
    torch::Tensor a = CausalEncoderLayer(*layer, x, kernel);
    EXPECT_TRUE(torch::equal(a, CausalEncoderLayer(*layer, x, kernel)));
    layer->train();
    torch::Tensor c = CausalEncoderLayer(*layer, x, kernel);
    EXPECT_FALSE(torch::allclose(c, a));
    EXPECT_FALSE(torch::allclose(c, CausalEncoderLayer(*layer, x, kernel)));
    EXPECT_TRUE(torch::isfinite(c).all().item<bool>());
  }
}

// What two ranks end with after `steps` optimizer steps in which rank r's parameters get the
// gradients grads[r] (the same each step), synced by GradientSync over real Gloo.
struct TwoRanks {
  std::vector<std::vector<torch::Tensor>> first;  // [rank][param]: after the first step
  std::vector<std::vector<torch::Tensor>> sum;    // [rank][param]: summed over the steps, in fp64
  std::vector<double> bytes_sent;                 // [rank], over all the steps
};

// On a GPU both ranks share it, as Gloo on its CUDA tensors (NCCL refuses a shared device).
TwoRanks SyncStepsOnTwoRanks(GradCompression compression,
                             const std::vector<std::vector<torch::Tensor>>& grads,
                             size_t bucket_bytes, int steps,
                             torch::Device device = torch::Device(torch::kCPU)) {
  const int port = hyperpack::testing::FreeLoopbackPort();
  TwoRanks out{{{}, {}}, {{}, {}}, {0, 0}};
  std::vector<std::string> errors(2);
  auto rank_main = [&](int rank) {
    try {
      Rendezvous rdv;
      rdv.rank = rank;
      rdv.world_size = 2;
      rdv.master_port = port;
      auto comm = MakeC10dCommunicator(rdv);
      std::vector<torch::Tensor> params;
      std::vector<torch::Tensor> mine;
      for (const torch::Tensor& g : grads[rank]) {
        mine.push_back(g.to(device));
        params.push_back(torch::zeros_like(mine.back()).requires_grad_());
      }
      GradientSync sync(params, comm.get(), bucket_bytes, /*overlap=*/true, compression);
      for (int step = 0; step < steps; ++step) {
        for (torch::Tensor& p : params) p.mutable_grad() = torch::Tensor();
        sync.BeginMicroStep(true);
        torch::Tensor loss = torch::zeros({}, torch::TensorOptions().device(device));
        for (size_t i = 0; i < params.size(); ++i) loss = loss + (params[i] * mine[i]).sum();
        loss.backward();
        sync.Finish();
        for (size_t i = 0; i < params.size(); ++i) {
          torch::Tensor g = params[i].grad().cpu().to(torch::kFloat64);
          if (step == 0) {
            out.first[rank].push_back(params[i].grad().cpu().clone());
            out.sum[rank].push_back(g);
          } else {
            out.sum[rank][i] += g;
          }
        }
      }
      out.bytes_sent[rank] = sync.bytes_sent();
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

// Rank r's gradients for SyncTwoRanks: two parameters of odd sizes (so that buckets need padding).
std::vector<torch::Tensor> RankGradients(int rank, double magnitude) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(100 + rank);
  torch::Tensor a = torch::randn({7}, gen) * magnitude, b = torch::randn({13}, gen) * magnitude;
  return {a, b};
}

// Each rank's gradients after one step of GradientSync.
std::vector<std::vector<torch::Tensor>> SyncTwoRanks(GradCompression compression, double magnitude,
                                                     size_t bucket_bytes) {
  return SyncStepsOnTwoRanks(compression,
                             {RankGradients(0, magnitude), RankGradients(1, magnitude)},
                             bucket_bytes, 1)
      .first;
}

// The mean over the two ranks of what SyncTwoRanks gives each, computed here in fp64.
std::vector<torch::Tensor> ExactMean(double magnitude) {
  std::vector<torch::Tensor> mean = {torch::zeros({7}, torch::kFloat64),
                                     torch::zeros({13}, torch::kFloat64)};
  for (int rank = 0; rank < 2; ++rank) {
    std::vector<torch::Tensor> g = RankGradients(rank, magnitude);
    mean[0] += g[0].to(torch::kFloat64) / 2;
    mean[1] += g[1].to(torch::kFloat64) / 2;
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

TEST(Int8WireTest, RoundsEachValueToWithinHalfItsBlocksStepAndKeepsWhatItLost) {
  Int8Layout l = Int8Layout::For(500);
  EXPECT_EQ(l.blocks, 2);
  EXPECT_EQ(l.block, 252);  // 250 rounded up to a multiple of 4
  EXPECT_GE(l.values(), 500);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  torch::Tensor x = torch::randn({l.values()}, gen);
  x.narrow(0, l.block, l.block) *= 1e-3;  // the second block is a thousand times smaller
  torch::Tensor residual = torch::zeros_like(x), segment = torch::empty({l.bytes()}, torch::kInt8);
  QuantizeInt8(x, residual, l, segment);
  torch::Tensor y = DequantizeInt8(segment, l);
  for (int64_t k = 0; k < l.blocks; ++k) {
    torch::Tensor xs = x.narrow(0, k * l.block, l.block), ys = y.narrow(0, k * l.block, l.block);
    double step = xs.abs().max().item<double>() / 127;
    EXPECT_LE((xs - ys).abs().max().item<double>(), step / 2 * (1 + 1e-5)) << "block " << k;
    EXPECT_GT((xs - ys).abs().max().item<double>(), 0) << "block " << k;
  }
  EXPECT_TRUE(torch::allclose(residual, x - y, 0, 1e-7));
}

TEST(Int8WireTest, ANonFiniteValueSpoilsItsBlockAsNaNAndNotTheResidual) {
  Int8Layout l = Int8Layout::For(16, /*max_block=*/8);
  ASSERT_EQ(l.blocks, 2);
  torch::Tensor x = torch::ones({l.values()});
  x[3] = std::numeric_limits<float>::infinity();
  torch::Tensor residual = torch::zeros_like(x), segment = torch::empty({l.bytes()}, torch::kInt8);
  QuantizeInt8(x, residual, l, segment);
  torch::Tensor y = DequantizeInt8(segment, l);
  EXPECT_TRUE(torch::isnan(y.narrow(0, 0, l.block)).all().item<bool>());
  EXPECT_TRUE(torch::equal(y.narrow(0, l.block, l.block), torch::ones({l.block})));
  EXPECT_TRUE(torch::isfinite(residual).all().item<bool>());
}

// int8 on the wire: both ranks get the same gradients, within a few of int8's steps of the mean
// and not equal to it; and about a quarter of fp32's bytes are sent.
TEST(CompressedAllReduceTest, Int8BucketsArriveWithinTheirStepsInAQuarterOfTheBytes) {
  for (size_t bucket_bytes : {size_t{0}, size_t{1} << 20}) {
    auto got = SyncTwoRanks(GradCompression::kInt8, 1.0, bucket_bytes);
    auto want = ExactMean(1.0);
    for (int i = 0; i < 2; ++i) EXPECT_TRUE(torch::equal(got[0][i], got[1][i]));
    auto got_flat = torch::cat({got[0][0], got[0][1]}).to(torch::kFloat64);
    auto want_flat = torch::cat({want[0], want[1]});
    double abs_err = (got_flat - want_flat).abs().max().item<double>();
    EXPECT_GT(abs_err, 0);
    // Each addend (|g|/2 < 2 here) and the sum rounded once: half a step of 2/127 each, loosely.
    EXPECT_LT(abs_err, 3 * (2.0 / 127)) << "bucket_bytes " << bucket_bytes;
  }
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  std::vector<std::vector<torch::Tensor>> big = {{torch::randn({1000}, gen)},
                                                 {torch::randn({1000}, gen)}};
  auto full = SyncStepsOnTwoRanks(GradCompression::kNone, big, 1 << 20, 1);
  auto int8 = SyncStepsOnTwoRanks(GradCompression::kInt8, big, 1 << 20, 1);
  EXPECT_EQ(full.bytes_sent[0], 4000);  // a ring all-reduce of 2 ranks sends its tensor once
  EXPECT_GT(int8.bytes_sent[0], 0.25 * 4000);
  EXPECT_LT(int8.bytes_sent[0], 0.27 * 4000);
}

// Error feedback: the same gradients every step, with small values beside a large one in each
// block, so that rounding to nearest loses the same amount every step. Each step is off by that
// amount, but what was lost is carried to the next step, so the sum over 100 steps is off only by
// the residuals left at the end (under two of int8's steps); without them it would be off by 100
// times one step's error.
TEST(CompressedAllReduceTest, Int8ErrorFeedbackKeepsTheLongRunSumExact) {
  std::vector<std::vector<torch::Tensor>> grads(2);
  for (int rank = 0; rank < 2; ++rank) {
    torch::Tensor g = torch::linspace(0.0005, 0.004, 40) * (rank + 1);
    g[0] = 1.0;
    g[39] = -1.0;
    grads[rank] = {g};
  }
  torch::Tensor mean = (grads[0][0].to(torch::kFloat64) + grads[1][0].to(torch::kFloat64)) / 2;
  const int steps = 100;
  auto got = SyncStepsOnTwoRanks(GradCompression::kInt8, grads, 1 << 20, steps);
  EXPECT_TRUE(torch::equal(got.sum[0][0], got.sum[1][0]));
  double one_step = (got.first[0][0].to(torch::kFloat64) - mean).abs().max().item<double>();
  double long_run = (got.sum[0][0] - steps * mean).abs().max().item<double>();
  EXPECT_GT(one_step, 1e-4);
  EXPECT_LT(long_run, 2.0 / 127) << "one step's error " << one_step;
  EXPECT_LT(long_run, steps * one_step / 10);
}

// ---- On a GPU (skipped where this libtorch sees none) ----------------------------------------

// Two ranks sharing one GPU sync every wire format through Gloo on CUDA tensors to what the same
// two ranks reach on the CPU: the same algorithm, so within each format's rounding (the GPU's
// kernels may round the sum's last bit differently), and identical on both ranks.
TEST(GpuTest, TwoRanksSharingAGpuSyncEveryFormatAsOnTheCpu) {
  if (GpuCount() == 0) GTEST_SKIP() << "no GPU";
  const std::vector<std::vector<torch::Tensor>> grads = {RankGradients(0, 1.0),
                                                         RankGradients(1, 1.0)};
  struct Case {
    GradCompression compression;
    double tolerance;
  };
  for (Case c : {Case{GradCompression::kNone, 1e-6}, Case{GradCompression::kFp16, 1e-3},
                 Case{GradCompression::kBf16, 1e-2}, Case{GradCompression::kInt8, 2e-2}}) {
    SCOPED_TRACE(static_cast<int>(c.compression));
    auto cpu = SyncStepsOnTwoRanks(c.compression, grads, 1 << 20, 3);
    auto gpu = SyncStepsOnTwoRanks(c.compression, grads, 1 << 20, 3, torch::Device(torch::kCUDA));
    for (int i = 0; i < 2; ++i) {
      EXPECT_TRUE(torch::equal(gpu.sum[0][i], gpu.sum[1][i]));
      EXPECT_LT((gpu.sum[0][i] - cpu.sum[0][i]).abs().max().item<double>(), c.tolerance);
    }
    EXPECT_EQ(gpu.bytes_sent[0], cpu.bytes_sent[0]);
  }
}

// A one-rank c10d group on the GPU (NCCL where this libtorch has it) leaves every bucket's
// gradient as backward made it: the mean over one rank, through the real collectives.
TEST(GpuTest, AOneRankGroupOnTheGpuLeavesTheGradientsAsBackwardMadeThem) {
  if (GpuCount() == 0) GTEST_SKIP() << "no GPU";
  Rendezvous rdv;
  rdv.master_port = hyperpack::testing::FreeLoopbackPort();
  rdv.use_cuda = true;
  auto comm = MakeC10dCommunicator(rdv);
  const torch::Device gpu(torch::kCUDA);
  std::vector<torch::Tensor> want = RankGradients(0, 1.0), params;
  for (const torch::Tensor& g : want) params.push_back(torch::zeros_like(g, gpu).requires_grad_());
  GradientSync sync(params, comm.get(), /*bucket_bytes=*/32, /*overlap=*/true);
  sync.BeginMicroStep(true);
  torch::Tensor loss = torch::zeros({}, gpu);
  for (size_t i = 0; i < params.size(); ++i) loss = loss + (params[i] * want[i].to(gpu)).sum();
  loss.backward();
  sync.Finish();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(params[i].grad().is_cuda());
    EXPECT_TRUE(torch::allclose(params[i].grad().cpu(), want[i], 1e-6, 1e-7));
  }
}

// The peak the allocator saw is what was held at most since the reset, in MiB.
TEST(GpuTest, PeakGpuMemoryCountsWhatWasHeld) {
  if (GpuCount() == 0) GTEST_SKIP() << "no GPU";
  const torch::Device gpu(torch::kCUDA);
  ResetPeakGpu(gpu);
  double before = PeakGpuMb(gpu).value();
  {
    torch::Tensor big = torch::empty({64 << 20}, torch::TensorOptions().device(gpu));  // 256 MiB
    SynchronizeDevice(gpu);
  }
  double after = PeakGpuMb(gpu).value();
  EXPECT_GE(after - before, 255.0);
  EXPECT_FALSE(PeakGpuMb(torch::Device(torch::kCPU)).has_value());
}

}  // namespace
}  // namespace hyperpack::trainer
