#!/usr/bin/env bash
# How long a lifecycle verb takes to be answered by a running study: a study whose one trial waits,
# asked N times `hyperpack update --max-trials` (a control the runner carries out and answers, and
# which changes nothing else), each at a random moment (0-0.5 s after the last answer, as a person or
# a script asks: not in step with the runner's polls) and timed from the command's start to its
# exit, on this machine's storage and, with a server and an agent on loopback, through --server.
# docs/guide/command-line.md promises an answer within a quarter of a second (the runner's poll
# interval) plus the command's own start.
#
#   bench/control_latency.sh [HYPERPACK] [N]     (default build/cli/hyperpack, 20 asks each)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
hyperpack="${1:-$root/build/cli/hyperpack}"
asks="${2:-20}"
dir="$(mktemp -d)"
pids=()
cleanup() { touch "$dir/go"; for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$dir"; }
trap cleanup EXIT
cat > "$dir/study.yaml" <<YAML
name: s
objective: {metric: loss, direction: minimize}
search_space: {x: {type: float, low: 0, high: 1}}
trial: {command: 'echo {trial} > $dir/started; while [ ! -e $dir/go ]; do sleep 0.05; done; echo loss={x}'}
tuner: {algorithm: random, seed: 1}
budget: {max_trials: 1, max_parallel: 1}
YAML

# Times `hyperpack update s --max-trials 1 TARGET...` $asks times; prints the median and p90 (ms).
measure() {
  local label="$1"; shift
  until [ -e "$dir/started" ]; do sleep 0.05; done
  /usr/bin/python3 - "$asks" "$hyperpack" "$@" <<'PY' | sed "s/^/$label: /"
import random, statistics, subprocess, sys, time
n, cli, target = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
ms = []
rng = random.Random(1)
for _ in range(n):
    time.sleep(rng.uniform(0, 0.5))
    t0 = time.monotonic()
    r = subprocess.run([cli, "update", "s", "--max-trials", "1", *target], capture_output=True)
    ms.append(1000 * (time.monotonic() - t0))
    assert r.returncode == 0, r.stderr
ms.sort()
print(f"{n} asks answered, ms: median {statistics.median(ms):.0f}, p90 {ms[int(0.9 * (n - 1))]:.0f}, "
      f"min {ms[0]:.0f}, max {ms[-1]:.0f}")
PY
  touch "$dir/go"
}

"$hyperpack" run "$dir/study.yaml" --storage "$dir/local.db" --progress quiet > /dev/null &
pids+=($!)
measure "this machine" --storage "$dir/local.db"
wait "${pids[0]}"
rm -f "$dir/go" "$dir/started"

printf '0123456789abcdef-bench-token\n' > "$dir/token"
chmod 600 "$dir/token"
"$hyperpack" serve --listen 127.0.0.1:0 --token-file "$dir/token" --storage "$dir/server.db" \
  > "$dir/serve.log" 2>&1 &
pids+=($!)
until grep -q 'listening on' "$dir/serve.log" 2>/dev/null; do sleep 0.05; done
address="$(sed -n 's/.*listening on //p' "$dir/serve.log" | head -1)"
"$hyperpack" agent --connect "$address" --token-file "$dir/token" --fake-gpus 0 > /dev/null 2>&1 &
pids+=($!)
"$hyperpack" run "$dir/study.yaml" --server "$address" --token-file "$dir/token" > /dev/null &
pids+=($!)
measure "through the server" --server "$address" --token-file "$dir/token"
