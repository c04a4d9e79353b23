#!/usr/bin/python3
"""Real model-tuning tasks: hyperpack's tuner against Optuna 3.1's TPE and random search.

Eight scikit-learn tasks in the setting of the NeurIPS 2020 black-box optimisation challenge
(Bayesmark): an estimator, its documented hyperparameters over the ranges that challenge used,
one of scikit-learn's bundled data sets, and as loss 1 - the mean 5-fold stratified
cross-validated accuracy (folds shuffled with a fixed seed, the estimator's own seed fixed, so a
configuration always gets the same loss). Data are standardised first (the trees do not care).

Each trial is a real process. A resident evaluator (`serve`) imports scikit-learn and loads the
data once, and forks per request, so that a trial costs its fitting and not Python's imports;
the trial program (`eval`) only connects to it and prints {"loss": ...}. hyperpack runs each study
through its CLI (`hyperpack run`, the default tuner `gp` with `tuner.seed`); Optuna's TPE and
random search ask and tell in this process, evaluating through the same evaluator, and so does
`hyperpack-optuna`: hyperpack's tuner inside Optuna (hyperpack.optuna.GPSampler, the Python module;
PYTHONPATH=build/python). One at a time:
budget.max_parallel 1, and Optuna sequentially. In batches of 8: max_parallel 8 (hyperpack keeps 8
trials running, proposing as each one ends) against TPE with constant_liar asking 8 at a time.

Score (the challenge's normalised score): per task, 100 x (1 - (best - opt) / (median - opt)) of
the best loss found within the first N evaluations, where opt is the best loss any method found
on that task in this run and median the median loss of the random-search draws (a median random
configuration: 0; the best known: 100), averaged over tasks and seeds.

Usage (PY: a python with scikit-learn and Optuna, e.g. PY=$(../shared/tools/sklearn-python)):
  $PY bench/sklearn_tasks.py run [--tasks all] [--seeds 3] [--first-seed 0] [--budget 64]
                                  [--modes 1,8]
                                  [--methods hyperpack,tpe,random,hyperpack-optuna]
                                  [--out FILE.json] [--log-floats]
                                  [--hyperpack build/cli/hyperpack] [--jobs 2]
  $PY bench/sklearn_tasks.py table FILE.json [FILE.json ...] [--landscape L.json]
                                  [--checkpoints 16,32,64]
                                  # merged, scored, printed
  $PY bench/sklearn_tasks.py landscape [--tasks all] [--draws 3000] [--jobs 2] [--out L.json]
  $PY bench/sklearn_tasks.py serve SOCKET | eval SOCKET TASK NAME=VALUE ...

`landscape` draws configurations uniformly (log-uniformly on log scales), as random search does,
and prints per task how often one draw reaches each of the lowest losses: how narrow the best
values are. With --landscape, `table` adds a ceiling per mode: the score of a method that reaches,
in every run, the lower of the best loss those draws found and the loss that half the runs of the
best method on that task reach. Above it is what single lucky runs found.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import evaluator

# name: (estimator, data set, fixed arguments, space); a space entry is
# (kind, low, high, log) with kind float or int.
TASKS = {
    "dt-digits": ("DecisionTreeClassifier", "digits", {"random_state": 0}, {
        "max_depth": ("int", 1, 15, False),
        "min_samples_split": ("float", 0.01, 0.99, False),
        "min_samples_leaf": ("float", 0.01, 0.49, False),
        "min_weight_fraction_leaf": ("float", 0.01, 0.49, False),
        "max_features": ("float", 0.01, 0.99, False),
        "min_impurity_decrease": ("float", 0.0, 0.5, False)}),
    "rf-wine": ("RandomForestClassifier", "wine", {"n_estimators": 10, "random_state": 0}, {
        "max_depth": ("int", 1, 15, False),
        "max_features": ("float", 0.01, 0.99, False),
        "min_samples_split": ("float", 0.01, 0.99, False),
        "min_samples_leaf": ("float", 0.01, 0.49, False),
        "min_weight_fraction_leaf": ("float", 0.01, 0.49, False),
        "min_impurity_decrease": ("float", 0.0, 0.5, False)}),
    "svm-breast": ("SVC", "breast", {"random_state": 0}, {
        "C": ("float", 1.0, 1e3, True),
        "gamma": ("float", 1e-4, 1e-3, True),
        "tol": ("float", 1e-5, 1e-1, True)}),
    "knn-wine": ("KNeighborsClassifier", "wine", {}, {
        "n_neighbors": ("int", 1, 25, False),
        "p": ("int", 1, 4, False)}),
    "mlp-wine": ("MLPClassifier", "wine", {"solver": "adam", "random_state": 0, "max_iter": 100}, {
        "hidden_layer_sizes": ("int", 50, 200, False),
        "alpha": ("float", 1e-5, 1e1, True),
        "batch_size": ("int", 10, 250, False),
        "learning_rate_init": ("float", 1e-5, 1e-1, True),
        "tol": ("float", 1e-5, 1e-1, True),
        "validation_fraction": ("float", 0.1, 0.9, False),
        "beta_1": ("float", 0.5, 0.99, False),
        "beta_2": ("float", 0.9, 1 - 1e-6, False),
        "epsilon": ("float", 1e-9, 1e-6, True)}),
    "ada-wine": ("AdaBoostClassifier", "wine", {"random_state": 0}, {
        "n_estimators": ("int", 10, 100, False),
        "learning_rate": ("float", 1e-4, 1e1, True)}),
    "l1logreg-breast": ("LogisticRegression", "breast",
                        {"penalty": "l1", "solver": "liblinear", "random_state": 0}, {
        "C": ("float", 1e-2, 1e2, True),
        "intercept_scaling": ("float", 1e-2, 1e2, True)}),
    "hgb-wine": ("HistGradientBoostingClassifier", "wine", {"random_state": 0, "max_iter": 50}, {
        "learning_rate": ("float", 1e-3, 1.0, True),
        "max_leaf_nodes": ("int", 2, 64, False),
        "min_samples_leaf": ("int", 1, 50, False),
        "l2_regularization": ("float", 1e-6, 10.0, True)}),
}


# ---- the evaluator -------------------------------------------------------------------------

def _loss(task, params, cache={}):
    import warnings
    import numpy as np
    from sklearn import datasets, ensemble, linear_model, neighbors, neural_network, svm, tree
    from sklearn.model_selection import StratifiedKFold, cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    estimator, data, fixed, space = TASKS[task]
    if data not in cache:
        load = {"digits": datasets.load_digits, "wine": datasets.load_wine,
                "breast": datasets.load_breast_cancer}[data]
        cache[data] = load(return_X_y=True)
    x, y = cache[data]
    classes = {m: getattr(mod, m) for mod in (tree, ensemble, svm, neighbors, neural_network,
                                               linear_model) for m in dir(mod)}
    args = dict(fixed)
    for name, (kind, _, _, _) in space.items():
        args[name] = int(params[name]) if kind == "int" else float(params[name])
    model = make_pipeline(StandardScaler(), classes[estimator](**args))
    folds = StratifiedKFold(5, shuffle=True, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        score = cross_val_score(model, x, y, cv=folds, scoring="accuracy", error_score=0.0)
    return float(1.0 - np.mean(score))


def serve(path):
    import sklearn.ensemble  # noqa: F401  (imported once, before the forks)
    for task in TASKS:
        _loss(task, {k: (lo if kind == "int" else (lo + hi) / 2)
                     for k, (kind, lo, hi, _) in TASKS[task][3].items()})
    evaluator.serve(path, "task", _loss)


def ask(path, task, params):
    reply = evaluator.request(path, "task", task, params)
    if "error" in reply:
        raise RuntimeError(reply["error"])
    return reply["loss"]


# ---- the methods ---------------------------------------------------------------------------

def study_yaml(task, seed, budget, parallel, sock):
    _, _, _, space = TASKS[task]
    lines = [f"name: {task}-s{seed}-p{parallel}",
             "objective: {metric: loss, direction: minimize}", "search_space:"]
    for name, (kind, lo, hi, log) in space.items():
        bounds = f"low: {lo}, high: {hi}" if kind == "int" else f"low: {lo!r}, high: {hi!r}"
        lines.append(f"  {name}: {{type: {kind}, {bounds}{', log: true' if log else ''}}}")
    args = " ".join(f"{n}={{{n}}}" for n in space)
    lines += [f"trial: {{command: \"/usr/bin/python3 {os.path.abspath(__file__)} eval {sock} "
              f"{task} {args}\"}}",
              f"tuner: {{seed: {seed}}}",
              f"budget: {{max_trials: {budget}, max_parallel: {parallel}}}"]
    return "\n".join(lines) + "\n"


def run_hyperpack(hyperpack, task, seed, budget, parallel, sock, work):
    path = os.path.join(work, f"{task}-{seed}-{parallel}.yaml")
    with open(path, "w") as f:
        f.write(study_yaml(task, seed, budget, parallel, sock))
    db = os.path.join(work, f"{task}-{seed}-{parallel}.db")
    subprocess.run([hyperpack, "run", path, "--storage", db, "--progress", "quiet"], check=True,
                   stdout=subprocess.DEVNULL)
    out = subprocess.run([hyperpack, "trials", f"{task}-s{seed}-p{parallel}", "--json",
                          "--storage", db], check=True, capture_output=True, text=True).stdout
    trials = sorted(json.loads(out), key=lambda t: t["trial"])
    return [t["value"] if t.get("value") is not None else math.inf for t in trials]


def optuna_distributions(task):
    import optuna
    out = {}
    for name, (kind, lo, hi, log) in TASKS[task][3].items():
        out[name] = (optuna.distributions.IntDistribution(lo, hi, log=log) if kind == "int"
                     else optuna.distributions.FloatDistribution(lo, hi, log=log))
    return out


def run_optuna(method, task, seed, budget, parallel, sock):
    import optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    import warnings
    warnings.simplefilter("ignore")
    if method == "tpe":
        sampler = optuna.samplers.TPESampler(seed=seed, constant_liar=parallel > 1)
    elif method == "hyperpack-optuna":
        import hyperpack.optuna  # the Python module: PYTHONPATH=build/python
        sampler = hyperpack.optuna.GPSampler(seed=seed)
    else:
        sampler = optuna.samplers.RandomSampler(seed=seed)
    study = optuna.create_study(sampler=sampler)
    dists = optuna_distributions(task)
    losses = []
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(parallel) as pool:
        while len(losses) < budget:
            k = min(parallel, budget - len(losses))
            trials = [study.ask(dists) for _ in range(k)]
            results = list(pool.map(lambda t: ask(sock, task, t.params), trials))
            for t, loss in zip(trials, results):
                study.tell(t, loss)
                losses.append(loss)
    return losses


def run(args):
    tasks = list(TASKS) if args.tasks == "all" else args.tasks.split(",")
    modes = [int(m) for m in args.modes.split(",")]
    methods = args.methods.split(",")
    work = tempfile.mkdtemp(prefix="sklearn-tasks-")
    sock = os.path.join(work, "evaluator.sock")
    server = subprocess.Popen([sys.executable, os.path.abspath(__file__), "serve", sock],
                              stdout=subprocess.PIPE, text=True)
    assert server.stdout.readline().strip() == "ready"
    results = []
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    jobs = [(m, t, s, p) for p in modes for t in tasks for s in seeds for m in methods]
    from concurrent.futures import ThreadPoolExecutor

    def one(job):
        method, task, seed, parallel = job
        start = time.time()
        if method == "hyperpack":
            losses = run_hyperpack(args.hyperpack, task, seed, args.budget, parallel, sock, work)
        else:
            losses = run_optuna(method, task, seed, args.budget, parallel, sock)
        label = args.label if method == "hyperpack" and args.label else method
        return {"method": label, "task": task, "seed": seed, "parallel": parallel,
                "losses": losses, "seconds": time.time() - start}

    try:
        with ThreadPoolExecutor(args.jobs) as pool:
            for i, r in enumerate(pool.map(one, jobs)):
                results.append(r)
                best = min(r["losses"])
                print(f"[{i + 1}/{len(jobs)}] {r['method']:9s} {r['task']:16s} seed {r['seed']} "
                      f"x{r['parallel']}: best {best:.4f} ({r['seconds']:.0f} s)", flush=True)
    finally:
        server.terminate()
    with open(args.out, "w") as f:
        json.dump({"budget": args.budget, "results": results}, f)
    print(f"wrote {args.out}")


# ---- the landscape: what random draws reach --------------------------------------------------

def _draw(task, index):
    import random
    rng = random.Random(index)
    params = {}
    for name, (kind, lo, hi, log) in TASKS[task][3].items():
        if kind == "int" and not log:
            params[name] = rng.randint(lo, hi)
        elif log:
            v = math.exp(rng.uniform(math.log(lo), math.log(hi)))
            params[name] = min(hi, max(lo, round(v))) if kind == "int" else v
        else:
            params[name] = rng.uniform(lo, hi)
    return params


def _draw_loss(job):
    task, index = job
    try:
        return _loss(task, _draw(task, index))
    except Exception:  # a configuration the estimator refuses
        return math.inf


def landscape(args):
    from multiprocessing import Pool
    tasks = list(TASKS) if args.tasks == "all" else args.tasks.split(",")
    out = {}
    with Pool(args.jobs) as pool:
        for task in tasks:
            start = time.time()
            losses = pool.map(_draw_loss, [(task, i) for i in range(args.draws)])
            out[task] = losses
            finite = sorted(l for l in losses if math.isfinite(l))
            levels = sorted({round(l, 4) for l in finite})[:3]
            share = ", ".join(f"{v:.4f}: {sum(round(l, 4) <= v for l in finite)}" for v in levels)
            print(f"{task:16s} median {finite[len(finite) // 2]:.4f}; draws at or below "
                  f"{share} of {len(losses)} ({time.time() - start:.0f} s)", flush=True)
    with open(args.out, "w") as f:
        json.dump({"draws": args.draws, "losses": out}, f)
    print(f"wrote {args.out}")


# ---- scoring -------------------------------------------------------------------------------

def print_ceiling(results, parallel, draws, opt, median, n):
    """The score of a method that reaches, in every run, the lower of the best loss the random
    draws found and the loss that half the runs of the best method (by that median) reach in n
    evaluations: what is left above the usual outcome is one lucky run's find."""
    cells = {}
    for t in sorted(draws):
        if t not in opt or not median.get(t) or median[t] <= opt[t]:
            continue
        typical = math.inf
        for m in {r["method"] for r in results}:
            bests = sorted(min(r["losses"][:n]) for r in results
                           if r["method"] == m and r["parallel"] == parallel and r["task"] == t)
            if bests:
                typical = min(typical, bests[(len(bests) - 1) // 2])
        reach = min(typical, min(draws[t]))
        cells[t] = 100.0 * (1.0 - max(0.0, reach - opt[t]) / (median[t] - opt[t]))
    if cells:
        print(f"{'ceiling':24s}{'':16s}{sum(cells.values()) / len(cells):8.1f}   (per task: "
              + ", ".join(f"{t} {c:.1f}" for t, c in cells.items()) + ")")


def score_table(files, checkpoints=(16, 32, 64), label=None, landscape=None):
    results = []
    for path in files:
        with open(path) as f:
            for r in json.load(f)["results"]:
                r = dict(r)
                if label:
                    r["method"] = label.get(path, {}).get(r["method"], r["method"])
                results.append(r)
    tasks = sorted({r["task"] for r in results})
    opt = {t: min(min(r["losses"]) for r in results if r["task"] == t) for t in tasks}
    median = {}
    for t in tasks:
        draws = sorted(l for r in results if r["task"] == t and r["method"] == "random"
                       for l in r["losses"] if math.isfinite(l))
        median[t] = draws[len(draws) // 2] if draws else None

    def score(r, n):
        best = min(r["losses"][:n])
        span = median[r["task"]] - opt[r["task"]]
        return 100.0 * (1.0 - (best - opt[r["task"]]) / span) if span > 0 else 100.0

    methods = sorted({r["method"] for r in results})
    out = {}
    draws = None
    if landscape:
        with open(landscape) as f:
            draws = json.load(f)["losses"]
    for parallel in sorted({r["parallel"] for r in results}):
        print(f"\nmax_parallel {parallel}: mean normalised score (100 = best known, "
              f"0 = median random draw)")
        print(f"{'method':24s}" + "".join(f"{n:>8d}" for n in checkpoints))
        for m in methods:
            rs = [r for r in results if r["method"] == m and r["parallel"] == parallel]
            if not rs:
                continue
            row = [sum(score(r, n) for r in rs) / len(rs) for n in checkpoints]
            out[(m, parallel)] = row
            print(f"{m:24s}" + "".join(f"{v:8.1f}" for v in row))
        if draws:
            print_ceiling(results, parallel, draws, opt, median, checkpoints[-1])
        print(f"\nper task, at {checkpoints[0]} / {checkpoints[-1]} (mean over seeds)")
        print(f"{'task':18s}" + "".join(f"{m:>22s}" for m in methods))
        for t in tasks:
            cells = []
            for m in methods:
                rs = [r for r in results if r["method"] == m and r["parallel"] == parallel
                      and r["task"] == t]
                if not rs:
                    cells.append(f"{'':>22s}")
                    continue
                a = sum(score(r, checkpoints[0]) for r in rs) / len(rs)
                b = sum(score(r, checkpoints[-1]) for r in rs) / len(rs)
                cells.append(f"{a:13.1f} / {b:6.1f}")
            print(f"{t:18s}" + "".join(cells))
    return out


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--tasks", default="all")
    r.add_argument("--seeds", type=int, default=3)
    r.add_argument("--first-seed", type=int, default=0,
                   help="the seeds run: first-seed .. first-seed + seeds - 1")
    r.add_argument("--budget", type=int, default=64)
    r.add_argument("--modes", default="1,8")
    r.add_argument("--methods", default="hyperpack,tpe,random")
    r.add_argument("--hyperpack", default=os.path.abspath("build/cli/hyperpack"))
    r.add_argument("--jobs", type=int, default=2)
    r.add_argument("--out", default="sklearn_tasks.json")
    r.add_argument("--label", help="the name hyperpack's results go by (comparing builds)")
    r.add_argument("--log-floats", action="store_true",
                   help="every float of positive lower bound on a log scale, for every method")
    t = sub.add_parser("table")
    t.add_argument("files", nargs="+")
    t.add_argument("--landscape", help="a landscape file: adds the ceiling it implies")
    t.add_argument("--checkpoints", default="16,32,64",
                   help="the evaluation counts scored; the last one is the per-task column's")
    g = sub.add_parser("landscape")
    g.add_argument("--tasks", default="all")
    g.add_argument("--draws", type=int, default=3000)
    g.add_argument("--jobs", type=int, default=2)
    g.add_argument("--out", default="sklearn_landscape.json")
    s = sub.add_parser("serve")
    s.add_argument("socket")
    e = sub.add_parser("eval")
    e.add_argument("socket")
    e.add_argument("task")
    e.add_argument("params", nargs="*")
    a = p.parse_args()
    if a.command == "run":
        if a.log_floats:
            for _, _, _, space in TASKS.values():
                for name, (kind, lo, hi, log) in space.items():
                    space[name] = (kind, lo, hi, log or (kind == "float" and lo > 0))
        run(a)
    elif a.command == "table":
        score_table(a.files, tuple(int(n) for n in a.checkpoints.split(",")),
                    landscape=a.landscape)
    elif a.command == "landscape":
        landscape(a)
    elif a.command == "serve":
        serve(a.socket)
    else:
        params = dict(kv.split("=", 1) for kv in a.params)
        print(json.dumps({"loss": ask(a.socket, a.task, params)}), flush=True)


if __name__ == "__main__":
    main()
