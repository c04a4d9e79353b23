#!/usr/bin/env bash
# Training throughput of hyperpack-trainer and of plain PyTorch (bench/pytorch_fmnist.py) on the
# same model, batch, threads and data, as markdown tables.
#
#   bench/trainer_throughput.sh [TRAINER] [--repeats 3] [--epochs 1] [--train-samples 20000]
#                               [--models "mlp cnn"] [--batch-size 128] [--threads 1]
#                               [--blas-threads N]
#
# TRAINER is the built hyperpack-trainer (default: build/trainer/hyperpack-trainer under the
# repository). For each model it runs, R times, alternately hyperpack then PyTorch (A B A B ...):
#   1 rank:  --batch-size B --threads T (PyTorch: a plain training loop);
#   2 ranks: --nproc 2 --batch-size 2B --threads T (each rank computes B samples per step, the
#            work of the 1-rank run; PyTorch: DistributedDataParallel over Gloo on loopback).
# samples/s is the metric line's samples_per_s of the last epoch (optimizer steps x global batch /
# seconds of the training loop; with --epochs 2 or more the first epoch's warm-up is left out).
# Tables: median [min, max] over the repeats for one rank, hyperpack / PyTorch; then scaling,
# samples/s with 2 ranks / with 1 rank, for each. The commands are printed exactly as they ran.
# Progress goes to stderr. A run that fails is reported and left out, and the exit status is 1.
#
# Threads: --threads is torch.set_num_threads in both programs, which bounds ATen's OpenMP pool
# but not a pthreads OpenBLAS (Debian's default libblas.so.3, through which libtorch multiplies):
# that one starts a worker per core whatever set_num_threads says. Every run is therefore given
# OPENBLAS_NUM_THREADS (default: the value of --threads; --blas-threads 0 leaves the environment
# as it is), so that "1 thread" is one thread and two ranks do not oversubscribe the cores.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
python=/usr/bin/python3

trainer="$root/build/trainer/hyperpack-trainer"
repeats=3
epochs=1
train_samples=20000
models="mlp cnn"
batch=128
threads=1
blas_threads=""
lr=0.01
seed=0

usage() { sed -n '5,7p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
need() { [[ $# -ge 2 ]] || { echo "trainer_throughput.sh: $1 needs a value" >&2; exit 2; }; }

if [[ $# -gt 0 && "$1" != -* ]]; then
  trainer="$1"
  shift
fi
while [[ $# -gt 0 ]]; do
  case "$1" in
    --repeats) need "$@"; repeats="$2"; shift 2 ;;
    --epochs) need "$@"; epochs="$2"; shift 2 ;;
    --train-samples) need "$@"; train_samples="$2"; shift 2 ;;
    --models) need "$@"; models="$2"; shift 2 ;;
    --batch-size) need "$@"; batch="$2"; shift 2 ;;
    --threads) need "$@"; threads="$2"; shift 2 ;;
    --blas-threads) need "$@"; blas_threads="$2"; shift 2 ;;
    -h | --help) usage ;;
    *) echo "trainer_throughput.sh: unknown argument '$1'" >&2; usage ;;
  esac
done
blas_threads="${blas_threads:-$threads}"
if ! [[ "$blas_threads" =~ ^[0-9]+$ ]]; then
  echo "trainer_throughput.sh: --blas-threads must be an integer >= 0 (got '$blas_threads')" >&2
  exit 2
fi
for pair in "repeats:$repeats" "epochs:$epochs" "train-samples:$train_samples" \
            "batch-size:$batch" "threads:$threads"; do
  if ! [[ "${pair#*:}" =~ ^[1-9][0-9]*$ ]]; then
    echo "trainer_throughput.sh: --${pair%%:*} must be a positive integer (got '${pair#*:}')" >&2
    exit 2
  fi
done
for model in $models; do
  [[ "$model" == mlp || "$model" == cnn ]] ||
    { echo "trainer_throughput.sh: --models: '$model' is not mlp or cnn" >&2; exit 2; }
done
if [[ ! -x "$trainer" ]]; then
  echo "trainer_throughput.sh: $trainer is not an executable; build it" \
       "(cmake --build build --target hyperpack-trainer) or give its path" >&2
  exit 2
fi
if [[ ! -x "$python" ]]; then
  echo "trainer_throughput.sh: $python is missing; install python3-torch" >&2
  exit 2
fi

# Both programs start their own ranks only when no launcher's variables are set.
unset WORLD_SIZE RANK LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT
if [[ "$blas_threads" -gt 0 ]]; then
  export OPENBLAS_NUM_THREADS="$blas_threads"
  blas_note="OPENBLAS_NUM_THREADS=$blas_threads"
else
  if [[ -n "${OPENBLAS_NUM_THREADS:-}" ]]; then
    blas_note="OPENBLAS_NUM_THREADS=$OPENBLAS_NUM_THREADS from the environment"
  else
    blas_note="OPENBLAS_NUM_THREADS not set"
  fi
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
results="$work/results.tsv"  # impl, model, ranks, the last epoch's metric line
commands="$work/commands.txt"
: >"$results"
: >"$commands"
failed=0

# Words as a shell reads them back: quoted only where they need it.
shell_words() {
  local out="" w
  for w in "$@"; do
    if [[ "$w" =~ ^[A-Za-z0-9_./,:=+-]+$ ]]; then out+="$w "; else out+="$(printf '%q' "$w") "; fi
  done
  echo "${out% }"
}

# The command of one run, in the array `cmd`.
command_for() {
  local impl="$1" model="$2" ranks="$3"
  local global=$((batch * ranks))
  local common=(--batch-size "$global" --threads "$threads" --epochs "$epochs"
                --train-samples "$train_samples" --lr "$lr" --seed "$seed")
  if [[ "$impl" == hyperpack ]]; then
    cmd=("$trainer" --model "$model")
    if [[ "$model" == mlp ]]; then cmd+=(--mlp-widths 256,128); else cmd+=(--cnn-channels 32,64); fi
    cmd+=("${common[@]}")
  else
    cmd=("$python" "$here/pytorch_fmnist.py" --model "$model" "${common[@]}")
  fi
  if [[ "$ranks" -gt 1 ]]; then cmd+=(--nproc "$ranks"); fi
}

# What the commands run with, for the printed form.
env_words=()
if [[ -n "${OPENBLAS_NUM_THREADS:-}" ]]; then
  env_words=("OPENBLAS_NUM_THREADS=$OPENBLAS_NUM_THREADS")
fi

load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= repeats; ++r)); do
  for ranks in 1 2; do
    for model in $models; do
      for impl in hyperpack pytorch; do
        command_for "$impl" "$model" "$ranks"
        line="$(shell_words "${env_words[@]}" "${cmd[@]}")"
        if [[ $r -eq 1 ]]; then echo "$line" >>"$commands"; fi
        echo "trainer_throughput.sh: repeat $r/$repeats: $impl $model, $ranks rank(s)" >&2
        out="$work/out.txt"
        if ! "${cmd[@]}" >"$out" 2>"$work/err.txt"; then
          echo "trainer_throughput.sh: failed: $line" >&2
          tail -n 5 "$work/err.txt" >&2
          failed=1
          continue
        fi
        metrics="$(grep '"samples_per_s"' "$out" | tail -n 1 || true)"
        if [[ -z "$metrics" ]]; then
          echo "trainer_throughput.sh: no samples_per_s from: $line" >&2
          failed=1
          continue
        fi
        printf '%s\t%s\t%s\t%s\n' "$impl" "$model" "$ranks" "$metrics" >>"$results"
      done
    done
  done
done
load_after="$(cut -d' ' -f1-3 /proc/loadavg)"

torch_version="$("$python" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo '?')"
"$python" - "$results" "$commands" "$repeats" "$epochs" "$train_samples" "$batch" "$threads" \
  "$models" "$torch_version" "$load_before" "$load_after" "$(nproc)" "$blas_note" <<'EOF'
import json
import statistics
import sys

(path, commands, repeats, epochs, samples, batch, threads, models, torch_version, load_before,
 load_after, cores, blas_note) = sys.argv[1:]
runs = {}
for row in open(path):
    impl, model, ranks, metrics = row.rstrip("\n").split("\t", 3)
    runs.setdefault((impl, model, int(ranks)), []).append(json.loads(metrics))
models = models.split()


def rate(impl, model, ranks):
    values = [m["samples_per_s"] for m in runs.get((impl, model, ranks), [])]
    return statistics.median(values) if values else None


def cell(impl, model, ranks):
    values = [m["samples_per_s"] for m in runs.get((impl, model, ranks), [])]
    if not values:
        return "-"
    if len(values) == 1:
        return "%.0f" % values[0]
    return "%.0f [%.0f, %.0f]" % (statistics.median(values), min(values), max(values))


def ratio(a, b):
    return "%.2f" % (a / b) if a and b else "-"


def accuracy(impl, model, ranks):
    values = [m.get("test_accuracy") for m in runs.get((impl, model, ranks), [])]
    values = [v for v in values if v is not None]
    return "%.4f" % statistics.median(values) if values else "-"


def table(header, body):
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join(["---"] * len(header)) + "|")
    for line in body:
        print("| " + " | ".join(line) + " |")


b, t = int(batch), int(threads)
print("hyperpack-trainer vs PyTorch %s (Python, bench/pytorch_fmnist.py) on Fashion-MNIST: %s "
      "epoch(s) of %s training samples, median [min, max] of %s runs taken alternately (A B A B), "
      "samples/s over the last epoch's training loop. %s cores; load average %s before, %s after."
      % (torch_version, epochs, samples, repeats, cores, load_before, load_after))
print("\nOne process: batch %d, %d thread(s) (%s)\n" % (b, t, blas_note))
table(["model", "hyperpack samples/s", "pytorch samples/s", "hyperpack / pytorch",
       "test accuracy hyperpack / pytorch"],
      [[m, cell("hyperpack", m, 1), cell("pytorch", m, 1),
        ratio(rate("hyperpack", m, 1), rate("pytorch", m, 1)),
        "%s / %s" % (accuracy("hyperpack", m, 1), accuracy("pytorch", m, 1))] for m in models])
print("\nData-parallel scaling: %d thread(s) per rank, %d samples per rank per step (global batch "
      "%d on 1 rank, %d on 2 ranks), Gloo on loopback\n" % (t, b, b, 2 * b))
body = []
for impl, name in (("hyperpack", "hyperpack"), ("pytorch", "pytorch DDP")):
    for m in models:
        body.append([name, m, cell(impl, m, 1), cell(impl, m, 2),
                     ratio(rate(impl, m, 2), rate(impl, m, 1))])
table(["implementation", "model", "1 rank samples/s", "2 ranks samples/s", "2 ranks / 1 rank"],
      body)
print("\nhyperpack / pytorch with 2 ranks: " + ", ".join(
    "%s %s" % (m, ratio(rate("hyperpack", m, 2), rate("pytorch", m, 2))) for m in models))
print("\nCommands, in this order in every repeat (%s; WORLD_SIZE, RANK, MASTER_ADDR and "
      "MASTER_PORT unset):\n" % blas_note)
print("```")
print(open(commands).read().rstrip("\n"))
print("```")
EOF
exit "$failed"
