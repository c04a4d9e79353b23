// Other tools' trial programs run unmodified: a study with `trial.shim: nni` or `wandb` (as the
// importers write it) puts hyperpack's stand-in for that client first on the trial's PYTHONPATH,
// and the program's nni.* or wandb.* calls get the trial's parameters and report its metrics.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "hyperpack/scheduler/runner.h"
#include "hyperpack/storage/storage.h"
#include "hyperpack/study/import.h"
#include "study_run_fixture.h"
#include "test_util.h"

namespace hyperpack::scheduler {
namespace {

using hyperpack::testing::WriteFile;
using storage::TrialState;

class ShimTest : public hyperpack::testing::StudyRunFixture {
 protected:
  // `config` written as FILE in the test's directory and loaded as `hyperpack run FILE` does.
  study::StudySpec Imported(const std::string& file, const std::string& config) {
    const std::string path = dir_ / file;
    WriteFile(path, config);
    study::ParseOutcome parsed = study::LoadAnyStudyFile(path, std::nullopt);
    EXPECT_TRUE(parsed.spec) << parsed.ErrorText();
    return parsed.spec ? *parsed.spec : study::StudySpec();
  }

  void ExpectAllCompleted(size_t n) {
    auto trials = Trials();
    ASSERT_EQ(trials.size(), n) << output_.str();
    for (const auto& t : trials) EXPECT_EQ(t.state, TrialState::kCompleted) << t.error;
  }
};

// As NNI's mnist-pytorch example: merge_parameter over argparse defaults, an intermediate result
// per epoch, a final one; a nested choice comes back nested.
TEST_F(ShimTest, AnNniTrialProgramRunsUnmodified) {
  WriteFile(dir_ / "trial.py", R"(import argparse
import nni
from nni.utils import merge_parameter
p = argparse.ArgumentParser()
p.add_argument("--lr", type=float, default=0.5)
p.add_argument("--epochs", type=int, default=3)
tuned = nni.get_next_parameter()
layer = tuned.pop("layer")
assert isinstance(layer, dict) and layer["_name"] in ("Empty", "Conv"), layer
assert ("kernel" in layer) == (layer["_name"] == "Conv"), layer
args = merge_parameter(p.parse_args([]), tuned)
for epoch in range(args.epochs):
    nni.report_intermediate_result(args.lr * (epoch + 1))
nni.report_final_result({"default": args.lr * 10, "kernel": layer.get("kernel", 0)})
)");
  study::StudySpec spec = Imported("config.yml", R"(experimentName: s
searchSpace:
  lr: {_type: uniform, _value: [0.1, 0.2]}
  layer:
    _type: choice
    _value: [{_name: Empty}, {_name: Conv, kernel: {_type: choice, _value: [3, 5]}}]
trialCommand: python3 trial.py
trialConcurrency: 1
maxTrialNumber: 4
tuner: {name: Random, classArgs: {optimize_mode: minimize}}
)");
  ASSERT_EQ(spec.trial.shim, study::TrialShim::kNni);
  ASSERT_TRUE(Run(spec).ok()) << output_.str();
  ExpectAllCompleted(4);
  for (const auto& t : Trials()) {
    const double lr = std::get<double>(t.params.at("lr"));
    EXPECT_DOUBLE_EQ(t.value.value_or(-1), lr * 10);
    int intermediate = 0;
    for (const storage::MetricPoint& m : Metrics(t.number)) intermediate += m.name == "default";
    EXPECT_GE(intermediate, 3);
  }
}

// As W&B's examples: wandb.init(config=defaults), wandb.config, wandb.log per epoch with media
// among the numbers, run.summary; a nested sweep parameter comes back nested.
TEST_F(ShimTest, AWandbProgramRunsUnmodified) {
  WriteFile(dir_ / "train.py", R"(import wandb
run = wandb.init(project="p", config={"lr": 1.0, "epochs": 2, "opt": {"beta": 0.0}})
cfg = wandb.config
assert cfg.epochs == 2 and 0.5 <= cfg.opt["beta"] <= 0.9, dict(cfg)
for epoch in range(cfg.epochs):
    wandb.log({"val_loss": cfg.lr * cfg.opt.beta * (epoch + 1), "sample": wandb.Image(None)})
run.summary["best_val_loss"] = cfg.lr * cfg.opt.beta
wandb.finish()
)");
  study::StudySpec spec = Imported("sweep.yaml", "program: " + (dir_ / "train.py") + R"(
method: random
name: s
metric: {name: val_loss, goal: minimize}
run_cap: 3
parameters:
  lr: {min: 0.01, max: 0.1}
  opt:
    parameters:
      beta: {min: 0.5, max: 0.9}
)");
  ASSERT_EQ(spec.trial.shim, study::TrialShim::kWandb);
  ASSERT_TRUE(Run(spec).ok()) << output_.str();
  ExpectAllCompleted(3);
  for (const auto& t : Trials()) {
    const double product =
        *ValueAsNumber(t.params.at("lr")) * *ValueAsNumber(t.params.at("opt_beta"));
    EXPECT_NEAR(t.value.value_or(-1), 2 * product, 1e-9);  // the last logged val_loss
  }
}

// As Determined's Core API tutorial (stage 3): get_cluster_info's hparams, det.core.init, training
// and validation metrics, a checkpoint stored and found again, should_preempt; adaptive ASHA over
// batches as hyperpack's ASHA.
TEST_F(ShimTest, ADeterminedCoreApiProgramRunsUnmodified) {
  WriteFile(dir_ / "3_hpsearch.py", R"(import logging, pathlib
import determined as det

def main(core_context, latest_checkpoint, trial_id, increment_by, opt):
    x, start = 0, 0
    if latest_checkpoint is not None:
        with core_context.checkpoint.restore_path(latest_checkpoint) as path:
            x, start = [int(v) for v in (path / "state").read_text().split(",")]
    for batch in range(start, 30):
        x += increment_by * opt["scale"]
        steps_completed = batch + 1
        if steps_completed % 10 == 0:
            core_context.train.report_training_metrics(steps_completed=steps_completed, metrics={"x": x})
            core_context.train.report_validation_metrics(steps_completed=steps_completed, metrics={"x": x})
            with core_context.checkpoint.store_path({"steps_completed": steps_completed}) as (path, uuid):
                (path / "state").write_text(f"{x},{steps_completed}")
            if core_context.preempt.should_preempt():
                return

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    info = det.get_cluster_info()
    assert info is not None
    hparams = info.trial.hparams
    with det.core.init() as core_context:
        main(core_context, info.latest_checkpoint, info.trial.trial_id, hparams["increment_by"],
             hparams["opt"])
)");
  study::StudySpec spec = Imported("3_hpsearch.yaml", R"(name: s
entrypoint: python3 3_hpsearch.py
hyperparameters:
  increment_by: {type: int, minval: 1, maxval: 8}
  opt:
    scale: {type: categorical, vals: [1, 2]}
searcher:
   name: random
   metric: x
   max_trials: 3
max_restarts: 0
)");
  ASSERT_EQ(spec.trial.shim, study::TrialShim::kDetermined);
  spec.trial.workdir = dir_.path().string();
  ASSERT_TRUE(Run(spec).ok()) << output_.str();
  ExpectAllCompleted(3);
  for (const auto& t : Trials()) {
    const auto per_batch = std::get<int64_t>(t.params.at("increment_by")) *
                           std::get<int64_t>(t.params.at("opt_scale"));
    EXPECT_EQ(t.value.value_or(-1), 30.0 * per_batch);  // the last validation x, at 30 batches
    bool training = false;
    for (const storage::MetricPoint& m : Metrics(t.number)) training |= m.name == "training/x";
    EXPECT_TRUE(training);
  }
}

// Without the shim, the same program finds no wandb module and fails: the shim is what runs it.
TEST_F(ShimTest, WithoutTheShimTheProgramDoesNotRun) {
  WriteFile(dir_ / "t.py", "import wandb\nwandb.log({'val_loss': 1})\n");
  study::StudySpec spec = Spec(R"(name: s
objective: {metric: val_loss, direction: minimize}
search_space: {x: [1, 2]}
trial: {command: python3 t.py}
budget: {max_trials: 1, max_failed: 1}
)");
  spec.trial.workdir = dir_.path().string();
  (void)Run(spec);
  auto trials = Trials();
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_EQ(trials[0].state, TrialState::kFailed);
  spec.trial.shim = study::TrialShim::kWandb;
  spec.name = "s2";
  ASSERT_TRUE(Run(spec).ok()) << output_.str();
  auto shimmed = Trials("s2");
  ASSERT_EQ(shimmed.size(), 1u);
  EXPECT_EQ(shimmed[0].state, TrialState::kCompleted) << shimmed[0].error;
}

}  // namespace
}  // namespace hyperpack::scheduler
