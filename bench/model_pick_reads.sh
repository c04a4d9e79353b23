#!/usr/bin/env bash
# What reading a rerun_top study's best costs: its best is a model's pick of every run, fitted at
# a read. Runs a study of 300 quick trials (a noisy 3-parameter bowl, `rerun_top: 5`), then for
# each hyperpack binary given: `status` and `best` once each, and the dashboard's page data and
# index JSON requested several times, as a page polls (after one request of the index).
#
#   bench/model_pick_reads.sh HYPERPACK [HYPERPACK...]
#
# Prints one row per binary and request, the seconds of each. Loopback only; the study lives in a
# temporary folder, removed at the end.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 HYPERPACK [HYPERPACK...]" >&2; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/t.sh" <<'EOF'
awk -v x="$1" -v y="$2" -v z="$3" -v t="$4" 'BEGIN { srand(t); printf "{\"loss\": %.6f}\n", (x-0.3)^2 + (y-0.6)^2 + z/10 + rand()/50 }'
EOF
cat > "$dir/s.yaml" <<EOF
name: r
objective: {metric: loss, direction: minimize}
search_space:
  x: {type: float, low: 0, high: 1}
  y: {type: float, low: 0, high: 1}
  z: {type: float, low: 0, high: 1}
trial: {command: "sh $dir/t.sh {x} {y} {z} {trial}"}
tuner: {algorithm: sobol, seed: 3}
budget: {max_trials: 300, max_parallel: 4, rerun_top: 5}
EOF
"$1" run "$dir/s.yaml" --storage "$dir/h.db" > "$dir/run.out"

seconds() { /usr/bin/time -f %e "$@" 2>&1 >/dev/null | tail -1; }
port=18430
for hp in "$@"; do
  port=$((port + 1))
  echo "$hp status  $(seconds "$hp" status r --storage "$dir/h.db")"
  echo "$hp best    $(seconds "$hp" best r --storage "$dir/h.db")"
  "$hp" dashboard --storage "$dir/h.db" --listen "127.0.0.1:$port" > "$dir/dash.log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
  for _ in 1 2 3 4 5; do
    echo "$hp page    $(curl -sf -o /dev/null -w '%{time_total}' "http://127.0.0.1:$port/api/study/r")"
  done
  for _ in 1 2 3; do
    echo "$hp index   $(curl -sf -o /dev/null -w '%{time_total}' "http://127.0.0.1:$port/api/studies")"
  done
  kill "$pid"
  wait "$pid" 2>/dev/null || true
done
