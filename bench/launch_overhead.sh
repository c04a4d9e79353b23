#!/usr/bin/env bash
# From a placement decision to the trial's process running, on this machine: a study of N trials
# whose command reports, as its objective, the wall-clock time at which it started; the runner
# records the time it placed the trial. The difference is the overhead: the trial's row committed
# to SQLite, the environment built, fork and exec of /bin/sh, and date.
#
#   bench/launch_overhead.sh [HYPERPACK] [N]     (default build/cli/hyperpack, 50 trials)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
hyperpack="${1:-$root/build/cli/hyperpack}"
trials="${2:-50}"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
cat > "$dir/study.yaml" <<YAML
name: overhead
objective: {metric: started, direction: minimize}
search_space: {x: {type: float, low: 0, high: 1}}
trial: {command: 'echo "{{\"started\": \$(date +%s.%N)}}"'}
tuner: {algorithm: random, seed: 1}
budget: {max_trials: $trials, max_parallel: 1}
YAML
"$hyperpack" run "$dir/study.yaml" --storage "$dir/h.db" --progress quiet > /dev/null
"$hyperpack" trials overhead --storage "$dir/h.db" --json | /usr/bin/python3 -c '
import json, statistics, sys
t = json.load(sys.stdin)
ms = sorted(1000 * (r["value"] - r["started"]) for r in t if r["value"] is not None)
print(f"{len(ms)} trials, placement to process running (ms): median {statistics.median(ms):.2f}, "
      f"p90 {ms[int(0.9 * (len(ms) - 1))]:.2f}, min {ms[0]:.2f}, max {ms[-1]:.2f}")
'
