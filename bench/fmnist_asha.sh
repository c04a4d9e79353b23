#!/bin/sh
# Early stopping for real: the Fashion-MNIST study examples/fmnist/asha.yaml (hyperpack-trainer's
# MLP, GP tuner, ASHA in promote mode) against the same study without the pruner, one after the
# other on this machine. Prints, for each, the wall clock until a trial first reached a test
# accuracy (0.88, 0.89, 0.90), the best test accuracy, the epochs trained and the total time.
#
#   bench/fmnist_asha.sh [BUILD_DIR]        run from the repository root; BUILD_DIR: build
#   ORDER="full asha" bench/fmnist_asha.sh  which study runs first (default: full, then asha)
#   BUDGET="{max_trials: 300, max_parallel: 2, time_limit: 12m}" bench/fmnist_asha.sh
#                                           the same wall-clock budget for both, instead of the
#                                           example's 27 trials
set -eu
build=${1:-build}
order=${ORDER:-full asha}
budget=${BUDGET:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sed -e '/^pruner:/d' -e 's/^name: fmnist-asha/name: fmnist-full/' \
  -e "s|build/trainer/hyperpack-trainer|$build/trainer/hyperpack-trainer|" \
  examples/fmnist/asha.yaml >"$work/full.yaml"
sed -e "s|build/trainer/hyperpack-trainer|$build/trainer/hyperpack-trainer|" \
  examples/fmnist/asha.yaml >"$work/asha.yaml"
if [ -n "$budget" ]; then
  sed -i "s|^budget:.*|budget: $budget|" "$work/full.yaml" "$work/asha.yaml"
fi
grep '^budget:' "$work/asha.yaml"
for study in $order; do
  echo "running $study ..." >&2
  "$build/cli/hyperpack" run "$work/$study.yaml" --storage "$work/h.db" >"$work/$study.log" 2>&1 ||
    { cat "$work/$study.log" >&2; exit 1; }
  tail -3 "$work/$study.log" >&2
done
/usr/bin/python3 - "$work/h.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
targets = (0.88, 0.89, 0.90)
print("| study | " + " | ".join(f"time to test acc {t:.2f}" for t in targets) +
      " | best test acc | epochs trained | trials completed / pruned | total time |")
print("|---|" + "---|" * (len(targets) + 4))
for name, label in (("fmnist-full", "GP, no pruner"), ("fmnist-asha", "GP + ASHA (promote)")):
    sid = db.execute("SELECT id FROM studies WHERE name = ?", (name,)).fetchone()[0]
    t0 = db.execute("SELECT min(time) FROM events WHERE study_id = ? AND kind = 'run_started'",
                    (sid,)).fetchone()[0]
    t1 = db.execute("SELECT max(time) FROM events WHERE study_id = ? AND kind = 'run_stopped'",
                    (sid,)).fetchone()[0]
    def metric(sql, *args):
        return db.execute("SELECT " + sql + " FROM metrics m JOIN trials t ON m.trial_id = t.id "
                          "WHERE t.study_id = ? AND m.name = ?", (sid,) + args).fetchone()[0]
    cells = []
    for target in targets:
        t = db.execute("SELECT min(m.time) FROM metrics m JOIN trials t ON m.trial_id = t.id "
                       "WHERE t.study_id = ? AND m.name = 'test_accuracy' AND m.value >= ?",
                       (sid, target)).fetchone()[0]
        cells.append(f"{t - t0:.0f} s" if t is not None else "not reached")
    best = metric("max(m.value)", "test_accuracy")
    epochs = metric("count(*)", "val_accuracy")
    done = db.execute("SELECT sum(state = 'completed'), sum(state = 'pruned') FROM trials "
                      "WHERE study_id = ?", (sid,)).fetchone()
    print(f"| {label} | " + " | ".join(cells) + f" | {best:.4f} | {epochs} | {done[0]} / {done[1]}"
          f" | {t1 - t0:.0f} s |")
PY
