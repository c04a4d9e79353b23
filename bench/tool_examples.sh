#!/usr/bin/env bash
# Runs other tools' own example trial programs, unmodified, under hyperpack, on Fashion-MNIST from
# Debian's dataset-fashion-mnist package (no download), and prints each study's trials.
#
# Usage: bench/tool_examples.sh NNI_TREE WANDB_EXAMPLES_TREE WANDB_SWEEPS_TREE DETERMINED_TREE
#                               [HYPERPACK]
#   NNI_TREE              a checkout of microsoft/nni (examples/trials/mnist-pytorch)
#   WANDB_EXAMPLES_TREE   a checkout of wandb/examples (examples/pytorch/pytorch-cnn-fashion)
#   WANDB_SWEEPS_TREE     a checkout of wandb/sweeps (examples/nested-params)
#   DETERMINED_TREE       a checkout of determined-ai/determined (examples/tutorials/core_api)
#   HYPERPACK             the hyperpack program (default build/cli/hyperpack)
# Needs /usr/bin/python3 with torch and torchvision (Debian's python3-torch, python3-torchvision).
#
# Each example folder is copied to a scratch folder (their files never enter this tree), its
# experiment or sweep file is imported as it is, and the study runs with --max-trials 2. Where
# the example's own length would take long on 2 cores, the imported *study* (not the program) is
# shortened: NNI's command gets --epochs 1 --batch_num 300; W&B's fixed `epochs` becomes 1.
set -euo pipefail
nni=$(realpath "$1"); wandb_examples=$(realpath "$2"); wandb_sweeps=$(realpath "$3")
determined=$(realpath "$4"); hyperpack=$(realpath "${5:-build/cli/hyperpack}")
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export PATH="/usr/bin:$PATH"  # the python3 with torch first
fmnist=/usr/share/datasets/fashion-mnist

# The four idx files, unpacked, in DIR (as torchvision's MNIST keeps them in MNIST/raw).
raw_fmnist() {
  mkdir -p "$1"
  for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
    gunzip -c "$fmnist/$f.gz" >"$1/$f"
  done
}

run_study() {  # LABEL DIR STUDY_FILE STUDY_NAME [TRIALS]: runs it and prints its trials
  local label="$1" dir="$2" file="$3" name="$4" trials="${5:-2}" start=$SECONDS
  (cd "$dir" && "$hyperpack" run "$file" --storage "$scratch/$label.db" --max-trials "$trials" \
    --progress log)
  echo "== $label: $((SECONDS - start)) s"
  "$hyperpack" trials "$name" --storage "$scratch/$label.db"
}

# NNI: examples/trials/mnist-pytorch (nni.get_next_parameter, merge_parameter,
# report_intermediate_result, report_final_result), its config.yml imported as it is.
d="$scratch/nni-mnist"; cp -r "$nni/examples/trials/mnist-pytorch" "$d"
raw_fmnist "$d/data/MNIST/raw"
"$hyperpack" import "$d/config.yml" -o "$d/study.yaml"
sed -i 's|command: "python3 mnist.py"|command: "python3 mnist.py --epochs 1 --batch_num 300"|' "$d/study.yaml"
run_study nni "$d" study.yaml config

# W&B: examples/pytorch/pytorch-cnn-fashion (wandb.init(config=defaults), wandb.config, wandb.watch,
# wandb.log of tensors, wandb.run.dir), its grid sweep with hyperband imported as it is. Its own
# dataset class loads processed/*.pt: made here with the example's own readers.
d="$scratch/wandb-fashion"; cp -r "$wandb_examples/examples/pytorch/pytorch-cnn-fashion" "$d"
raw_fmnist "$d/data/raw"; mkdir -p "$d/data/processed"
(cd "$d" && /usr/bin/python3 - <<'PY'
import torch, fashion_data as f
for split, prefix in (("training.pt", "train"), ("test.pt", "t10k")):
    torch.save((f.read_image_file(f"data/raw/{prefix}-images-idx3-ubyte"),
                f.read_label_file(f"data/raw/{prefix}-labels-idx1-ubyte")), f"data/processed/{split}")
PY
)
"$hyperpack" import "$d/sweep-grid-hyperband.yaml" -o "$d/study.yaml"
sed -i 's|epochs: {type: fixed, value: 27}|epochs: {type: fixed, value: 1}|' "$d/study.yaml"
run_study wandb-fashion "$d" study.yaml sweep-grid-hyperband

# W&B: wandb/sweeps examples/nested-params (wandb.init(config=args), nested wandb.config access),
# its sweep run directly, with no import step.
d="$scratch/wandb-nested"; cp -r "$wandb_sweeps/examples/nested-params" "$d"
run_study wandb-nested "$d" sweep-nested-cli.yaml sweep-nested-cli

# Determined: examples/tutorials/core_api stage 3 (det.get_cluster_info, det.core.init,
# report_*_metrics, checkpoint.store_path/restore_path, preempt.should_preempt), its adaptive ASHA
# experiment run directly: hyperpack's ASHA pauses trials at rungs and resumes them from the
# checkpoints the program stores.
d="$scratch/determined-core-api"; cp -r "$determined/examples/tutorials/core_api" "$d"
run_study determined "$d" 3_hpsearch.yaml core-api-stage-3 4
