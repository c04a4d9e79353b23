#!/bin/sh
# Warm trials, for real: the Fashion-MNIST study examples/fmnist/asha.yaml (hyperpack-trainer's MLP,
# GP tuner, ASHA in promote mode, 27 trials, 2 at a time) run three ways, one after the other, for
# each seed:
#   restarted  `pruner.in_place: false`, `trial.warm: false`: every run of a trial is a new process
#              (libtorch, the data and the model loaded again), every promotion a restart;
#   in place   `trial.warm: false`: a trial promoted at the rung it has just reached trains on in
#              the same process; every new trial is still a new process;
#   warm       the defaults: promotions in place, and one warm hyperpack-trainer per slot runs
#              trial after trial with libtorch and the data loaded once.
# Prints per run: the wall time, the processes started, the promotions and how many went on in
# place, the CPU-slot-seconds the trials held, the share of them outside the training loop
# (start-up, evaluation, checkpoints: the loop's own time is each epoch's optimizer steps x its
# step_time_ms, per slot), and the best test accuracy; then the medians.
#
#   bench/warm_promotions.sh [BUILD_DIR]     run from the repository root; BUILD_DIR: build
#   SEEDS="1 2 3" bench/warm_promotions.sh
set -eu
build=${1:-build}
seeds=${SEEDS:-1 2 3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
[ -x "$build/cli/hyperpack" ] && [ -x "$build/trainer/hyperpack-trainer" ] || {
  echo "warm_promotions.sh: build hyperpack and hyperpack-trainer first:" \
    "cmake --build $build --target hyperpack hyperpack-trainer" >&2
  exit 1
}
for seed in $seeds; do
  for arm in restarted in-place warm; do
    case $arm in
      restarted) in_place=false warm=false ;;
      in-place) in_place=true warm=false ;;
      warm) in_place=true warm=true ;;
    esac
    name="warm-$arm-$seed"
    sed -e "s/^name: .*/name: $name/" \
      -e "s/^tuner: .*/tuner: {seed: $seed}/" \
      -e "s/mode: promote}/mode: promote, in_place: $in_place}/" \
      -e "s|hyperpack-trainer --model|$build/trainer/hyperpack-trainer --model|" \
      -e "s/^  timeout: 30m/  timeout: 30m\\n  warm: $warm/" \
      examples/fmnist/asha.yaml >"$work/$name.yaml"
    grep -q "in_place: $in_place" "$work/$name.yaml"
    grep -q "warm: $warm" "$work/$name.yaml"
    echo "running $name ..." >&2
    "$build/cli/hyperpack" run "$work/$name.yaml" --storage "$work/h.db" >"$work/$name.log" 2>&1 ||
      { cat "$work/$name.log" >&2; exit 1; }
    tail -3 "$work/$name.log" >&2
  done
done
/usr/bin/python3 - "$work/h.db" $seeds <<'PY'
import json, re, sqlite3, statistics, sys
db = sqlite3.connect(sys.argv[1])
seeds = sys.argv[2:]


def measure(name):
    sid = db.execute("SELECT id FROM studies WHERE name = ?", (name,)).fetchone()[0]
    slots = {}
    for number, placement in db.execute(
            "SELECT number, placement FROM trials WHERE study_id = ?", (sid,)):
        slots[number] = sum(r.get("cpus", 0) for r in json.loads(placement or "[]")) or 1
    # Each run of a trial: from its start (or resume) to its pause (or end).
    opened, held, starts, first, last = {}, 0.0, 0, None, None
    in_place = promoted = 0
    for trial, t, kind, message in db.execute(
            "SELECT trial_number, time, kind, message FROM events WHERE study_id = ? ORDER BY id",
            (sid,)):
        if kind in ("trial_started", "trial_resumed"):
            opened[trial] = t
            starts += 1
            first = t if first is None else min(first, t)
        elif kind in ("trial_paused", "trial_finished") and trial in opened:
            held += (t - opened.pop(trial)) * slots.get(trial, 1)
            last = t if last is None else max(last, t)
        elif kind == "promoted":
            promoted += 1
            in_place += "in place" in message
    # The training loop's own time, per epoch: its optimizer steps x its mean step time.
    loop = 0.0
    for (number,) in db.execute("SELECT number FROM trials WHERE study_id = ?", (sid,)):
        # A metric's step is the trainer's optimizer step at that epoch's end.
        previous = 0
        for step, ms in db.execute(
                "SELECT m.step, m.value FROM metrics m JOIN trials t ON m.trial_id = t.id "
                "WHERE t.study_id = ? AND t.number = ? AND m.name = 'step_time_ms' ORDER BY m.step",
                (sid, number)):
            loop += (step - previous) * ms / 1000.0 * slots.get(number, 1)
            previous = step
    # Runs served by a warm trainer say so in their logs: processes are the runs that were not, and
    # the warm processes that served the rest.
    served, pids = 0, set()
    for (log_path,) in db.execute("SELECT log_path FROM trials WHERE study_id = ?", (sid,)):
        try:
            text = open(log_path, errors="replace").read()
        except OSError:
            continue
        for pid in re.findall(r"warm process ([0-9]+), trial [0-9]+ it serves", text):
            served += 1
            pids.add(pid)
    processes = starts - served + len(pids)
    best = db.execute("SELECT max(m.value) FROM metrics m JOIN trials t ON m.trial_id = t.id "
                      "WHERE t.study_id = ? AND m.name = 'test_accuracy'", (sid,)).fetchone()[0]
    return {"wall": last - first, "starts": processes, "promoted": promoted, "in_place": in_place,
            "held": held, "outside": 1 - loop / held if held > 0 else float("nan"),
            "best": best or float("nan")}


print("| seed | promotions | wall time | processes started | promoted (in place) | CPU-slot-s held "
      "| outside the training loop | best test acc |")
print("|---|---|---|---|---|---|---|---|")
arms = (("restarted", "restarted"), ("in-place", "in place"), ("warm", "in place + warm"))
results = {arm: [] for arm, _ in arms}
for seed in seeds:
    for arm, label in arms:
        m = measure("warm-%s-%s" % (arm, seed))
        results[arm].append(m)
        print("| %s | %s | %.0f s | %d | %d (%d) | %.0f | %.1f%% | %.4f |" % (
            seed, label, m["wall"], m["starts"], m["promoted"], m["in_place"], m["held"],
            100 * m["outside"], m["best"]))
print()
print("| median over %d seeds | wall time | processes started | CPU-slot-s held | outside the "
      "training loop |" % len(seeds))
print("|---|---|---|---|---|")
for arm, label in arms:
    ms = results[arm]
    print("| %s | %.0f s | %.0f | %.0f | %.1f%% |" % (
        label, statistics.median(m["wall"] for m in ms), statistics.median(m["starts"] for m in ms),
        statistics.median(m["held"] for m in ms), 100 * statistics.median(m["outside"] for m in ms)))
PY
