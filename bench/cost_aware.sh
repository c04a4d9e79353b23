#!/bin/sh
# Cost-aware proposals for real: the quickstart's Fashion-MNIST space (examples/fmnist/quickstart.yaml)
# with precision {fp32, bf16} put back (the same accuracy; on a CPU without bf16 instructions about
# 10x the time, on one with them less), run by the GP tuner with and without `cost_aware`, under the
# same wall-clock budget,
# for each seed one after the other on this machine. Prints, per seed and method, the best
# validation accuracy of a completed trial, the time until a trial first came within 0.5% of the
# best value either method reached on that seed, the trials completed and how many were bf16;
# then the medians over seeds, and how far the cost model's leave-one-out predictions of the
# trials' costs were from what they cost (`hyperpack trials --json`: sd of log(actual/predicted)).
#
#   bench/cost_aware.sh [BUILD_DIR]    run from the repository root; BUILD_DIR: build
#   SEEDS="1 2 3" LIMIT=120s bench/cost_aware.sh
set -eu
build=${1:-build}
seeds=${SEEDS:-1 2 3}
limit=${LIMIT:-120s}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
[ -x "$build/cli/hyperpack" ] && [ -x "$build/trainer/hyperpack-trainer" ] || {
  echo "cost_aware.sh: build hyperpack and hyperpack-trainer first:" \
    "cmake --build $build --target hyperpack hyperpack-trainer" >&2
  exit 1
}
for seed in $seeds; do
  for aware in true false; do
    name="cost-$aware-$seed"
    sed -e "s/^name: .*/name: $name/" \
      -e 's/^  precision: .*/  precision:         {type: categorical, values: [fp32, bf16]}/' \
      -e "s/^tuner: .*/tuner: {seed: $seed, cost_aware: $aware}/" \
      -e "s/^budget: .*/budget: {max_trials: 1000, max_parallel: 2, time_limit: $limit}/" \
      -e "s|hyperpack-trainer --model|$build/trainer/hyperpack-trainer --model|" \
      examples/fmnist/quickstart.yaml >"$work/$name.yaml"
    echo "running $name ..." >&2
    "$build/cli/hyperpack" run "$work/$name.yaml" --storage "$work/h.db" >"$work/$name.log" 2>&1 ||
      { cat "$work/$name.log" >&2; exit 1; }
    tail -2 "$work/$name.log" >&2
    "$build/cli/hyperpack" trials "$name" --storage "$work/h.db" --json >"$work/$name.json"
  done
done
/usr/bin/python3 - "$work/h.db" "$work" $seeds <<'PY'
import json, math, sqlite3, statistics, sys
db = sqlite3.connect(sys.argv[1])
work = sys.argv[2]
seeds = sys.argv[3:]

def run(name):
    sid = db.execute("SELECT id FROM studies WHERE name = ?", (name,)).fetchone()[0]
    t0 = db.execute("SELECT min(time) FROM events WHERE study_id = ? AND kind = 'run_started'",
                    (sid,)).fetchone()[0]
    rows = db.execute("SELECT value, ended, params FROM trials WHERE study_id = ? AND "
                      "state = 'completed' ORDER BY ended", (sid,)).fetchall()
    return [(v, e - t0, '"bf16"' in p) for v, e, p in rows]

print("| seed | method | best val acc | time to within 0.5% of the seed's best | trials completed "
      "| of them bf16 |")
print("|---|---|---|---|---|---|")
best_of, time_of = {True: [], False: []}, {True: [], False: []}
for seed in seeds:
    runs = {aware: run(f"cost-{str(aware).lower()}-{seed}") for aware in (True, False)}
    top = max(v for r in runs.values() for v, _, _ in r)
    for aware in (True, False):
        r = runs[aware]
        best = max(v for v, _, _ in r)
        reached = [t for v, t, _ in r if v >= top * 0.995]
        t = min(reached) if reached else float("inf")
        best_of[aware].append(best)
        time_of[aware].append(t)
        label = "cost-aware GP" if aware else "GP"
        print(f"| {seed} | {label} | {best:.4f} | " +
              (f"{t:.0f} s" if reached else "not reached") +
              f" | {len(r)} | {sum(b for _, _, b in r)} |")
med = {a: statistics.median(time_of[a]) for a in (True, False)}
print()
print(f"median best: cost-aware {statistics.median(best_of[True]):.4f}, "
      f"GP {statistics.median(best_of[False]):.4f}; median time to within 0.5%: cost-aware "
      f"{med[True]:.0f} s, GP {med[False]:.0f} s ({med[False] / med[True]:.2f}x)")
errors = []
for seed in seeds:
    for aware in ("true", "false"):
        with open(f"{work}/cost-{aware}-{seed}.json") as f:
            rows = json.load(f)
        rows = rows.get("trials", rows) if isinstance(rows, dict) else rows
        for t in rows:
            p = t.get("predicted_cost")
            if p and t.get("cost"):
                errors.append(math.log(t["cost"] / p["median"]))
if errors:
    rms = math.sqrt(sum(e * e for e in errors) / len(errors))
    print(f"cost model, leave-one-out over {len(errors)} completed trials: rms of "
          f"log(actual / predicted) {rms:.3f}, median |error| "
          f"{statistics.median(abs(e) for e in errors):.3f}")
PY
