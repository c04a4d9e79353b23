#!/bin/sh
# hyperpack against the peer a user would pick, for real: the Fashion-MNIST MLP space of
# examples/fmnist/asha.yaml with the data-parallel degree fixed at 1, one thread per trial, two
# trials at a time, for the same wall-clock time. hyperpack runs the study file (GP tuner, ASHA in
# promote mode, hyperpack-trainer); Optuna 3.1 runs TPE with its Hyperband pruner on the same model
# in plain PyTorch (bench/optuna_fmnist.py). For each seed, hyperpack and then Optuna, one after the
# other on this machine. Prints, per seed and tool, the best validation accuracy any trial reported
# within the time, when 0.899 and 0.90 were first reported, the test accuracy of the best trial that
# trained all 27 epochs and of the trial each study names as its best (hyperpack: `hyperpack best`;
# Optuna: its best completed trial, the same one), trials started and epochs trained; then the
# medians and the ratios.
#
#   bench/peer_fmnist.sh [BUILD_DIR]      run from the repository root; BUILD_DIR: build
#   SEEDS="1 2 3" SECONDS_EACH=900 bench/peer_fmnist.sh
#   PRUNER='{algorithm: forecast, max_resource: 27}' bench/peer_fmnist.sh   hyperpack's pruner line
#                                         instead of the example's ASHA
#   RERUN_TOP=5 bench/peer_fmnist.sh      hyperpack's study with budget.rerun_top: 5, each trial's
#                                         trainer seeded by its number (--seed {trial}), so that a
#                                         re-run is another training, not the same one again
set -eu
build=${1:-build}
seeds=${SEEDS:-1 2 3}
seconds=${SECONDS_EACH:-900}
pruner=${PRUNER:-}
rerun_top=${RERUN_TOP:-}
python=/usr/bin/python3
here=$(dirname "$0")
work=$(mktemp -d)
# KEEP=1 keeps the studies' database and logs (the directory is printed at the end).
if [ -n "${KEEP:-}" ]; then trap 'echo "peer_fmnist.sh: kept $work" >&2' EXIT; else trap 'rm -rf "$work"' EXIT; fi
[ -x "$build/cli/hyperpack" ] && [ -x "$build/trainer/hyperpack-trainer" ] || {
  echo "peer_fmnist.sh: build hyperpack and hyperpack-trainer first:" \
    "cmake --build $build --target hyperpack hyperpack-trainer" >&2
  exit 1
}
"$python" -c 'import optuna, torch' 2>/dev/null || {
  echo "peer_fmnist.sh: $python needs optuna and torch (apt-get install python3-optuna python3-torch)" >&2
  exit 1
}
for seed in $seeds; do
  name="peer-$seed"
  sed -e "s/^name: .*/name: $name/" \
    -e '/^  data_parallel:/d' \
    -e 's/^resources: .*/resources: {cpus: 1}/' \
    -e "s|hyperpack-trainer --model mlp|$build/trainer/hyperpack-trainer --threads 1 --model mlp|" \
    -e "s/^tuner: .*/tuner: {seed: $seed}/" \
    -e "s/^budget: .*/budget: {max_trials: 100000, max_parallel: 2, time_limit: ${seconds}s}/" \
    examples/fmnist/asha.yaml >"$work/$name.yaml"
  if [ -n "$rerun_top" ]; then
    sed -i -e "s|^budget: {\(.*\)}|budget: {\1, rerun_top: $rerun_top}|" \
      -e "s|--epochs 27|--epochs 27 --seed {trial}|" "$work/$name.yaml"
  fi
  if [ -n "$pruner" ]; then
    sed -i "s|^pruner: .*|pruner: $pruner|" "$work/$name.yaml"
  fi
  echo "seed $seed: hyperpack ..." >&2
  date +%s.%N >"$work/$name.t0"
  # A short SECONDS_EACH may end before any trial completes, which `run` reports with exit 1.
  "$build/cli/hyperpack" run "$work/$name.yaml" --storage "$work/h.db" >"$work/$name.log" 2>&1 ||
    grep -q "time limit after" "$work/$name.log" || { cat "$work/$name.log" >&2; exit 1; }
  tail -2 "$work/$name.log" >&2
  "$build/cli/hyperpack" best "$name" --storage "$work/h.db" --json >"$work/$name.best.json" ||
    echo '{}' >"$work/$name.best.json"
  echo "seed $seed: optuna ..." >&2
  "$python" "$here/optuna_fmnist.py" --log-dir "$work/optuna-$seed" --seed "$seed" \
    --seconds "$seconds" --workers 2 --threads 1
done
"$python" - "$work" "$seconds" $seeds <<'PY'
import glob, json, os, sqlite3, statistics, sys
work, limit, seeds = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
targets = (0.899, 0.90)


def hyperpack_named(db, sid, seed):
    """The trial id `hyperpack best` names, or None."""
    number = json.load(open(os.path.join(work, "peer-%s.best.json" % seed))).get("trial")
    if number is None:
        return None
    row = db.execute("SELECT id FROM trials WHERE study_id = ? AND number = ?",
                     (sid, number)).fetchone()
    return row[0] if row else None


def hyperpack_rows(seed):
    """(t, trial, epoch, val_accuracy, test_accuracy or None) for every epoch reported, and the
    trial the study names."""
    t0 = float(open(os.path.join(work, "peer-%s.t0" % seed)).read())
    db = sqlite3.connect(os.path.join(work, "h.db"))
    sid = db.execute("SELECT id FROM studies WHERE name = ?", ("peer-" + seed,)).fetchone()[0]
    rows = {}
    for trial, name, value, t in db.execute(
            "SELECT t.id, m.name, m.value, m.time FROM metrics m JOIN trials t ON m.trial_id = t.id"
            " WHERE t.study_id = ? AND m.name IN ('epoch', 'val_accuracy', 'test_accuracy')",
            (sid,)):
        rows.setdefault((trial, t), {})[name] = value
    out = []
    for (trial, t), r in rows.items():
        if "val_accuracy" in r and "epoch" in r:
            out.append((t - t0, trial, int(r["epoch"]), r["val_accuracy"], r.get("test_accuracy")))
    return out, hyperpack_named(db, sid, seed)


def optuna_rows(seed):
    out = []
    for path in glob.glob(os.path.join(work, "optuna-%s" % seed, "worker-*.jsonl")):
        w = os.path.basename(path)
        for line in open(path):
            r = json.loads(line)
            out.append((r["t"], r["trial"], r["epoch"], r["val_accuracy"], r.get("test_accuracy")))
    return out, None  # Optuna's best trial is its best completed one: the best 27-epoch trial


def summary(rows, named):
    # The trial a study names may have ended after the limit (hyperpack lets the running trials
    # finish; Optuna's workers stop at it): its test accuracy is read wherever it ended, marked.
    late = [r for r in rows if r[1] == named and r[2] == 27 and r[4] is not None]
    rows = sorted(r for r in rows if r[0] <= limit)
    best = max((r[3] for r in rows), default=float("nan"))
    reached = [next((r[0] for r in rows if r[3] >= target), None) for target in targets]
    full = [r for r in rows if r[2] == 27 and r[4] is not None]
    test = max(full, key=lambda r: r[3])[4] if full else float("nan")
    named_late = False
    if named is not None:
        mine = [r[4] for r in full if r[1] == named]
        named_late = not mine and bool(late)
        named_test = mine[-1] if mine else late[-1][4] if late else float("nan")
    else:
        named_test = test
    return {"best": best, "reached": reached, "test": test, "named": named_test,
            "named_late": named_late,
            "trials": len({r[1] for r in rows}), "epochs": len(rows)}


def cell(t):
    return "%.0f s" % t if t is not None else "not reached"


print("| seed | tool | best val acc | first val acc >= 0.899 | first >= 0.90 | test acc of the best "
      "27-epoch trial | test acc of the trial named | trials | epochs |")
print("|---|---|---|---|---|---|---|---|---|")
results = {"hyperpack": [], "optuna": []}
for seed in seeds:
    for tool, rows in (("hyperpack", hyperpack_rows(seed)), ("optuna", optuna_rows(seed))):
        s = summary(*rows)
        results[tool].append(s)
        print("| %s | %s | %.4f | %s | %s | %.4f | %.4f%s | %d | %d |" % (
            seed, tool, s["best"], cell(s["reached"][0]), cell(s["reached"][1]), s["test"],
            s["named"], " (ended after the limit)" if s["named_late"] else "", s["trials"],
            s["epochs"]))


def median_time(ss, i):
    # A target not reached counts as the whole time limit, so that the median stays defined.
    return statistics.median(s["reached"][i] if s["reached"][i] is not None else limit for s in ss)


h, o = results["hyperpack"], results["optuna"]
wins = sum(a["best"] > b["best"] for a, b in zip(h, o))
print()
print("| median over %d seeds | best val acc | first >= 0.899 | first >= 0.90 | test acc | test acc "
      "named |" % len(h))
print("|---|---|---|---|---|---|")
for tool, ss in (("hyperpack", h), ("optuna", o)):
    print("| %s | %.4f | %.0f s | %.0f s | %.4f | %.4f |" % (
        tool, statistics.median(s["best"] for s in ss), median_time(ss, 0), median_time(ss, 1),
        statistics.median(s["test"] for s in ss), statistics.median(s["named"] for s in ss)))
print()
print("hyperpack's best is higher on %d of %d seeds; time to 0.90, optuna / hyperpack: %.2f "
      "(median; a target not reached counts as %.0f s)" % (
          wins, len(h), median_time(o, 1) / median_time(h, 1), limit))
PY
