// The roles a trial's parameters play and the launchers' formats (report/src/launchers.h), on
// hand-written parameters: no study is run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "launchers.h"

namespace hyperpack::report {
namespace {

using study::ExportSpec;
using study::RoleSource;
using study::TrainingRole;
using ::testing::HasSubstr;
using Json = nlohmann::json;

TEST(ResolveSetupTest, InfersTheRolesFromCommonNamesAndSplitsTheGlobalBatch) {
  Params p = {{"learning_rate", 0.02},       {"batch_size", int64_t{256}},
              {"data_parallel", int64_t{2}}, {"grad_accumulation", int64_t{4}},
              {"precision", "bf16"},         {"Weight-Decay", 0.01}};
  auto s = ResolveSetup(p, {});
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->global_batch, 256);
  EXPECT_EQ(s->micro_batch, 256 / (4 * 2));
  EXPECT_EQ(s->data_parallel, 2);
  EXPECT_EQ(s->accumulation, 4);
  EXPECT_EQ(s->precision, TrainPrecision::kBf16);
  EXPECT_EQ(*s->learning_rate, 0.02);
  EXPECT_EQ(*s->weight_decay, 0.01);  // case and '-' do not matter
  EXPECT_FALSE(s->optimizer);
}

TEST(ResolveSetupTest, AMicroBatchAloneGivesTheGlobalOne) {
  auto s = ResolveSetup({{"per_device_train_batch_size", int64_t{8}},
                         {"gradient_accumulation_steps", int64_t{3}},
                         {"devices", int64_t{4}}},
                        {});
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->global_batch, 8 * 3 * 4);
}

TEST(ResolveSetupTest, RolesNamedInTheStudyFileWinAndMayBeFixedValues) {
  ExportSpec spec;
  spec.roles[TrainingRole::kMicroBatch] = RoleSource{"mbs", std::nullopt};
  spec.roles[TrainingRole::kDataParallel] = RoleSource{"", Value(int64_t{4})};
  spec.roles[TrainingRole::kOptimizer] = RoleSource{"", Value(std::string("sgd"))};
  // batch_size would be the global batch by name; the study file says mbs is the micro batch.
  auto s = ResolveSetup({{"mbs", int64_t{16}}, {"lr", 0.1}}, spec);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->micro_batch, 16);
  EXPECT_EQ(s->global_batch, 64);
  EXPECT_EQ(*s->optimizer, Optimizer::kSgd);
}

TEST(ResolveSetupTest, ArithmeticThatDoesNotAddUpIsAnErrorNamingTheNumbers) {
  auto mismatch = ResolveSetup(
      {{"micro_batch_size", int64_t{8}}, {"batch_size", int64_t{100}}, {"dp", int64_t{2}}}, {});
  ASSERT_FALSE(mismatch.ok());
  EXPECT_THAT(mismatch.status().message(),
              HasSubstr("global batch 100 (batch_size) is not micro batch 8 x accumulation 1 x "
                        "data-parallel 2 = 16"));
  auto uneven = ResolveSetup({{"batch_size", int64_t{100}}, {"dp", int64_t{3}}}, {});
  ASSERT_FALSE(uneven.ok());
  EXPECT_THAT(uneven.status().message(), HasSubstr("is not a multiple of accumulation 1"));
}

TEST(ResolveSetupTest, NoBatchOrAValueOfTheWrongKindSaysHowToFixIt) {
  auto none = ResolveSetup({{"x", 0.5}, {"opt", "adam"}}, {});
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.status().message(), HasSubstr("(parameters: x, opt)"));
  EXPECT_THAT(none.status().message(), HasSubstr("export: {roles: {global_batch: PARAMETER}}"));
  auto precision = ResolveSetup({{"batch_size", int64_t{8}}, {"dtype", "int8"}}, {});
  ASSERT_FALSE(precision.ok());
  EXPECT_THAT(precision.status().message(),
              HasSubstr("precision (from dtype): 'int8' is not a precision"));
  auto half = ResolveSetup({{"batch_size", 12.5}}, {});
  ASSERT_FALSE(half.ok());
  EXPECT_THAT(half.status().message(), HasSubstr("is not a whole number >= 1"));
}

TrainingSetup Resolved(Params p) {
  auto s = ResolveSetup(p, {});
  EXPECT_TRUE(s.ok()) << s.status().message();
  return *s;
}

TEST(DeepSpeedConfigTest, HoldsTheBatchTripleOptimizerSchedulerAndPrecisionBlocks) {
  auto out = DeepSpeedConfig(Resolved({{"lr", 3e-4},
                                       {"batch_size", int64_t{512}},
                                       {"dp", int64_t{8}},
                                       {"grad_accum", int64_t{2}},
                                       {"optimizer", "adamw"},
                                       {"weight_decay", 0.1},
                                       {"warmup_steps", int64_t{100}},
                                       {"precision", "16-mixed"}}));
  Json c = Json::parse(out.text);
  EXPECT_EQ(c["train_batch_size"].get<int>(), c["train_micro_batch_size_per_gpu"].get<int>() *
                                                  c["gradient_accumulation_steps"].get<int>() * 8);
  EXPECT_EQ(c["train_micro_batch_size_per_gpu"], 32);
  EXPECT_EQ(c["optimizer"]["type"], "AdamW");
  EXPECT_EQ(c["optimizer"]["params"]["weight_decay"], 0.1);
  EXPECT_EQ(c["scheduler"]["params"]["warmup_num_steps"], 100);
  EXPECT_EQ(c["fp16"]["loss_scale"], 0);  // dynamic
  EXPECT_FALSE(c.contains("bf16"));
  EXPECT_TRUE(out.warnings.empty());
}

TEST(DeepSpeedConfigTest, WhatItCannotSayIsAWarningNamingTheParameterNotASilentGuess) {
  Params p = {
      {"lr", 0.1}, {"batch_size", int64_t{64}}, {"warmup_ratio", 0.05}, {"seed", int64_t{3}}};
  TrainingSetup s = Resolved(p);
  auto out = DeepSpeedConfig(s);
  Json c = Json::parse(out.text);
  EXPECT_FALSE(c.contains("optimizer"));
  EXPECT_FALSE(c.contains("scheduler"));
  EXPECT_TRUE(out.warnings.empty());
  NameWhatIsNotCarried(p, s, "--format deepspeed", &out);
  ASSERT_EQ(out.warnings.size(), 3u) << ::testing::PrintToString(out.warnings);
  EXPECT_THAT(out.warnings[0], HasSubstr("does not carry lr = 0.1: no optimizer role"));
  EXPECT_THAT(out.warnings[1], HasSubstr("does not carry warmup_ratio = 0.05: DeepSpeed has no"));
  EXPECT_THAT(out.warnings[2], HasSubstr("--format deepspeed does not carry seed = 3: none of"));
}

TEST(HuggingFaceArgumentsTest, PerDeviceBatchAccumulationPrecisionAndTheLaunchersPart) {
  Params p = {{"learning_rate", 5e-5},
              {"batch_size", int64_t{64}},
              {"world_size", int64_t{4}},
              {"warmup_ratio", 0.1},
              {"precision", "bf16"}};
  TrainingSetup s = Resolved(p);
  auto out = HuggingFaceArguments(s);
  Json a = Json::parse(out.text);
  EXPECT_EQ(a["per_device_train_batch_size"], 16);
  EXPECT_EQ(a["gradient_accumulation_steps"], 1);
  EXPECT_EQ(a["learning_rate"], 5e-5);
  // transformers 5's spelling of a fraction (warmup_ratio is gone from 5.2), said in a warning.
  EXPECT_EQ(a["warmup_steps"], 0.1);
  EXPECT_FALSE(a.contains("warmup_ratio"));
  EXPECT_EQ(a["bf16"], true);
  EXPECT_FALSE(a.contains("fp16"));
  ASSERT_EQ(out.warnings.size(), 1u);
  EXPECT_THAT(out.warnings[0], HasSubstr("under transformers 4 name it warmup_ratio"));
  NameWhatIsNotCarried(p, s, "--format hf", &out);
  ASSERT_EQ(out.warnings.size(), 2u);
  EXPECT_THAT(out.warnings[1], HasSubstr("does not carry world_size = 4: "));
  EXPECT_THAT(out.warnings[1], HasSubstr("torchrun --nproc_per_node 4"));
}

// The Trainer builds SGD from the learning rate alone (optim_args reaches other optimizers): a
// momentum is named as not carried rather than written where nothing reads it.
TEST(HuggingFaceArgumentsTest, SgdMomentumIsNamedAsNotCarried) {
  Params p = {{"lr", 0.1}, {"batch_size", int64_t{32}}, {"optimizer", "sgd"}, {"momentum", 0.9}};
  TrainingSetup s = Resolved(p);
  auto out = HuggingFaceArguments(s);
  Json a = Json::parse(out.text);
  EXPECT_EQ(a["optim"], "sgd");
  EXPECT_FALSE(a.contains("optim_args"));
  NameWhatIsNotCarried(p, s, "--format hf", &out);
  ASSERT_EQ(out.warnings.size(), 1u);
  EXPECT_THAT(out.warnings[0], HasSubstr("does not carry momentum = 0.9: the Trainer's \"sgd\""));
}

// The Trainer has one warm-up: with both a count and a ratio, the count is written and the ratio
// named as not carried.
TEST(HuggingFaceArgumentsTest, AWarmupRatioBesideWarmupStepsIsNamedAsNotCarried) {
  Params p = {{"lr", 0.1},
              {"batch_size", int64_t{32}},
              {"warmup_steps", int64_t{50}},
              {"warmup_ratio", 0.1}};
  TrainingSetup s = Resolved(p);
  auto out = HuggingFaceArguments(s);
  Json a = Json::parse(out.text);
  EXPECT_EQ(a["warmup_steps"], 50);
  EXPECT_FALSE(a.contains("warmup_ratio"));
  NameWhatIsNotCarried(p, s, "--format hf", &out);
  ASSERT_EQ(out.warnings.size(), 1u) << ::testing::PrintToString(out.warnings);
  EXPECT_THAT(out.warnings[0],
              HasSubstr("does not carry warmup_ratio = 0.1: warmup_steps 50 is written"));
}

TEST(LightningTrainerTest, DevicesStrategyMixedPrecisionAndAccumulation) {
  auto out = LightningTrainer(Resolved({{"lr", 0.01},
                                        {"batch_size", int64_t{256}},
                                        {"gpus", int64_t{2}},
                                        {"accumulate_grad_batches", int64_t{2}},
                                        {"precision", "bf16"}}));
  EXPECT_THAT(out.text, HasSubstr("  devices: 2\n"));
  EXPECT_THAT(out.text, HasSubstr("  strategy: ddp\n"));
  EXPECT_THAT(out.text, HasSubstr("  precision: \"bf16-mixed\"\n"));
  EXPECT_THAT(out.text, HasSubstr("  accumulate_grad_batches: 2\n"));
  EXPECT_THAT(out.text, HasSubstr("  batch_size: 64"));
  Params p = {{"batch_size", int64_t{32}}, {"optimizer", "adamw"}, {"dropout", 0.1}};
  TrainingSetup s = Resolved(p);
  auto one = LightningTrainer(s);
  NameWhatIsNotCarried(p, s, "--format lightning", &one);
  ASSERT_EQ(one.warnings.size(), 2u);
  EXPECT_THAT(one.warnings[0], HasSubstr("does not carry optimizer = adamw: the LightningModule"));
  EXPECT_THAT(one.warnings[1], HasSubstr("does not carry dropout = 0.1: none of its fields"));
  EXPECT_THAT(one.text, HasSubstr("  strategy: auto\n"));
  EXPECT_THAT(one.text, HasSubstr("  precision: \"32-true\"\n"));
}

TEST(TorchrunCommandTest, APythonScriptRunsUnderTorchrunAndAProgramWithNoPython) {
  TrainingSetup s = Resolved({{"batch_size", int64_t{64}}, {"nproc", int64_t{4}}});
  auto py = TorchrunCommand(s, "python3 train.py --lr 0.1");
  // Spelled as torchrun 1.13 reads them; 2.x reads these too.
  EXPECT_THAT(py.text, HasSubstr("torchrun --nnodes=1 --nproc_per_node=4 --rdzv_backend=c10d "
                                 "--rdzv_endpoint="));
  EXPECT_THAT(py.text, HasSubstr(" train.py --lr 0.1\n"));
  EXPECT_THAT(py.text, Not(HasSubstr("--no_python")));
  EXPECT_THAT(py.text, HasSubstr("# micro_batch = 16 (global batch / 4)\n"));
  auto binary = TorchrunCommand(s, "build/trainer/hyperpack-trainer --model cnn");
  EXPECT_THAT(binary.text, HasSubstr("--no_python build/trainer/hyperpack-trainer --model cnn"));
  auto pipe = TorchrunCommand(s, "python3 train.py | tee log");
  ASSERT_EQ(pipe.warnings.size(), 1u);
}

// A command that reads its parameters from the environment (the quickstart's hyperpack-trainer
// reads HYPERPACK_PARAMS_FILE, the softmax example ${HP_MOMENTUM:-0}): the values travel.
TEST(TorchrunCommandTest, WhatTheTrialReadFromItsEnvironmentTravelsWithTheLine) {
  TrainingSetup s = Resolved({{"batch_size", int64_t{64}}});
  auto out = TorchrunCommand(s, "hyperpack-trainer --model mlp",
                             {{"lr", 0.01}, {"optimizer", std::string("sgd")}});
  EXPECT_THAT(out.text, HasSubstr("env HYPERPACK_PARAMS='{\"lr\":0.01,\"optimizer\":\"sgd\"}' "
                                  "HP_LR=0.01 HP_OPTIMIZER=sgd torchrun "));
  const std::vector<std::string> names = {"momentum", "lr"};
  EXPECT_EQ(ResolveParamVariables("t.py --m ${HP_MOMENTUM:-0} --lr $HP_LR --x $HP_LRX",
                                  {{"momentum", 0.9}, {"lr", 0.1}}, names),
            "t.py --m 0.9 --lr 0.1 --x $HP_LRX");
  // Inactive (absent): the default, or nothing.
  EXPECT_EQ(ResolveParamVariables("t.py --m ${HP_MOMENTUM:-0} --n ${HP_MOMENTUM}", {}, names),
            "t.py --m 0 --n ''");
}

TEST(HydraOverridesTest, EveryParameterAsKeyEqualsValueQuotedWhereNeeded) {
  auto out = HydraOverrides({{"lr", 0.001}, {"model", "resnet"}, {"tag", "a b"}});
  EXPECT_EQ(out.text, "lr=0.001 model=resnet 'tag='\\''a b'\\'''\n");
}

}  // namespace
}  // namespace hyperpack::report
