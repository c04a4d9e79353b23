#!/usr/bin/env bash
# The trainer on a CUDA GPU, in one run: build, tests, precision, packing and throughput.
#
#   bench/gpu_check.sh CARRY OUT [--budget SECONDS]
#                      [--phases "env build test precision pack share speed"]
#                      [--models "mlp cnn charlm"] [--device cuda] [--python python3]
#
# Run from the repository root on a machine with an NVIDIA GPU whose python3 has a CUDA torch
# (its libtorch is what the trainer builds against) and a CUDA toolkit, but no Debian -dev
# packages. CARRY is a folder prepared beside the tree by bench/gpu_carry.sh on a Debian machine:
# headers/ (nlohmann-json, cxxopts, zlib), googletest/ (Debian's /usr/src/googletest), fmnist/
# (Fashion-MNIST's first 30,000 training images and the test set), bin/hyperpack and lib/ (the CLI
# built on Debian, with the shared libraries it needs that such a machine lacks). Results go to
# OUT: gpu_check.log (everything, with the commands), build.log, ctest.log, precision.jsonl,
# speed.tsv, study.html and trials.json.
#
# Phases, in this order, each skipped once --budget (default 480 s) is nearly spent:
#   env        the GPU, driver, CUDA, compiler and torch;
#   build      cmake -DHYPERPACK_TRAINER_ONLY=ON -DHYPERPACK_TRAINER_TESTS=ON against python3's
#              torch (NCCL's headers from its nvidia-nccl package), ninja -k 0 so that every
#              error of one pass is in build.log;
#   test       ctest: the trainer's tests, whose runs take the GPU (device auto), and GpuTest.*;
#   precision  the CNN in fp32, bf16 and fp16 (dynamic loss scaling, the scale every 25 steps)
#              on the GPU, for comparison with the same runs on a CPU;
#   pack       `hyperpack run` of a study with resources {gpus: 1}: the CLI finds the GPU with
#              nvidia-smi; then its trials (peak_gpu_mb each) and its page;
#   share      the CNN study for the same time twice: one trial per GPU ({gpus: 1}), then
#              packed by memory ({gpu_memory: 1GiB}); trials per hour and best accuracy in
#              share.tsv (issue 50's packed study);
#   speed      hyperpack-trainer against bench/pytorch_fmnist.py (the same loop in PyTorch, eager)
#              on the GPU, one rank: the MLP, the CNN and the char transformer at width 768,
#              each in fp32, bf16 and fp16, alternately; each run's epochs after the first are its
#              repeats (samples/s and step time: their median), and its peak GPU memory.
set -uo pipefail

carry="${1:?CARRY folder}"
out="${2:?OUT folder}"
shift 2
budget=480
phases="env build test precision pack share speed"
models="mlp cnn charlm"
device=cuda   # cpu: a rehearsal of the script on a machine without a GPU
python=python3
while [[ $# -gt 0 ]]; do
  case "$1" in
    --budget) budget="$2"; shift 2 ;;
    --phases) phases="$2"; shift 2 ;;
    --models) models="$2"; shift 2 ;;
    --device) device="$2"; shift 2 ;;
    --python) python="$2"; shift 2 ;;
    *) echo "gpu_check.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
carry="$(cd "$carry" && pwd)"
mkdir -p "$out"
root="$(pwd)"
build="$root/build-gpu"
log="$out/gpu_check.log"
start=$SECONDS
exec > >(tee -a "$log") 2>&1

say() { echo "== [$((SECONDS - start)) s] $*"; }
left() { echo $((budget - (SECONDS - start))); }
# Runs a phase when it is asked for and at least $2 seconds of the budget are left.
want() {
  [[ " $phases " == *" $1 "* ]] || return 1
  if [[ $(left) -lt $2 ]]; then say "skipped $1: $(left) s left, it needs about $2"; return 1; fi
  say "phase $1"
}
run() { echo "+ $*"; "$@"; }

export PATH="$build/trainer:$carry/bin:$PATH"
export LD_LIBRARY_PATH="$carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
trainer="$build/trainer/hyperpack-trainer"
data="$carry/fmnist"

if want env 0; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  nvcc --version | tail -n 2
  c++ --version | head -n 1
  cmake --version | head -n 1
  "$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
"gpu", torch.cuda.is_available(), "nccl", torch.cuda.nccl.version(), "cxx11abi",
torch.compiled_with_cxx11_abi())'
fi

if want build 60; then
  prefix="$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
  nccl_h="$("$python" -c 'import nvidia, os; print(os.path.dirname(list(nvidia.__path__)[0]))' 2>/dev/null)"
  nccl_h="$(find "${nccl_h:-/nonexistent}" -name nccl.h -path '*nccl*' 2>/dev/null | head -n 1)"
  [[ -z "$nccl_h" ]] && nccl_h="$(ls /usr/include/nccl.h /usr/local/cuda/include/nccl.h \
    2>/dev/null | head -n 1)"
  extra=()
  if [[ -n "$nccl_h" ]]; then
    extra+=("-DCMAKE_CXX_FLAGS=-I$(dirname "$nccl_h")")
    say "nccl.h: $nccl_h"
  else
    extra+=(-DHYPERPACK_NCCL=OFF)
    say "no nccl.h: building with Gloo between GPUs"
  fi
  generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  run cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DHYPERPACK_TRAINER_ONLY=ON -DHYPERPACK_TRAINER_TESTS=ON -DHYPERPACK_UNITY_BUILD=OFF \
    -DHYPERPACK_GTEST_SOURCE="$carry/googletest" -DHYPERPACK_HEADERS="$carry/headers" \
    -DZLIB_INCLUDE_DIR="$carry/headers" -DZLIB_LIBRARY="$(ls /lib/x86_64-linux-gnu/libz.so.1 \
    /usr/lib/x86_64-linux-gnu/libz.so.1 2>/dev/null | head -n 1)" \
    -DHYPERPACK_TEST_CLI="$carry/bin/hyperpack" -DCMAKE_PREFIX_PATH="$prefix" "${extra[@]}" \
    >"$out/build.log" 2>&1 || { tail -n 40 "$out/build.log"; exit 1; }
  keep=()
  [[ ${#generator[@]} -gt 0 ]] && keep=(-- -k 0)
  if ! cmake --build "$build" -j "$(nproc)" "${keep[@]}" >>"$out/build.log" 2>&1; then
    grep -E 'error|Error' "$out/build.log" | head -n 60
    say "build failed"
    exit 1
  fi
  grep -c warning "$out/build.log" | sed 's/^/warnings: /'
  say "built"
fi

if want test 60; then
  run ctest --test-dir "$build" -j 8 --timeout 240 --output-on-failure >"$out/ctest.log" 2>&1
  grep -E 'tests passed|Failed|\*\*\*|Skipped|Not Run' "$out/ctest.log" | head -n 40
  grep -E 'GpuTest' "$out/ctest.log" | head
fi

cnn=(--model cnn --cnn-channels 32,64 --epochs 3 --batch-size 128 --lr 0.05 --seed 1
     --data-path "$data")
if want precision 30; then
  for p in fp32 bf16 fp16; do
    echo "+ hyperpack-trainer ${cnn[*]} --device $device --precision $p --metrics-every 25"
    "$trainer" "${cnn[@]}" --device "$device" --precision "$p" --metrics-every 25 |
      sed "s/^/$p\t/" | tee -a "$out/precision.jsonl" | grep -v '"loss_scale"' | cut -c1-300
  done
  grep fp16 "$out/precision.jsonl" | grep -o '"loss_scale":[0-9.e+]*' | tr '\n' ' '
  echo
fi

if want pack 40; then
  study="$(mktemp -d)"
  cat >"$study/gpu.yaml" <<EOF
name: gpu-pack
objective: {metric: val_accuracy, direction: maximize}
search_space:
  learning_rate: {type: float, low: 1.0e-3, high: 0.3, log: true}
  batch_size: {type: categorical, values: [64, 128, 256]}
  precision: {type: categorical, values: [fp32, bf16, fp16]}
trial:
  command: hyperpack-trainer --model cnn --cnn-channels 32,64 --epochs 2 --device $device
    --train-samples 20000 --data-path $data
  timeout: 5m
budget: {max_trials: 6, max_parallel: 2}
resources: {gpus: 1}
EOF
  (cd "$study" && run hyperpack run gpu.yaml --storage "$study/h.db") | tail -n 25
  run hyperpack trials gpu-pack --storage "$study/h.db"
  hyperpack trials gpu-pack --storage "$study/h.db" --json >"$out/trials.json"
  run hyperpack report gpu-pack --storage "$study/h.db" -o "$out/study.html"
fi

# The same CNN study twice for the same time: one trial per GPU (resources {gpus: 1}), then packed
# by memory (resources {gpu_memory: 1GiB}; the packer sizes the shares again from the trials'
# peak_gpu_mb). share.tsv: mode, trials completed, seconds, trials per hour, best val_accuracy.
share_study() {
  local mode="$1" resources="$2" dir samples=20000 fake=()
  # A rehearsal on a CPU: one fake GPU of 16 GiB, and trials small enough for its cores.
  [[ $device == cpu ]] && samples=2000 fake=(--fake-gpus 1 --fake-gpu-memory 16384)
  dir="$(mktemp -d)"
  cat >"$dir/s.yaml" <<EOF
name: gpu-share-$mode
objective: {metric: val_accuracy, direction: maximize}
search_space:
  learning_rate: {type: float, low: 1.0e-3, high: 0.3, log: true}
  batch_size: {type: categorical, values: [64, 128, 256]}
trial:
  command: hyperpack-trainer --model cnn --cnn-channels 32,64 --epochs 2 --device $device
    --train-samples $samples --data-path $data
  timeout: 5m
tuner: {algorithm: random, seed: 1}
budget: {max_trials: 200, max_parallel: 16, time_limit: ${share_seconds}s}
resources: $resources
EOF
  local t0=$SECONDS
  (cd "$dir" && run hyperpack run s.yaml --storage "$dir/h.db" --progress log "${fake[@]}") |
    tail -n 5
  local secs=$((SECONDS - t0))
  hyperpack trials "gpu-share-$mode" --storage "$dir/h.db" --json >"$out/share-$mode.json"
  "$python" - "$out/share-$mode.json" "$mode" "$secs" >>"$out/share.tsv" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
rows = rows.get("trials", rows) if isinstance(rows, dict) else rows
done = [r for r in rows if r.get("state") == "completed"]
best = max((r.get("value") or 0 for r in done), default=0)
secs = max(1, int(sys.argv[3]))
print(f"{sys.argv[2]}\t{len(done)}\t{secs}\t{3600 * len(done) / secs:.0f}\t{best:.4f}")
PY
}

if want share 200; then
  share_seconds=$(( ($(left) - 40) / 2 < 120 ? ($(left) - 40) / 2 : 120 ))
  printf 'mode\tcompleted\tseconds\ttrials_per_hour\tbest_val_accuracy\n' >"$out/share.tsv"
  share_study whole "{gpus: 1}"
  share_study packed "{gpu_memory: 1GiB}"
  cat "$out/share.tsv"
fi

# One speed run: hyperpack or pytorch, a model, a precision; appends its epoch lines to speed.tsv.
speed_run() {
  local impl="$1" model="$2" precision="$3" args=()
  case "$model" in
    mlp) args=(--model mlp --epochs 4 --train-samples 30000 --batch-size 128
               --data-path "$data") ;;
    cnn) args=(--model cnn --epochs 4 --train-samples 30000 --batch-size 128
               --data-path "$data") ;;
    charlm) args=(--model charlm --data text --data-path "$corpus" --seq-len 256 --d-model 768
                  --layers 6 --heads 12 --epochs 3 --train-samples 1024 --batch-size 32) ;;
  esac
  args+=(--lr 0.01 --seed 0 --precision "$precision")
  if [[ "$impl" == hyperpack ]]; then
    [[ "$model" == mlp ]] && args+=(--mlp-widths 256,128)
    [[ "$model" == cnn ]] && args+=(--cnn-channels 32,64)
    cmd=("$trainer" --device "$device" "${args[@]}")
  else
    local py=()
    for a in "${args[@]}"; do [[ "$a" != "--data" && "$a" != text ]] && py+=("$a"); done
    cmd=("$python" "$root/bench/pytorch_fmnist.py" --device "$device" "${py[@]}")
  fi
  [[ "$model$precision$impl" == mlpfp32hyperpack ]] && echo "+ ${cmd[*]}"
  "${cmd[@]}" 2>"$out/last_err.txt" | grep '"samples_per_s"' |
    sed "s/^/$impl\t$model\t$precision\t/" >>"$out/speed.tsv" ||
    { echo "failed: ${cmd[*]}"; tail -n 5 "$out/last_err.txt"; }
}

if want speed 60; then
  corpus="$(mktemp)"
  cat "$root"/docs/*.md "$root"/docs/guide/*.md "$root"/*/src/*.cc "$root"/README.md >"$corpus"
  : >"$out/speed.tsv"
  for model in $models; do
    for precision in fp32 bf16 fp16; do
      if [[ $(left) -lt 20 ]]; then say "speed: out of budget at $model $precision"; break 2; fi
      for impl in hyperpack pytorch; do speed_run "$impl" "$model" "$precision"; done
      say "speed: $model $precision"
    done
  done
  "$python" - "$out/speed.tsv" <<'EOF'
import json, statistics, sys
runs = {}
for row in open(sys.argv[1]):
    impl, model, precision, line = row.rstrip("\n").split("\t", 3)
    runs.setdefault((model, precision, impl), []).append(json.loads(line))
print("| model | precision | hyperpack samples/s | PyTorch samples/s | ratio | step ms (h / p) "
      "| peak GPU MiB (h / p) |")
print("|---|---|---|---|---|---|---|")
for model in ("mlp", "cnn", "charlm"):
    for precision in ("fp32", "bf16", "fp16"):
        h, p = runs.get((model, precision, "hyperpack")), runs.get((model, precision, "pytorch"))
        if not h or not p:
            continue
        med = lambda lines, key: statistics.median(l[key] for l in lines[1:] or lines)
        hs, ps = med(h, "samples_per_s"), med(p, "samples_per_s")
        print("| %s | %s | %.0f | %.0f | %.2f | %.2f / %.2f | %.0f / %.0f |" % (
            model, precision, hs, ps, hs / ps, med(h, "step_time_ms"), med(p, "step_time_ms"),
            h[-1].get("peak_gpu_mb", 0), p[-1].get("peak_gpu_mb", 0)))
EOF
fi
say "done"
