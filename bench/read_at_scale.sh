#!/bin/bash
# The read commands on a study of many trials: how long `status`, `best`, `status --watch` (one
# frame) and `trials` take on each backend, and, given a second hyperpack, the same commands with
# it side by side (the same database, the same run).
#
#   bench/read_at_scale.sh [--hyperpack PATH] [--baseline PATH] [--trials N] [--running N]
#                          [--points N] [--repeats N] [--backend sqlite|postgresql|both]
#
# The study is written by build/bench/big_study (N trials, the last --running of them running
# with --points metric points each). Each command runs --repeats times; the table shows the median
# wall time, and the baseline's with the ratio where one is given. Defaults: build/cli/hyperpack,
# 100,000 trials, 8 running with 100,000 points each, 5 repeats, both backends (PostgreSQL only
# where postgresql-15 is installed). Needs /usr/bin/python3 (standard library only).
set -uo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
hyperpack="$root/build/cli/hyperpack"
baseline=""
big_study="$root/build/bench/big_study"
trials=100000
running=8
points=100000
repeats=5
backends="both"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --hyperpack) hyperpack="$2"; shift 2 ;;
    --baseline) baseline="$2"; shift 2 ;;
    --trials) trials="$2"; shift 2 ;;
    --running) running="$2"; shift 2 ;;
    --points) points="$2"; shift 2 ;;
    --repeats) repeats="$2"; shift 2 ;;
    --backend) backends="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "read_at_scale.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for b in "$hyperpack" "$big_study" ${baseline:+"$baseline"}; do
  [[ -x "$b" ]] || { echo "read_at_scale.sh: no program at $b (build it first)" >&2; exit 2; }
done
case "$backends" in
  both) backends="sqlite postgresql" ;;
  sqlite|postgresql) ;;
  *) echo "read_at_scale.sh: --backend must be sqlite, postgresql or both" >&2; exit 2 ;;
esac
python=/usr/bin/python3
[[ -x "$python" ]] || python=python3
dir="$(mktemp -d /tmp/hyperpack-scale.XXXXXX)"
source "$root/bench/local_postgres.sh"
trap 'stop_postgres; rm -rf "$dir"' EXIT
cd "$dir" || exit 2

commands=("status" "status big" "status big --json" "best big" "best big --within 1%"
          "status big --watch" "trials big")
results="$dir/results.tsv"
for backend in $backends; do
  if [[ "$backend" == postgresql ]]; then
    [[ -x "$pg_bin/initdb" ]] || { echo "read_at_scale.sh: no postgresql-15; skipping it" >&2; continue; }
    start_postgres
  else
    db="$dir/big.db"
  fi
  echo "writing $trials trials ($running running, $points points each) to $backend..." >&2
  "$big_study" --storage "$db" --trials "$trials" --running "$running" --points "$points" >&2 ||
    exit 1
  for c in "${commands[@]}"; do
    for who in hyperpack ${baseline:+baseline}; do
      bin="$hyperpack"; [[ "$who" == baseline ]] && bin="$baseline"
      for ((i = 0; i < repeats; i++)); do
        # shellcheck disable=SC2086  # the command's words
        t="$("$python" -c 'import subprocess, sys, time
s = time.monotonic(); r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)
print(f"{time.monotonic() - s:.4f}" if r.returncode == 0 else "fail")' "$bin" $c --storage "$db")"
        printf '%s\t%s\t%s\t%s\n' "$backend" "$c" "$who" "$t" >> "$results"
      done
    done
  done
  [[ "$backend" == postgresql ]] && stop_postgres
done

"$python" - "$results" "$trials" <<'PY'
import collections, json, statistics, sys
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    backend, command, who, t = line.rstrip("\n").split("\t")
    rows[(backend, command, who)].append(t)
def median(ts):
    return None if "fail" in ts else statistics.median(float(t) for t in ts)
keys = list(dict.fromkeys((b, c) for b, c, _ in rows))
has_base = any(w == "baseline" for _, _, w in rows)
head = "| backend | command | hyperpack (median) |" + (" baseline | ratio |" if has_base else "")
print(head)
print("|" + "---|" * (head.count("|") - 1))
out = []
for b, c in keys:
    new, base = median(rows[(b, c, "hyperpack")]), median(rows.get((b, c, "baseline"), []) or ["fail"])
    cells = [b, f"`{c}`", "failed" if new is None else f"{new:.3f} s"]
    if has_base:
        cells += ["failed" if base is None else f"{base:.3f} s",
                  f"{base / new:.1f}x" if new and base else "-"]
    print("| " + " | ".join(cells) + " |")
    out.append({"backend": b, "command": c, "seconds": new, "baseline_seconds": base if has_base else None})
print(json.dumps({"trials": int(sys.argv[2]), "results": out}))
PY
