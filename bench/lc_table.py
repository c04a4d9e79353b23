#!/usr/bin/python3
"""Real learning curves for judging early stopping and multi-fidelity methods over many seeds.

A table per family: a few hundred configurations of one model on one data set, each trained epoch
by epoch to the full budget, with its validation error, its validation log loss and the seconds of
every epoch (training and validation, one thread, as a trial would spend them). A replay serves the
table in virtual time: a method that stops a configuration after e epochs is charged the first e
epochs' seconds and sees the first e values, so that twenty seeds of a study take minutes, not days,
and every method sees the same curves.

The models are scikit-learn's, trained one epoch per `partial_fit` call (one pass over the training
set in mini-batches), on data sets this Debian ships:
  mlp-sgd-fmnist   MLPClassifier, one hidden layer, SGD with Nesterov momentum, on Fashion-MNIST
                   (package dataset-fashion-mnist): 6,000 training images drawn from its training
                   set, 2,000 validation images from its test set, pixels scaled to [0, 1].
                   lr [1e-4, 1] log, batch_size [16, 512] log int, momentum [0.5, 0.99],
                   alpha (L2) [1e-6, 1e-1] log, hidden [16, 512] log int. 27 epochs.
  mlp-adam-digits  MLPClassifier, two hidden layers of `hidden`, Adam, on scikit-learn's digits
                   (1,797 8x8 images; 1,347 for training, 450 for validation, stratified, seed 0),
                   standardised. lr [1e-5, 1e-1] log, batch_size [8, 256] log int, beta_1 [0.5,
                   0.99], alpha [1e-6, 1] log, hidden [8, 256] log int. 27 epochs.
  mlp-adam-fmnist  MLPClassifier, two hidden layers of `hidden`, Adam, on the same Fashion-MNIST
                   subset. lr [1e-5, 1e-1] log, batch_size [16, 512] log int, beta_1 [0.5, 0.99],
                   alpha [1e-6, 1e-1] log, hidden [16, 256] log int. 27 epochs. Made after the
                   forecast pruner was written, as a family it was not chosen on.
  linear-sgd-fmnist SGDClassifier (logistic loss, elastic net) on the same Fashion-MNIST subset.
                   eta0 [1e-5, 1] log (constant step), alpha [1e-7, 1e-1] log, l1_ratio [0, 1],
                   average {0, 1} (Polyak averaging). 27 epochs.
And hyperpack-trainer's own models (libtorch), run as a study runs them: one process per
configuration, `--epochs 27` (so its learning-rate schedule spans the full run, as a trial's does),
one thread, its JSON line per epoch read as it arrives:
  trainer-mlp-fmnist  `--model mlp --mlp-widths W,W/2`, SGD with momentum, cosine schedule, on
                   Fashion-MNIST's training file: the first 6,000 images to train, its last 2,000 to
                   validate (`--train-samples 6000 --val-fraction 2000/60000`). lr [1e-3, 1] log,
                   batch_size [16, 512] log int, momentum [0.5, 0.99], weight_decay [1e-6, 1e-2]
                   log, width W [32, 512] log int. 27 epochs.
  trainer-cnn-fmnist  `--model cnn --cnn-channels C,2C`, the same optimiser and data but 3,000
                   images to train (a CNN epoch is dearer); lr [1e-3, 1] log, batch_size [16, 256]
                   log int, momentum [0.5, 0.99], weight_decay [1e-6, 1e-2] log, channels C [4, 32]
                   log int. 27 epochs; 128 configurations (`--configs 128`: 22 minutes on 2 cores).
The configurations are a scrambled Sobol sequence over the space (its log dimensions in log
space), seeded; each model's own random state is the configuration's index, so a table is
reproduced by its command. A diverged model (non-finite weights) is recorded from that epoch on as
a predictor of nothing: error 1 - 1/classes (10 classes: 0.9), log loss ln(classes).

Usage (PY=$(../shared/tools/sklearn-python)):
  $PY bench/lc_table.py make --family mlp-sgd-fmnist [--configs 256] [--seed 0] [--jobs 2]
                             [--epochs 27] [--trainer build/trainer/hyperpack-trainer]
                             --out bench/data/lc_mlp-sgd-fmnist.json
  $PY bench/lc_table.py show FILE.json [FILE.json ...]
`show` prints what a table holds: the best, median and worst final error, how often the best at
epoch 1, 3 and 9 is among the best at the end (Spearman's rank correlation with the final error),
and the seconds a full training of the average configuration takes.

A table holds one training of each configuration, and its final error is one draw: the model's
seed (its initial weights, the order of its mini-batches) moves it too. `repeats` trains a table's
best configurations again with other seeds (index + 1000 x offset; offset 0 is the table's own,
and says whether the table is reproduced), and `show-repeats` says how far the table's order among
them is theirs: the seed-to-seed deviation of a final error (pooled), Spearman's correlation of
the table's finals with the other seeds' means, and where the table's best lands by its mean (its
rank, and how much above the lowest mean):
  $PY bench/lc_table.py repeats bench/data/lc_mlp-sgd-fmnist.json [--top 24] [--offsets 0,1,2,3,4]
                                [--jobs 2] [--trainer ...] --out r_mlp-sgd-fmnist.json
  $PY bench/lc_table.py show-repeats r_*.json
`merge-repeats` puts the same configurations' runs with other seeds side by side in one file (the
seeds of a shipped file and more trained later):
  $PY bench/lc_table.py merge-repeats bench/data/lc_F.repeats.json r34.json --out merged.json
`repeats --curves` keeps each seed's whole error curve, not its final error alone: the replays'
fresh draws as whole other trainings (asha_bench and lc_optuna.py run --draw-curves), which
bench/data ships for two seeds besides the repeats' (offsets 7 and 8):
  $PY bench/lc_table.py repeats bench/data/lc_F.json --top 256 --offsets 7,8 --curves \
                                --out bench/data/lc_F.curves.json
A training is deterministic where it runs again on the same machine and libraries, not beyond:
mlp-adam-digits' offsets 1 and 2 trained again a day later gave the shipped final errors
for 212 of its 256 configurations (an Adam MLP on 450 validation digits turns on a rounding), so
merge-repeats refuses a seed trained again whose final errors differ, and the whole curves are
new seeds.
"""
import argparse
import gzip
import json
import math
import os
import sys
import time
import warnings

# One thread per worker: the recorded seconds are one core's, and two workers share two cores.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import numpy as np  # noqa: E402

FMNIST_DIR = "/usr/share/datasets/fashion-mnist"


def _idx(path):
    """An IDX file (gzipped) as a numpy array: the format Fashion-MNIST ships in."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 8:
        raise ValueError("%s: not an IDX file of unsigned bytes" % path)
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    body = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims)
    if body.size != int(np.prod(shape)):
        raise ValueError("%s: %d bytes for shape %s" % (path, body.size, shape))
    return body.reshape(shape)


def fmnist(train=6000, valid=2000, seed=0):
    """Fashion-MNIST subsets: `train` images of its training set, `valid` of its test set."""
    rng = np.random.default_rng(seed)
    xs = _idx(os.path.join(FMNIST_DIR, "train-images-idx3-ubyte.gz"))
    ys = _idx(os.path.join(FMNIST_DIR, "train-labels-idx1-ubyte.gz"))
    xt = _idx(os.path.join(FMNIST_DIR, "t10k-images-idx3-ubyte.gz"))
    yt = _idx(os.path.join(FMNIST_DIR, "t10k-labels-idx1-ubyte.gz"))
    i = rng.choice(len(ys), train, replace=False)
    j = rng.choice(len(yt), valid, replace=False)
    scale = lambda x: x.reshape(len(x), -1).astype(np.float64) / 255.0  # noqa: E731
    return scale(xs[i]), ys[i].astype(np.int64), scale(xt[j]), yt[j].astype(np.int64)


def digits():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler
    x, y = load_digits(return_X_y=True)
    xa, xb, ya, yb = train_test_split(x, y, test_size=450, stratify=y, random_state=0)
    s = StandardScaler().fit(xa)
    return s.transform(xa), ya, s.transform(xb), yb


def _mlp_sgd(p, seed):
    from sklearn.neural_network import MLPClassifier
    return MLPClassifier(hidden_layer_sizes=(p["hidden"],), solver="sgd",
                         learning_rate_init=p["lr"], momentum=p["momentum"],
                         nesterovs_momentum=True, alpha=p["alpha"], batch_size=p["batch_size"],
                         random_state=seed)


def _mlp_adam(p, seed):
    from sklearn.neural_network import MLPClassifier
    return MLPClassifier(hidden_layer_sizes=(p["hidden"], p["hidden"]), solver="adam",
                         learning_rate_init=p["lr"], beta_1=p["beta_1"], alpha=p["alpha"],
                         batch_size=p["batch_size"], random_state=seed)


def _linear_sgd(p, seed):
    from sklearn.linear_model import SGDClassifier
    return SGDClassifier(loss="log_loss", penalty="elasticnet", alpha=p["alpha"],
                         l1_ratio=p["l1_ratio"], learning_rate="constant", eta0=p["eta0"],
                         average=bool(p["average"]), random_state=seed)


def _trainer_args(p, base, layers):
    """hyperpack-trainer's flags for configuration `p` of a trainer family: `base`, then `layers`
    (its width flags for the width p["width"]), then the optimiser's."""
    return base + layers(p["width"]) + [
        "--learning-rate", repr(p["lr"]), "--batch-size", str(p["batch_size"]),
        "--optimizer", "sgd", "--momentum", repr(p["momentum"]),
        "--weight-decay", repr(p["weight_decay"])]


_TRAINER_DATA = ["--data", "fmnist", "--val-fraction", "0.03333334", "--threads", "1",
                 "--test=false"]
_TRAINER_MLP = ["--model", "mlp", "--train-samples", "6000"] + _TRAINER_DATA
_TRAINER_CNN = ["--model", "cnn", "--train-samples", "3000"] + _TRAINER_DATA


def _f(name, low, high, log=False):
    return {"name": name, "type": "float", "low": low, "high": high, "log": log}


def _i(name, low, high, log=False):
    return {"name": name, "type": "int", "low": low, "high": high, "log": log}


FAMILIES = {
    "mlp-sgd-fmnist": {
        "data": fmnist, "model": _mlp_sgd,
        "space": [_f("lr", 1e-4, 1.0, True), _i("batch_size", 16, 512, True),
                  _f("momentum", 0.5, 0.99), _f("alpha", 1e-6, 1e-1, True),
                  _i("hidden", 16, 512, True)]},
    "mlp-adam-digits": {
        "data": digits, "model": _mlp_adam,
        "space": [_f("lr", 1e-5, 1e-1, True), _i("batch_size", 8, 256, True),
                  _f("beta_1", 0.5, 0.99), _f("alpha", 1e-6, 1.0, True),
                  _i("hidden", 8, 256, True)]},
    "mlp-adam-fmnist": {
        "data": fmnist, "model": _mlp_adam,
        "space": [_f("lr", 1e-5, 1e-1, True), _i("batch_size", 16, 512, True),
                  _f("beta_1", 0.5, 0.99), _f("alpha", 1e-6, 1e-1, True),
                  _i("hidden", 16, 256, True)]},
    "linear-sgd-fmnist": {
        "data": fmnist, "model": _linear_sgd,
        "space": [_f("eta0", 1e-5, 1.0, True), _f("alpha", 1e-7, 1e-1, True),
                  _f("l1_ratio", 0.0, 1.0), _i("average", 0, 1)]},
    "trainer-mlp-fmnist": {
        "trainer": lambda p: _trainer_args(
            p, _TRAINER_MLP, lambda w: ["--mlp-widths", "%d,%d" % (w, max(1, w // 2))]),
        "classes": 10,
        "space": [_f("lr", 1e-3, 1.0, True), _i("batch_size", 16, 512, True),
                  _f("momentum", 0.5, 0.99), _f("weight_decay", 1e-6, 1e-2, True),
                  _i("width", 32, 512, True)]},
    "trainer-cnn-fmnist": {
        "trainer": lambda p: _trainer_args(
            p, _TRAINER_CNN, lambda c: ["--cnn-channels", "%d,%d" % (c, 2 * c)]),
        "classes": 10,
        "space": [_f("lr", 1e-3, 1.0, True), _i("batch_size", 16, 256, True),
                  _f("momentum", 0.5, 0.99), _f("weight_decay", 1e-6, 1e-2, True),
                  _i("width", 4, 32, True)]},
}


def configurations(space, n, seed):
    """n configurations of `space` from a scrambled Sobol sequence (log dimensions in log space)."""
    from scipy.stats import qmc
    u = qmc.Sobol(len(space), scramble=True, seed=seed).random(n)
    out = []
    for row in u:
        p = {}
        for x, d in zip(row, space):
            lo, hi = d["low"], d["high"]
            if d["type"] == "int":
                # Each integer gets an equal share of [0, 1) (of its log range where log).
                if d["log"]:  # lo >= 1
                    a, b = math.log(lo - 0.5), math.log(hi + 0.5)
                    v = math.exp(a + x * (b - a))
                else:
                    v = lo - 0.5 + x * (hi - lo + 1)
                p[d["name"]] = int(min(hi, max(lo, round(v))))
            elif d["log"]:
                p[d["name"]] = float(math.exp(math.log(lo) + x * (math.log(hi) - math.log(lo))))
            else:
                p[d["name"]] = float(lo + x * (hi - lo))
        out.append(p)
    return out


_DATA = {}


def _run_trainer(job):
    """One configuration through hyperpack-trainer: an epoch's seconds are the time between its
    JSON line and the one before; the first epoch's, which would include the process's start and
    the data's loading (a replay charges those as the start cost), are its steps at the first
    epoch's step time plus the second epoch's validation (its wall time less its steps)."""
    import subprocess
    family, index, params, epochs, trainer, seed = job
    spec = FAMILIES[family]
    k = spec["classes"]
    cmd = [trainer] + spec["trainer"](params) + ["--epochs", str(epochs), "--seed", str(seed)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    errors, losses, wall, train = [], [], [], []
    last, prev_step = time.perf_counter(), 0
    for line in proc.stdout:
        now = time.perf_counter()
        try:
            m = json.loads(line)
        except ValueError:
            continue
        if "epoch" not in m or "val_accuracy" not in m:
            continue
        train.append((m["step"] - prev_step) * m["step_time_ms"] / 1000.0)
        prev_step = m["step"]
        wall.append(now - last)
        last = now
        acc, loss = m["val_accuracy"], m["val_loss"]
        # A non-finite value is written as null.
        if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in (acc, loss)):
            break
        errors.append(round(1.0 - acc, 6))
        losses.append(float("%.6g" % loss))
    proc.kill()  # a diverged run has nothing more to say
    proc.wait()
    diverged = len(errors) < epochs
    seconds = list(wall[:len(errors)])
    if len(seconds) > 1:
        seconds[0] = train[0] + max(0.0, wall[1] - train[1])
    while len(errors) < epochs:  # stopped or diverged: a predictor of nothing from here on
        errors.append(1.0 - 1.0 / k)
        losses.append(math.log(k))
        seconds.append(seconds[-1] if seconds else 0.0)
    return {"index": index, "seed": seed, "params": params, "error": errors, "loss": losses,
            "seconds": [float("%.4g" % s) for s in seconds], "diverged": diverged}


def _train(job):
    """Trains one configuration epoch by epoch; its error, log loss and seconds per epoch."""
    family, index, params, epochs, _, seed = job
    spec = FAMILIES[family]
    if "trainer" in spec:
        return _run_trainer(job)
    if family not in _DATA:
        _DATA[family] = spec["data"]()
    xa, ya, xb, yb = _DATA[family]
    classes = np.unique(np.concatenate([ya, yb]))
    k = len(classes)
    model = spec["model"](params, seed)
    errors, losses, seconds = [], [], []
    diverged = False
    for _ in range(epochs):
        start = time.perf_counter()
        if not diverged:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with np.errstate(all="ignore"):
                    try:
                        model.partial_fit(xa, ya, classes=classes)
                        prob = model.predict_proba(xb)
                    except (ValueError, FloatingPointError, OverflowError):
                        prob = None
            if prob is None or not np.all(np.isfinite(prob)):
                diverged = True
        if diverged:
            errors.append(1.0 - 1.0 / k)
            losses.append(math.log(k))
        else:
            pred = classes[np.argmax(prob, axis=1)]
            errors.append(float(np.mean(pred != yb)))
            picked = prob[np.arange(len(yb)), np.searchsorted(classes, yb)]
            losses.append(float(-np.mean(np.log(np.clip(picked, 1e-15, 1.0)))))
        seconds.append(time.perf_counter() - start)
    return {"index": index, "seed": seed, "params": params,
            "error": [round(e, 6) for e in errors], "loss": [float("%.6g" % v) for v in losses],
            "seconds": [float("%.4g" % s) for s in seconds], "diverged": diverged}


def make(args):
    import sklearn
    from multiprocessing import Pool
    spec = FAMILIES[args.family]
    params = configurations(spec["space"], args.configs, args.seed)
    jobs = [(args.family, i, p, args.epochs, os.path.abspath(args.trainer), i)
            for i, p in enumerate(params)]
    rows = [None] * len(jobs)
    began = time.time()
    with Pool(args.jobs) as pool:
        for done, row in enumerate(pool.imap_unordered(_train, jobs), 1):
            rows[row["index"]] = row
            print("[%d/%d] %s config %d: final error %.4f (%.1f s)" %
                  (done, len(jobs), args.family, row["index"], row["error"][-1],
                   sum(row["seconds"])), file=sys.stderr, flush=True)
    table = {
        "family": args.family,
        "command": "bench/lc_table.py make --family %s --configs %d --seed %d --epochs %d" %
                   (args.family, args.configs, args.seed, args.epochs),
        "scikit_learn": sklearn.__version__, "epochs": args.epochs,
        "metric": "validation error (lower is better); loss: validation log loss",
        "space": spec["space"], "made_in_s": round(time.time() - began, 1),
        "configs": [{k: r[k] for k in ("params", "error", "loss", "seconds")} for r in rows],
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    write_compact(args.out, table)
    print("wrote %s (%d configurations, %.0f s)" % (args.out, len(rows), time.time() - began),
          file=sys.stderr)


def write_compact(path, obj):
    """`obj` as one line of JSON with no spaces, as bench/data keeps tables and repeats."""
    with open(path, "w") as f:
        json.dump(obj, f, separators=(",", ":"))
        f.write("\n")


def repeats(args):
    """Trains a table's best configurations again with other model seeds (index + 1000 x offset;
    offset 0 is the table's own run), to see how far a table's final errors are its
    configurations' and how far one training's draw."""
    from multiprocessing import Pool
    with open(args.table) as f:
        t = json.load(f)
    offsets = [int(o) for o in args.offsets.split(",")]
    order = sorted(range(len(t["configs"])), key=lambda i: t["configs"][i]["error"][-1])
    top = order[:args.top]
    jobs = [(t["family"], i, t["configs"][i]["params"], t["epochs"],
             os.path.abspath(args.trainer), i + 1000 * o) for i in top for o in offsets]
    runs = {i: {} for i in top}
    began = time.time()
    with Pool(args.jobs) as pool:
        for done, row in enumerate(pool.imap_unordered(_train, jobs), 1):
            runs[row["index"]][(row["seed"] - row["index"]) // 1000] = row["error"]
            print("[%d/%d] %s config %d seed %d: final error %.4f" %
                  (done, len(jobs), t["family"], row["index"], row["seed"], row["error"][-1]),
                  file=sys.stderr, flush=True)
    out = {"family": t["family"], "table": args.table, "of": len(t["configs"]),
           "top": args.top, "offsets": offsets,
           "command": "bench/lc_table.py repeats %s --top %d --offsets %s" %
                      (args.table, args.top, args.offsets),
           "configs": [{"index": i, "final": t["configs"][i]["error"][-1],
                        "repeats": [runs[i][o][-1] for o in offsets],
                        "reproduced": runs[i][0] == t["configs"][i]["error"] if 0 in offsets
                        else None} for i in top]}
    if args.curves:  # each offset's whole curve, for a replay's fresh draws
        out["curve_offsets"] = offsets
        out["command"] += " --curves"
        for c in out["configs"]:
            c["curves"] = [runs[c["index"]][o] for o in offsets]
    write_compact(args.out, out)
    print("wrote %s (%.0f s)" % (args.out, time.time() - began), file=sys.stderr)


def repeat_summary(r, top=None):
    """What a repeats file says: the table's final errors against the means of other seeds' runs,
    over the table's best `top` configurations (all the file holds if None)."""
    new = [o != 0 for o in r["offsets"]]
    configs = r["configs"][:top]  # best first, as repeats writes them
    final = np.array([c["final"] for c in configs])
    # Each configuration's draws: the table's and the other seeds'.
    draws = [np.array([c["final"]] + [v for v, n in zip(c["repeats"], new) if n])
             for c in configs]
    mean = np.array([d.mean() for d in draws])
    other = np.array([d[1:].mean() for d in draws])
    sd = math.sqrt(np.mean([d.var(ddof=1) for d in draws]))
    best = int(np.argmin(final))
    rank = 1 + int(np.sum(mean < mean[best]))
    return {"family": r["family"], "top": len(final), "draws": len(draws[0]), "sd": sd,
            "rho": _spearman(final, other), "best_rank": rank,
            "best_excess": float(mean[best] - mean.min()),
            "reproduced": [c["reproduced"] for c in configs if c["reproduced"] is not None]}


def read_repeats(path):
    """A repeats file of this script; else exit naming the file and what it lacks."""
    try:
        with open(path) as f:
            r = json.load(f)
    except (OSError, ValueError) as e:
        raise SystemExit("lc_table: %s: %s" % (path, e))
    for key in ("family", "offsets", "configs"):
        if not isinstance(r, dict) or key not in r:
            raise SystemExit("lc_table: %s: no '%s': not the output of lc_table.py repeats"
                             % (path, key))
        if key != "family" and not isinstance(r[key], list):
            raise SystemExit("lc_table: %s: '%s' is not a list" % (path, key))
    for k, c in enumerate(r["configs"]):
        if not isinstance(c, dict) or any(key not in c for key in ("final", "repeats", "reproduced")) \
                or not isinstance(c["repeats"], list) or len(c["repeats"]) != len(r["offsets"]):
            raise SystemExit("lc_table: %s: configs[%d] needs final, reproduced and one repeat "
                             "per offset (%d)" % (path, k, len(r["offsets"])))
    if len(r["configs"]) < 2 or not any(o != 0 for o in r["offsets"]):
        raise SystemExit("lc_table: %s: needs two configurations or more and a seed besides "
                         "the table's own (offset 0)" % path)
    check_curves(path, r)
    return r


def check_curves(path, r):
    """A repeats file's whole curves (repeats --curves), where it holds them: one per offset in
    `curve_offsets` for every configuration, each ending at that offset's final error."""
    kept = r.get("curve_offsets")
    if kept is None:
        return
    if not isinstance(kept, list) or any(o not in r["offsets"] for o in kept):
        raise SystemExit("lc_table: %s: curve_offsets %s: expected offsets of the file (%s)"
                         % (path, kept, r["offsets"]))
    for c in r["configs"]:
        curves = c.get("curves")
        if not isinstance(curves, list) or len(curves) != len(kept) or \
                any(not isinstance(e, list) or not e for e in curves):
            raise SystemExit("lc_table: %s: configuration %s: expected one curve per curve offset "
                             "(%d)" % (path, c.get("index"), len(kept)))
        for o, e in zip(kept, curves):
            if e[-1] != c["repeats"][r["offsets"].index(o)]:
                raise SystemExit("lc_table: %s: configuration %s: the curve of offset %d ends at "
                                 "%s, its repeat is %s" % (path, c.get("index"), o, e[-1],
                                                          c["repeats"][r["offsets"].index(o)]))


def merge_repeats(args):
    """One repeats file from several of the same table's configurations with other seeds each
    (repeats --offsets 1,2, later --offsets 3,4): offsets and repeats side by side, in the order
    the files are given; the table's own seed's `reproduced` from the file that ran it. An offset
    in two files must hold the same final errors in both (a seed trained again, with --curves to
    keep its whole curves): that is checked, and its curves kept."""
    files = [(path, read_repeats(path)) for path in args.files]
    first_path, first = files[0]
    for path, r in files:
        for key in ("family", "table", "of", "top"):
            if r.get(key) != first.get(key):
                raise SystemExit("lc_table: %s: %s %s, but %s has %s" %
                                 (path, key, r.get(key), first_path, first.get(key)))
        if sorted(c["index"] for c in r["configs"]) != sorted(c["index"] for c in first["configs"]):
            raise SystemExit("lc_table: %s: other configurations than %s's" % (path, first_path))
    offsets, finals, curves = merged_offsets(files)
    configs = []
    for c in first["configs"]:
        i = c["index"]
        mine = [m for _, r in files for m in r["configs"] if m["index"] == i]
        merged = {"index": i, "final": c["final"], "repeats": [finals[o][i] for o in offsets],
                  "reproduced": next((m["reproduced"] for m in mine
                                      if m["reproduced"] is not None), None)}
        if curves:
            merged["curves"] = [curves[o][i] for o in curves]
        configs.append(merged)
    out = dict(first, offsets=offsets, configs=configs,
               command=" && ".join(r["command"] for _, r in files if "command" in r))
    out.pop("curve_offsets", None)
    if curves:
        out["curve_offsets"] = list(curves)
    write_compact(args.out, out)
    print("wrote %s (offsets %s%s)" % (args.out, ",".join(map(str, offsets)),
                                       "; curves of %s" % ",".join(map(str, curves))
                                       if curves else ""), file=sys.stderr)


def merged_offsets(files):
    """The offsets of several repeats files in order of first appearance, each offset's final
    errors by configuration index, and the whole curves of the offsets that have them; an offset
    in two files with other final errors is an error naming both."""
    offsets, finals, curves, seen = [], {}, {}, {}
    for path, r in files:
        for k, o in enumerate(r["offsets"]):
            mine = {c["index"]: c["repeats"][k] for c in r["configs"]}
            if o in finals:
                other = next((i for i in mine if mine[i] != finals[o][i]), None)
                if other is not None:
                    raise SystemExit("lc_table: offset %d is in both %s and %s with other final "
                                     "errors (configuration %d: %s and %s)" %
                                     (o, seen[o], path, other, finals[o][other], mine[other]))
            else:
                offsets.append(o)
                finals[o], seen[o] = mine, path
        for k, o in enumerate(r.get("curve_offsets") or []):
            curves.setdefault(o, {c["index"]: c["curves"][k] for c in r["configs"]})
    return offsets, finals, curves


def show_repeats(args):
    summaries = [repeat_summary(read_repeats(path), args.top) for path in args.files]
    print("%-20s %4s %5s %8s %7s %10s %12s %10s" % ("family", "top", "draws", "seed sd", "rho",
                                                   "best rank", "best excess", "reproduced"))
    for s in summaries:
        rep = "%d/%d" % (sum(s["reproduced"]), len(s["reproduced"])) if s["reproduced"] else "-"
        print("%-20s %4d %5d %8.4f %7.2f %10d %12.4f %10s" %
              (s["family"], s["top"], s["draws"], s["sd"], s["rho"], s["best_rank"],
               s["best_excess"], rep))


def _spearman(a, b):
    ra = np.argsort(np.argsort(a)).astype(float)
    rb = np.argsort(np.argsort(b)).astype(float)
    return float(np.corrcoef(ra, rb)[0, 1])


def show(args):
    print("%-20s %7s %7s %7s %7s %6s %6s %6s %9s" %
          ("family", "configs", "best", "median", "worst", "rho@1", "rho@3", "rho@9", "full s"))
    for path in args.files:
        with open(path) as f:
            t = json.load(f)
        final = np.array([c["error"][-1] for c in t["configs"]])
        rho = [_spearman([c["error"][e - 1] for c in t["configs"]], final)
               if e <= t["epochs"] else float("nan") for e in (1, 3, 9)]
        full = np.mean([sum(c["seconds"]) for c in t["configs"]])
        print("%-20s %7d %7.4f %7.4f %7.4f %6.2f %6.2f %6.2f %9.1f" %
              (t["family"], len(final), final.min(), np.median(final), final.max(), *rho, full))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("--family", required=True, choices=sorted(FAMILIES))
    m.add_argument("--configs", type=int, default=256)
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--epochs", type=int, default=27)
    m.add_argument("--jobs", type=int, default=2)
    m.add_argument("--trainer", default="build/trainer/hyperpack-trainer",
                   help="hyperpack-trainer, for the trainer-* families")
    m.add_argument("--out", required=True)
    s = sub.add_parser("show")
    s.add_argument("files", nargs="+")
    r = sub.add_parser("repeats")
    r.add_argument("table")
    r.add_argument("--top", type=int, default=24, help="the table's best N configurations")
    r.add_argument("--offsets", default="0,1,2,3,4",
                   help="model seeds index + 1000 x offset; 0 is the table's own run")
    r.add_argument("--jobs", type=int, default=2)
    r.add_argument("--curves", action="store_true",
                   help="keep each seed's whole error curve, not its final error alone")
    r.add_argument("--trainer", default="build/trainer/hyperpack-trainer")
    r.add_argument("--out", required=True)
    mr = sub.add_parser("merge-repeats")
    mr.add_argument("files", nargs="+")
    mr.add_argument("--out", required=True)
    sr = sub.add_parser("show-repeats")
    sr.add_argument("files", nargs="+")
    sr.add_argument("--top", type=int, help="the table's best N of the configurations repeated")
    args = parser.parse_args()
    commands = {"make": make, "show": show, "repeats": repeats, "merge-repeats": merge_repeats,
                "show-repeats": show_repeats}
    commands[args.command](args)


if __name__ == "__main__":
    main()
