#!/usr/bin/env bash
# Simple regret of hyperpack's tuners and Optuna's samplers side by side, as one markdown table.
#
#   bench/regret.sh [TUNER_REGRET] [--seeds N] [--evals N] [--functions a,b,...]
#                   [--algorithms "gp random"] [--batches "1"] [--optuna "tpe random"]
#
# TUNER_REGRET is the built tuner_regret (default: build/bench/tuner_regret under the repository).
# Each hyperpack algorithm runs once per batch size; Optuna's samplers run sequentially (batch 1)
# with /usr/bin/python3 bench/optuna_regret.py; --optuna "" leaves Optuna out. Rows are function x
# checkpoint (25, 50, 100 evaluations, and the budget), columns implementations, cells
# "median [q1, q3]" of the simple regret over seeds 0 .. N-1; a second table gives the mean time of
# one proposal. Progress goes to stderr. A run that fails (an algorithm that MakeTuner does not
# know, say) is reported and left out of the table, and the exit status is then 1.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
python=/usr/bin/python3

binary="$root/build/bench/tuner_regret"
seeds=20
evals=100
functions=""
algorithms="gp random"
batches="1"
samplers="tpe random"

usage() { sed -n '4,5p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
need() { [[ $# -ge 2 ]] || { echo "regret.sh: $1 needs a value" >&2; exit 2; }; }

if [[ $# -gt 0 && "$1" != -* ]]; then
  binary="$1"
  shift
fi
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seeds) need "$@"; seeds="$2"; shift 2 ;;
    --evals) need "$@"; evals="$2"; shift 2 ;;
    --functions) need "$@"; functions="$2"; shift 2 ;;
    --algorithms) need "$@"; algorithms="$2"; shift 2 ;;
    --batches | --batch) need "$@"; batches="$2"; shift 2 ;;
    --optuna) need "$@"; samplers="$2"; shift 2 ;;
    -h | --help) usage ;;
    *) echo "regret.sh: unknown argument '$1'" >&2; usage ;;
  esac
done

if [[ ! -x "$binary" ]]; then
  echo "regret.sh: $binary is not an executable; build it (make tuner_regret) or give its path" >&2
  exit 2
fi
if [[ -n "$samplers" && ! -x "$python" ]]; then
  echo "regret.sh: $python is missing; install python3-optuna or pass --optuna \"\"" >&2
  exit 2
fi

common=(--seeds "$seeds" --evals "$evals")
[[ -n "$functions" ]] && common+=(--functions "$functions")

results="$(mktemp)"
trap 'rm -f "$results"' EXIT
failed=0

for algorithm in $algorithms; do
  for batch in $batches; do
    echo "regret.sh: hyperpack-$algorithm, batch $batch" >&2
    if ! "$binary" --algorithm "$algorithm" --batch "$batch" "${common[@]}" --json >>"$results"; then
      echo "regret.sh: hyperpack-$algorithm (batch $batch) failed; left out of the table" >&2
      failed=1
    fi
  done
done
for sampler in $samplers; do
  echo "regret.sh: optuna-$sampler, batch 1" >&2
  if ! "$python" "$here/optuna_regret.py" --sampler "$sampler" "${common[@]}" --json >>"$results"; then
    echo "regret.sh: optuna-$sampler failed; left out of the table" >&2
    failed=1
  fi
done

"$python" - "$results" "$seeds" "$evals" <<'EOF'
import json
import sys

path, seeds, evals = sys.argv[1], sys.argv[2], sys.argv[3]
rows = [json.loads(line) for line in open(path) if line.strip()]
if not rows:
    sys.exit("regret.sh: no results")


def num(x):
    """Three significant digits, without an exponent for numbers a table reads at a glance."""
    return "%.0f" % x if 1e3 <= abs(x) < 1e6 else "%.3g" % x


def column(r):
    return r["impl"] if r["batch"] == 1 else "%s (batch %d)" % (r["impl"], r["batch"])


columns, functions, cells, times = [], [], {}, {}
for r in rows:
    c = column(r)
    if c not in columns:
        columns.append(c)
    if r["function"] not in functions:
        functions.append(r["function"])
    cells[(r["function"], r["evals"], c)] = "%s [%s, %s]" % (num(r["median"]), num(r["q1"]),
                                                             num(r["q3"]))
    times[(r["function"], c)] = "%.3g" % (r["propose_mean_s"] * 1e3)
checkpoints = {f: sorted({r["evals"] for r in rows if r["function"] == f}) for f in functions}


def table(header, body):
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join(["---"] * len(header)) + "|")
    for line in body:
        print("| " + " | ".join(line) + " |")


print("Simple regret (best so far - global minimum), median [q1, q3] over %s seeds, budget %s "
      "evaluations\n" % (seeds, evals))
table(["function", "evals"] + columns,
      [[f, str(e)] + [cells.get((f, e, c), "-") for c in columns]
       for f in functions for e in checkpoints[f]])
print("\nMean time of one proposal, ms (hyperpack: Propose; Optuna: ask + suggest_*)\n")
table(["function"] + columns, [[f] + [times.get((f, c), "-") for c in columns] for f in functions])
EOF
exit "$failed"
