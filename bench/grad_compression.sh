#!/usr/bin/env bash
# Accuracy and speed of gradient compression with 2 ranks: hyperpack-trainer's --grad-compression
# against PyTorch DDP's compress hooks (bench/pytorch_fmnist.py), as markdown tables.
#
#   bench/grad_compression.sh [TRAINER] [--seeds 3] [--epochs 3] [--train-samples 20000]
#                             [--models "mlp cnn"] [--batch-size 128] [--threads 1]
#                             [--lr 0.01] [--blas-threads N]
#
# TRAINER is the built hyperpack-trainer (default: build/trainer/hyperpack-trainer under the
# repository). For each seed 1..S and each model it runs, alternately (A B A B ...), with
# --nproc 2 --batch-size B (the global batch: B/2 samples per rank per step) --threads T:
#   hyperpack none, PyTorch none, hyperpack fp16, PyTorch fp16, hyperpack bf16, PyTorch bf16.
#   hyperpack int8 (PyTorch 1.13 has no int8 path on a CPU: its quantization hooks call .cuda()).
# hyperpack-trainer --grad-compression fp16|bf16 sends each bucket in that type (an all-to-all of
# chunks) and sums it in fp32 (then an all-gather); int8 sends 8-bit integers with a scale per block
# of up to 256 and carries what rounding lost to the next step (error feedback); PyTorch's
# fp16_compress_hook /
# bf16_compress_hook cast the bucket, divide it by the ranks and all-reduce it in fp16 / bf16, so
# the sum itself is taken in half precision. PyTorch 1.13 refuses bf16 on Gloo (pytorch_fmnist.py
# exits 2 before starting any rank): that row is then reported as not available and not retried.
# Both train in fp32 (the trainer's default --precision, so no loss scaling) on Gloo over loopback.
# Tables, one per model: median [min, max] over the seeds of the final test accuracy, of the final
# val accuracy and of samples/s (the last epoch's metric line: optimizer steps x global batch /
# seconds of its training loop), and the median test accuracy minus that of the same
# implementation's `none` row. Bytes: what the loopback interface carried during each run
# (/proc/net/dev, both ranks and their rendezvous; other traffic on loopback counts too) per
# optimizer step, and hyperpack-trainer's own count of what a rank sends (sent_bytes_per_step). The commands are printed exactly as they ran. Progress goes to
# stderr. A run that fails is reported and left out, and the exit status is 1.
#
# Threads: as in bench/trainer_throughput.sh, every run is given OPENBLAS_NUM_THREADS (default:
# the value of --threads; --blas-threads 0 leaves the environment as it is), since a pthreads
# OpenBLAS ignores torch.set_num_threads and two ranks would otherwise oversubscribe the cores.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
python=/usr/bin/python3

trainer="$root/build/trainer/hyperpack-trainer"
seeds=3
epochs=3
train_samples=20000
models="mlp cnn"
batch=128
threads=1
blas_threads=""
lr=0.01
ranks=2

usage() { sed -n '5,7p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
need() { [[ $# -ge 2 ]] || { echo "grad_compression.sh: $1 needs a value" >&2; exit 2; }; }

if [[ $# -gt 0 && "$1" != -* ]]; then
  trainer="$1"
  shift
fi
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seeds) need "$@"; seeds="$2"; shift 2 ;;
    --epochs) need "$@"; epochs="$2"; shift 2 ;;
    --train-samples) need "$@"; train_samples="$2"; shift 2 ;;
    --models) need "$@"; models="$2"; shift 2 ;;
    --batch-size) need "$@"; batch="$2"; shift 2 ;;
    --threads) need "$@"; threads="$2"; shift 2 ;;
    --lr) need "$@"; lr="$2"; shift 2 ;;
    --blas-threads) need "$@"; blas_threads="$2"; shift 2 ;;
    -h | --help) usage ;;
    *) echo "grad_compression.sh: unknown argument '$1'" >&2; usage ;;
  esac
done
blas_threads="${blas_threads:-$threads}"
if ! [[ "$blas_threads" =~ ^[0-9]+$ ]]; then
  echo "grad_compression.sh: --blas-threads must be an integer >= 0 (got '$blas_threads')" >&2
  exit 2
fi
for pair in "seeds:$seeds" "epochs:$epochs" "train-samples:$train_samples" \
            "batch-size:$batch" "threads:$threads"; do
  if ! [[ "${pair#*:}" =~ ^[1-9][0-9]*$ ]]; then
    echo "grad_compression.sh: --${pair%%:*} must be a positive integer (got '${pair#*:}')" >&2
    exit 2
  fi
done
if ! [[ "$lr" =~ ^[0-9]*\.?[0-9]+([eE]-?[0-9]+)?$ ]]; then
  echo "grad_compression.sh: --lr must be a positive number (got '$lr')" >&2
  exit 2
fi
if ((batch % ranks != 0)); then
  echo "grad_compression.sh: --batch-size is the global batch of $ranks ranks and must be a" \
       "multiple of $ranks (got $batch)" >&2
  exit 2
fi
if ((batch > train_samples)); then
  echo "grad_compression.sh: --batch-size $batch is larger than --train-samples" \
       "$train_samples" >&2
  exit 2
fi
if [[ -z "${models// /}" ]]; then
  echo "grad_compression.sh: --models is empty; give mlp, cnn or both" >&2
  exit 2
fi
for model in $models; do
  [[ "$model" == mlp || "$model" == cnn ]] ||
    { echo "grad_compression.sh: --models: '$model' is not mlp or cnn" >&2; exit 2; }
done
if [[ ! -x "$trainer" ]]; then
  echo "grad_compression.sh: $trainer is not an executable; build it" \
       "(cmake --build build --target hyperpack-trainer) or give its path" >&2
  exit 2
fi
if [[ ! -x "$python" ]]; then
  echo "grad_compression.sh: $python is missing; install python3-torch" >&2
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
results="$work/results.tsv"  # impl, model, compression, seed, the last epoch's metric line
commands="$work/commands.txt"
unavailable="$work/unavailable.tsv"  # impl, compression, why
: >"$results"
: >"$commands"
: >"$unavailable"
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
  local impl="$1" model="$2" compression="$3" seed="$4"
  local common=(--batch-size "$batch" --threads "$threads" --epochs "$epochs"
                --train-samples "$train_samples" --lr "$lr" --seed "$seed"
                --nproc "$ranks" --grad-compression "$compression")
  if [[ "$impl" == hyperpack ]]; then
    cmd=("$trainer" --model "$model")
    if [[ "$model" == mlp ]]; then
      cmd+=(--mlp-widths "256,128")
    else
      cmd+=(--cnn-channels "32,64")
    fi
    cmd+=("${common[@]}")
  else
    cmd=("$python" "$here/pytorch_fmnist.py" --model "$model" "${common[@]}")
  fi
}

# Bytes the loopback interface has sent since boot (/proc/net/dev: the 9th field after 'lo:').
loopback_bytes() {
  awk -F'[: ]+' '$2 == "lo" { print $11 }' /proc/net/dev
}
[[ "$(loopback_bytes)" =~ ^[0-9]+$ ]] ||
  { echo "grad_compression.sh: no 'lo' interface in /proc/net/dev" >&2; exit 2; }

# What the commands run with, for the printed form.
env_words=()
if [[ -n "${OPENBLAS_NUM_THREADS:-}" ]]; then
  env_words=("OPENBLAS_NUM_THREADS=$OPENBLAS_NUM_THREADS")
fi

pytorch_bf16=1  # cleared when pytorch_fmnist.py refuses bf16 (exit 2)
start_s=$SECONDS
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
for ((seed = 1; seed <= seeds; ++seed)); do
  for model in $models; do
    for compression in none fp16 bf16 int8; do
      for impl in hyperpack pytorch; do
        if [[ "$impl" == pytorch && "$compression" == bf16 && $pytorch_bf16 -eq 0 ]]; then
          continue
        fi
        [[ "$impl" == pytorch && "$compression" == int8 ]] && continue
        command_for "$impl" "$model" "$compression" "$seed"
        line="$(shell_words "${env_words[@]}" "${cmd[@]}")"
        if [[ $seed -eq 1 ]]; then echo "$line" >>"$commands"; fi
        echo "grad_compression.sh: seed $seed/$seeds: $impl $model, compression $compression" \
             "($((SECONDS - start_s)) s so far)" >&2
        out="$work/out.txt"
        status=0
        lo_before="$(loopback_bytes)"
        "${cmd[@]}" >"$out" 2>"$work/err.txt" || status=$?
        lo_after="$(loopback_bytes)"
        if [[ $status -eq 2 && "$impl" == pytorch && "$compression" == bf16 ]]; then
          why="$(grep -m 1 'grad-compression bf16' "$work/err.txt" || true)"
          if [[ -n "$why" ]]; then
            echo "grad_compression.sh: PyTorch bf16 is not available, left out: ${why#*: }" >&2
            printf '%s\t%s\t%s\n' "$impl" "$compression" "${why#*: }" >>"$unavailable"
            pytorch_bf16=0
            continue
          fi
        fi
        if [[ $status -ne 0 ]]; then
          echo "grad_compression.sh: failed (exit $status): $line" >&2
          tail -n 5 "$work/err.txt" >&2
          failed=1
          continue
        fi
        metrics="$(grep '"test_accuracy"' "$out" | tail -n 1 || true)"
        if [[ -z "$metrics" ]]; then
          echo "grad_compression.sh: no final metric line (test_accuracy) from: $line" >&2
          failed=1
          continue
        fi
        printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$impl" "$model" "$compression" "$seed" \
          "$((lo_after - lo_before))" "$metrics" >>"$results"
      done
    done
  done
done
load_after="$(cut -d' ' -f1-3 /proc/loadavg)"
echo "grad_compression.sh: done in $((SECONDS - start_s)) s" >&2

torch_version="$("$python" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo '?')"
"$python" - "$results" "$commands" "$unavailable" "$seeds" "$epochs" "$train_samples" "$batch" \
  "$threads" "$models" "$torch_version" "$load_before" "$load_after" "$(nproc)" "$blas_note" \
  "$ranks" <<'EOF'
import json
import statistics
import sys

(path, commands, unavailable, seeds, epochs, samples, batch, threads, models, torch_version,
 load_before, load_after, cores, blas_note, ranks) = sys.argv[1:]
runs = {}
for row in open(path):
    impl, model, compression, seed, lo_bytes, metrics = row.rstrip("\n").split("\t", 5)
    line = json.loads(metrics)
    if line.get("step"):
        line["lo_kb_per_step"] = int(lo_bytes) / 1000 / line["step"]
    if "sent_bytes_per_step" in line:
        line["sent_kb_per_step"] = line["sent_bytes_per_step"] / 1000
    runs.setdefault((impl, model, compression), []).append(line)
missing = {}
for row in open(unavailable):
    impl, compression, why = row.rstrip("\n").split("\t", 2)
    missing[(impl, compression)] = why
models = models.split()
COMPRESSIONS = ("none", "fp16", "bf16", "int8")
missing[("pytorch", "int8")] = ("PyTorch %s has no int8 gradient path on a CPU (its DDP "
                                "quantization hooks call .cuda())" % torch_version)
NAMES = {"hyperpack": "hyperpack", "pytorch": "pytorch DDP"}


def values(impl, model, compression, key):
    found = [m.get(key) for m in runs.get((impl, model, compression), [])]
    return [v for v in found if v is not None]


def median(impl, model, compression, key):
    found = values(impl, model, compression, key)
    return statistics.median(found) if found else None


def cell(impl, model, compression, key, form):
    found = values(impl, model, compression, key)
    if not found:
        return "-"
    if len(found) == 1:
        return form % found[0]
    return (form + " [" + form + ", " + form + "]") % (statistics.median(found), min(found),
                                                       max(found))


def delta(impl, model, compression):
    here = median(impl, model, compression, "test_accuracy")
    base = median(impl, model, "none", "test_accuracy")
    if here is None or base is None:
        return "-"
    return "%+.4f" % (here - base)


def table(header, body):
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join(["---"] * len(header)) + "|")
    for line in body:
        print("| " + " | ".join(line) + " |")


b, r = int(batch), int(ranks)
print("Gradient compression with %d ranks (Gloo on loopback): hyperpack-trainer --grad-compression "
      "(fp16 / bf16 / int8 with error feedback on the wire, summed in fp32) vs PyTorch %s DDP's "
      "fp16_compress_hook / "
      "bf16_compress_hook (summed in fp16 / bf16), bench/pytorch_fmnist.py. Fashion-MNIST: %s "
      "epoch(s) of %s training samples, global batch %d (%d per rank), %s thread(s) per rank (%s), "
      "fp32 training; median [min, max] over seeds 1..%s, runs taken alternately (A B A B). "
      "samples/s is the last epoch's training loop. %s cores; load average %s before, %s after."
      % (r, torch_version, epochs, samples, b, b // r, threads, blas_note, seeds, cores,
         load_before, load_after))
for m in models:
    print("\n%s\n" % ("MLP 784-256-128-10" if m == "mlp" else "CNN 32-64"))
    body = []
    for impl in ("hyperpack", "pytorch"):
        for c in COMPRESSIONS:
            if (impl, c) in missing:
                body.append([NAMES[impl], c, "not available", "-", "-", "-", "-", "-"])
                continue
            body.append([NAMES[impl], c, cell(impl, m, c, "test_accuracy", "%.4f"),
                         cell(impl, m, c, "val_accuracy", "%.4f"),
                         cell(impl, m, c, "samples_per_s", "%.0f"),
                         "" if c == "none" else delta(impl, m, c),
                         cell(impl, m, c, "lo_kb_per_step", "%.1f"),
                         cell(impl, m, c, "sent_kb_per_step", "%.1f")])
    table(["implementation", "compression", "test accuracy", "val accuracy", "samples/s",
           "test accuracy - none", "loopback KB/step", "sent KB/step (rank 0's count)"], body)
for (impl, c), why in sorted(missing.items()):
    print("\n%s %s not available: %s" % (NAMES[impl], c, why))
print("\nCommands of seed 1, in this order for every seed (--seed S for seed S; %s; WORLD_SIZE, "
      "RANK, MASTER_ADDR and MASTER_PORT unset):\n" % blas_note)
print("```")
print(open(commands).read().rstrip("\n"))
print("```")
EOF
exit "$failed"
