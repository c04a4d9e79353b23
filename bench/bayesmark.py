#!/usr/bin/python3
"""Bayesmark's grid of scikit-learn tuning problems: hyperpack against the Optuna releases users run.

The problems are Bayesmark's (github.com/uber/bayesmark, `bayesmark/sklearn_funcs.py` and
`data.py`), written here from those public facts: 9 models (kNN, SVM, DT, RF, MLP-adam, MLP-sgd,
ada, lasso, linear) x the data sets this Debian's scikit-learn 1.2 has (digits, iris, wine, breast
for classification; diabetes for regression: boston is gone from scikit-learn 1.2) x their metrics
(acc and nll for classifiers, mse and mae for regressors): 90 problems. Each configuration is
scored as Bayesmark scores it: the data split 80/20 with seed 0, the model's mean 5-fold
cross-validated score on the 80% (cross_val_score, cv=5), its loss the negated score. What differs:
Bayesmark's `logit` scale is given to every method as a linear range (hyperpack has no logit
scale), and the regressors' `normalize` flag, which scikit-learn 1.2 removed, is left out; and where
an estimator is random (a forest, a tree drawing features, an MLP's weights), its randomness is
seeded per problem, so that each problem is one deterministic function, the same in every run and
for every method (Bayesmark draws afresh at each evaluation; an evaluator process that drew once
for all its forks, as this one did before, gave two runs of one build objectives that differ).

Every trial is a real process. A resident evaluator (`serve`, under a python with scikit-learn)
loads the data once and forks per request; a trial (`eval`) only connects to it. hyperpack runs each
study through its CLI (`hyperpack run`, the default tuner with `tuner.seed`); each Optuna method runs
in a worker process under its release's python (`optuna-worker`), asking and telling through the same
evaluator. One at a time: max_parallel 1, Optuna sequentially. In batches of 8: hyperpack keeps 8
trials running; Optuna asks 8 before telling (GPSampler sees the 7 running ones, TPE with constant
liar).

Methods: hyperpack, gp5 (Optuna 5.0's GPSampler), tpe5 (Optuna 5.0's TPESampler as it defaults),
tpe31 (Optuna 3.1's TPESampler, constant_liar in batches), random (Optuna's RandomSampler).

Score (Bayesmark's normalised score): per problem, 100 x (1 - (best - opt) / (median - opt)) of the
best loss within the first N evaluations, where opt is the best loss anything found on the problem
(every method's runs and the random draws) and median the median loss of the random draws (`draws`:
a median random configuration scores 0, the best known 100). `random (expected)` is random search's
expected score at N from those draws (order statistics). Mean over problems and seeds, on the
problems that every method in the files ran the same number of times (the others are named).
`--paired METHOD` adds each method's difference from METHOD on the same problem and seed, with its
standard error: a tuner's path is chaotic where values tie or are rough (a forest's), so a
difference is read against its spread. Each run's record keeps its configurations (`params`,
in the order they were tried) beside its losses, to see where a method's trials went.

The split (`split`, run once, committed as bench/data/bayesmark_split.json): the 90 problems
shuffled with a fixed seed into a development half and a check half, and 24 problems of the check
half for the check run (`check12`, every other one of those 24, for the runs of 128 trials). Tune on
the development half only; `dev-fast` is the 27 development problems whose evaluations take under
a second, for quick comparisons. `stand-ins` are development problems outside the grid (the
models on made-up data shaped like digits and diabetes, and like diabetes with its noise; and on
real images shaped like wine, `fm0` to `fm7`: Fashion-MNIST from Debian's dataset-fashion-mnist):
where a check problem shows a fault, its stand-in is what gets traced. `linear-fm` names the eight
linear_fm*_acc problems.

Usage (PY=$(../shared/tools/sklearn-python) for scikit-learn and Debian's Optuna 3.1):
  $PY bench/bayesmark.py draws [--problems dev|dev-fast|check|check24|check12|stand-ins|linear-fm|all|A,B]
                               [--draws 200] [--jobs 2]
                               [--out bench/data/bayesmark_draws.json]
  $PY bench/bayesmark.py run --problems dev --seeds 3 [--first-seed 0] --budget 64 --modes 1,8
                             --methods hyperpack,gp5,tpe5,tpe31 [--jobs 2] [--out FILE.json]
                             [--hyperpack build/cli/hyperpack] [--label NAME]
                             [--python50 "$(../shared/tools/optuna-python 5.0)"]
  $PY bench/bayesmark.py table FILE.json [FILE.json ...] [--draws D.json] [--checkpoints 16,32,64]
                               [--by-model] [--by-problem] [--paired METHOD] [--methods A,B]
  $PY bench/bayesmark.py split            # once; prints and writes the split
  $PY bench/bayesmark.py serve SOCKET | eval SOCKET PROBLEM NAME=VALUE ...
"""
import argparse
import functools
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
import zlib

import evaluator

HERE = os.path.dirname(os.path.abspath(__file__))
SPLIT_FILE = os.path.join(HERE, "data", "bayesmark_split.json")

# Spaces: name -> (kind, low, high, scale); kind int, float or bool; scale linear, log or logit.
KNN = {"n_neighbors": ("int", 1, 25, "linear"), "p": ("int", 1, 4, "linear")}
SVM = {"C": ("float", 1.0, 1e3, "log"), "gamma": ("float", 1e-4, 1e-3, "log"),
       "tol": ("float", 1e-5, 1e-1, "log")}
DT = {"max_depth": ("int", 1, 15, "linear"),
      "min_samples_split": ("float", 0.01, 0.99, "logit"),
      "min_samples_leaf": ("float", 0.01, 0.49, "logit"),
      "min_weight_fraction_leaf": ("float", 0.01, 0.49, "logit"),
      "max_features": ("float", 0.01, 0.99, "logit"),
      "min_impurity_decrease": ("float", 0.0, 0.5, "linear")}
RF = {"max_depth": ("int", 1, 15, "linear"), "max_features": ("float", 0.01, 0.99, "logit"),
      "min_samples_split": ("float", 0.01, 0.99, "logit"),
      "min_samples_leaf": ("float", 0.01, 0.49, "logit"),
      "min_weight_fraction_leaf": ("float", 0.01, 0.49, "logit"),
      "min_impurity_decrease": ("float", 0.0, 0.5, "linear")}
MLP_ADAM = {"hidden_layer_sizes": ("int", 50, 200, "linear"), "alpha": ("float", 1e-5, 1e1, "log"),
            "batch_size": ("int", 10, 250, "linear"),
            "learning_rate_init": ("float", 1e-5, 1e-1, "log"),
            "tol": ("float", 1e-5, 1e-1, "log"),
            "validation_fraction": ("float", 0.1, 0.9, "logit"),
            "beta_1": ("float", 0.5, 0.99, "logit"), "beta_2": ("float", 0.9, 1 - 1e-6, "logit"),
            "epsilon": ("float", 1e-9, 1e-6, "log")}
MLP_SGD = {"hidden_layer_sizes": ("int", 50, 200, "linear"), "alpha": ("float", 1e-5, 1e1, "log"),
           "batch_size": ("int", 10, 250, "linear"),
           "learning_rate_init": ("float", 1e-5, 1e-1, "log"),
           "power_t": ("float", 0.1, 0.9, "logit"), "tol": ("float", 1e-5, 1e-1, "log"),
           "momentum": ("float", 0.001, 0.999, "logit"),
           "validation_fraction": ("float", 0.1, 0.9, "logit")}
ADA = {"n_estimators": ("int", 10, 100, "linear"), "learning_rate": ("float", 1e-4, 1e1, "log")}
LOGREG = {"C": ("float", 1e-2, 1e2, "log"), "intercept_scaling": ("float", 1e-2, 1e2, "log")}
LASSO_REG = {"alpha": ("float", 1e-2, 1e2, "log"), "fit_intercept": ("bool", 0, 1, "linear"),
             "max_iter": ("int", 10, 5000, "log"), "tol": ("float", 1e-5, 1e-1, "log"),
             "positive": ("bool", 0, 1, "linear")}
RIDGE_REG = {"alpha": ("float", 1e-2, 1e2, "log"), "fit_intercept": ("bool", 0, 1, "linear"),
             "max_iter": ("int", 10, 5000, "log"), "tol": ("float", 1e-4, 1e-1, "log")}

# model -> (classifier, its fixed arguments, its space), (regressor, ..., ...)
MODELS = {
    "kNN": (("KNeighborsClassifier", {}, KNN), ("KNeighborsRegressor", {}, KNN)),
    "SVM": (("SVC", {"kernel": "rbf", "probability": True}, SVM), ("SVR", {"kernel": "rbf"}, SVM)),
    "DT": (("DecisionTreeClassifier", {"max_leaf_nodes": None}, DT),
           ("DecisionTreeRegressor", {"max_leaf_nodes": None}, DT)),
    "RF": (("RandomForestClassifier", {"n_estimators": 10, "max_leaf_nodes": None}, RF),
           ("RandomForestRegressor", {"n_estimators": 10, "max_leaf_nodes": None}, RF)),
    "MLP-adam": (("MLPClassifier", {"solver": "adam", "early_stopping": True}, MLP_ADAM),
                 ("MLPRegressor", {"solver": "adam", "early_stopping": True}, MLP_ADAM)),
    "MLP-sgd": (("MLPClassifier", {"solver": "sgd", "early_stopping": True,
                                   "learning_rate": "invscaling", "nesterovs_momentum": True},
                 MLP_SGD),
                ("MLPRegressor", {"activation": "tanh", "solver": "sgd", "early_stopping": True,
                                  "learning_rate": "invscaling", "nesterovs_momentum": True},
                 MLP_SGD)),
    "ada": (("AdaBoostClassifier", {}, ADA), ("AdaBoostRegressor", {}, ADA)),
    "lasso": (("LogisticRegression", {"penalty": "l1", "fit_intercept": True,
                                      "solver": "liblinear", "multi_class": "ovr"}, LOGREG),
              ("Lasso", {}, LASSO_REG)),
    "linear": (("LogisticRegression", {"penalty": "l2", "fit_intercept": True,
                                       "solver": "liblinear", "multi_class": "ovr"}, LOGREG),
               ("Ridge", {"solver": "auto"}, RIDGE_REG)),
}
DATASETS = {"digits": "clf", "iris": "clf", "wine": "clf", "breast": "clf", "diabetes": "reg"}
METRICS = {"clf": ("acc", "nll"), "reg": ("mse", "mae")}
SCORERS = {"acc": "accuracy", "nll": "neg_log_loss", "mse": "neg_mean_squared_error",
           "mae": "neg_mean_absolute_error"}
PROBLEMS = [f"{m}_{d}_{s}" for m in MODELS for d in DATASETS for s in METRICS[DATASETS[d]]]
# Development stand-ins outside the grid (neither half): a check problem that shows a fault is not
# traced; a problem like it on data the grid does not have is. Made-up data of the size and shape
# of digits (10 classes) and of diabetes (a regression on 10 features), with fixed seeds;
# `friedmannoisy` as noisy as diabetes (half the target's variance is noise: 5 against Friedman's
# own spread of about 5), where `friedman` is nearly noiseless.
# `fm0`..`fm7` are real images outside the grid, shaped like wine (the one check problem where
# hyperpack trailed random search, linear_wine_acc): 178 Fashion-MNIST training images of three
# classes drawn by the seed, 13 principal components, each scaled by 10^U(-1, 3) as wine's raw
# features span four decades (the scales are what shape a linear model's C and intercept_scaling).
FMNIST = "/usr/share/datasets/fashion-mnist"
STAND_IN_DATASETS = {"synth10": "clf", "friedman": "reg", "friedmannoisy": "reg",
                     **{f"fm{k}": "clf" for k in range(8)}}
STAND_INS = [f"{m}_{d}_{s}" for m in MODELS for d in STAND_IN_DATASETS
             for s in METRICS[STAND_IN_DATASETS[d]]]
METHODS = ("hyperpack", "gp5", "tpe5", "tpe31", "random")


def problem(name):
    """(model, data set, metric, estimator, fixed arguments, space) of a problem."""
    model, data, metric = name.split("_")
    kind = DATASETS.get(data) or STAND_IN_DATASETS[data]
    estimator, fixed, space = MODELS[model][0 if kind == "clf" else 1]
    return model, data, metric, estimator, fixed, space


# The development problems whose evaluation takes under about 0.4 s on one core (measured on 4
# random configurations each, before any tuner change): every model but ada has one or more, ada
# the cheapest of its. The development runs use these; the check runs the check half.
DEV_FAST = ["DT_breast_acc", "DT_digits_acc", "DT_iris_acc", "DT_iris_nll", "DT_wine_acc",
            "DT_wine_nll", "MLP-adam_iris_nll", "MLP-sgd_iris_acc", "MLP-sgd_wine_acc",
            "MLP-sgd_wine_nll", "RF_breast_acc", "RF_diabetes_mse", "RF_digits_nll", "RF_iris_nll",
            "RF_wine_nll", "SVM_diabetes_mse", "SVM_iris_acc", "SVM_iris_nll", "SVM_wine_nll",
            "ada_iris_nll", "kNN_iris_acc", "lasso_diabetes_mae", "lasso_iris_nll",
            "linear_breast_nll", "linear_diabetes_mse", "linear_iris_acc", "linear_wine_nll"]


def problems_of(spec):
    if spec == "all":
        return list(PROBLEMS)
    if spec == "dev-fast":
        return list(DEV_FAST)
    if spec == "stand-ins":
        return list(STAND_INS)
    if spec == "linear-fm":
        return [f"linear_fm{k}_acc" for k in range(8)]
    if spec in ("dev", "check", "check24", "check12"):
        with open(SPLIT_FILE) as f:
            split_names = json.load(f)
        # check12: every other problem of check24, for the runs of 128 trials.
        return split_names["check24"][::2] if spec == "check12" else split_names[spec]
    names = spec.split(",")
    unknown = [n for n in names if n not in PROBLEMS and n not in STAND_INS]
    if unknown:
        sys.exit(f"unknown problems {unknown}; they are MODEL_DATA_METRIC, e.g. {PROBLEMS[0]}")
    return names


# ---- the evaluator -------------------------------------------------------------------------

def _data(data):
    """A data set's (x, y): scikit-learn's own, or a stand-in made with a fixed seed."""
    from sklearn import datasets
    if data == "synth10":
        return datasets.make_classification(n_samples=1797, n_features=64, n_informative=10,
                                            n_redundant=0, n_classes=10, n_clusters_per_class=1,
                                            class_sep=2.0, random_state=0)
    if data == "friedman":
        return datasets.make_friedman1(n_samples=442, n_features=10, noise=1.0, random_state=0)
    if data == "friedmannoisy":
        return datasets.make_friedman1(n_samples=442, n_features=10, noise=5.0, random_state=1)
    if data.startswith("fm"):
        return _fmnist_wine_shaped(int(data[2:]))
    load = {"digits": datasets.load_digits, "iris": datasets.load_iris,
            "wine": datasets.load_wine, "breast": datasets.load_breast_cancer,
            "diabetes": datasets.load_diabetes}[data]
    return load(return_X_y=True)


@functools.lru_cache(maxsize=1)
def _fmnist_train():
    """Fashion-MNIST's training images (uint8, one row each) and labels, decoded once: `serve`
    loads them before it forks, so an evaluation does not decompress 26 MB again."""
    import gzip
    import numpy as np
    with gzip.open(os.path.join(FMNIST, "train-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)
    with gzip.open(os.path.join(FMNIST, "train-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)
    return x, y


def _fmnist_wine_shaped(seed):
    """`fm<seed>`: 178 Fashion-MNIST images of three classes, 13 components at wine's scales."""
    import numpy as np
    from sklearn.decomposition import PCA
    images, y = _fmnist_train()
    classes = sorted(np.random.RandomState(100 + seed).choice(10, 3, replace=False))
    rng = np.random.RandomState(seed)
    idx = np.concatenate([rng.choice(np.flatnonzero(y == c), 60 - (i == 2) * 2, replace=False)
                          for i, c in enumerate(classes)])
    z = PCA(13, random_state=0).fit_transform(images[idx] / 255.0)  # only the rows it uses
    return z * 10 ** rng.uniform(-1, 3, size=13), y[idx]


def as_bool(value):
    """A bool parameter as a trial's command line, a JSON file or Optuna gives it."""
    return value in (True, "true", "True", 1, "1")


def _loss(name, params, cache={}):
    import warnings
    import numpy as np
    from sklearn import datasets, ensemble, linear_model, neighbors, neural_network, svm, tree
    from sklearn.metrics import get_scorer
    from sklearn.model_selection import cross_val_score, train_test_split
    _, data, metric, estimator, fixed, space = problem(name)
    if data not in cache:
        x, y = _data(data)
        cache[data] = train_test_split(x, y, test_size=0.2, random_state=0, shuffle=True)[0::2]
    x, y = cache[data]
    classes = {c: getattr(mod, c) for mod in (tree, ensemble, svm, neighbors, neural_network,
                                               linear_model) for c in dir(mod)}
    args = dict(fixed)
    for key, (kind, _, _, _) in space.items():
        value = params[key]
        if kind == "bool":
            args[key] = as_bool(value)
        else:
            args[key] = int(float(value)) if kind == "int" else float(value)
    # The estimators draw from numpy's global state where they are random (a forest's bootstrap, a
    # tree's features, an MLP's weights). A forked evaluator used to inherit whatever state its
    # process started with, so each run saw its own draw of every objective. Seeded per problem,
    # an objective is one deterministic function, the same in every run and for every method.
    np.random.seed(zlib.crc32(name.encode()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scores = cross_val_score(classes[estimator](**args), x, y, cv=5,
                                 scoring=get_scorer(SCORERS[metric]))
    loss = -float(np.mean(scores))
    if not math.isfinite(loss):
        raise ValueError("the loss is not finite")
    return loss


def serve(path):
    import sklearn.ensemble  # noqa: F401  (imported once, before the forks)
    for name in PROBLEMS[:1]:
        _loss(name, draw(name, 0))
    if os.path.exists(FMNIST):  # for the fm stand-ins; about half a second
        _fmnist_train()
    evaluator.serve(path, "problem", _loss)


def evaluate(path, name, params):
    """The loss of `params` on problem `name`, from the evaluator at `path`; inf where it fails."""
    return evaluator.request(path, "problem", name, params).get("loss", math.inf)


def start_evaluator(work):
    sock = os.path.join(work, "evaluator.sock")
    server = subprocess.Popen([sys.executable, os.path.abspath(__file__), "serve", sock],
                              stdout=subprocess.PIPE, text=True)
    if server.stdout.readline().strip() != "ready":
        sys.exit("the evaluator did not start")
    return server, sock


# ---- random draws: the baseline ------------------------------------------------------------

def draw(name, index):
    """Draw `index` of problem `name`'s space, uniform (log-uniform on log scales), as random
    search draws."""
    rng = random.Random(f"{name}/{index}")
    params = {}
    for key, (kind, lo, hi, scale) in problem(name)[5].items():
        if kind == "bool":
            params[key] = rng.random() < 0.5
        elif scale == "log":
            v = math.exp(rng.uniform(math.log(lo), math.log(hi)))
            params[key] = min(hi, max(lo, round(v))) if kind == "int" else v
        elif kind == "int":
            params[key] = rng.randint(lo, hi)
        else:
            params[key] = rng.uniform(lo, hi)
    return params


def _draw_loss(job):
    name, index = job
    try:
        return _loss(name, draw(name, index))
    except Exception:  # a configuration the estimator refuses
        return math.inf


def draws(args):
    from multiprocessing import Pool
    names = problems_of(args.problems)
    out = {}
    if os.path.exists(args.out):
        with open(args.out) as f:
            out = json.load(f)["losses"]
    with Pool(args.jobs) as pool:
        for i, name in enumerate(names):
            if len(out.get(name, [])) >= args.draws:
                continue
            start = time.time()
            out[name] = pool.map(_draw_loss, [(name, k) for k in range(args.draws)])
            finite = sorted(x for x in out[name] if math.isfinite(x))
            print(f"[{i + 1}/{len(names)}] {name:28s} median {finite[len(finite) // 2]:.4g} "
                  f"best {finite[0]:.4g} ({time.time() - start:.0f} s)", flush=True)
            with open(args.out, "w") as f:
                json.dump({"draws": args.draws, "losses": out}, f)
    print(f"wrote {args.out}")


# ---- the methods ---------------------------------------------------------------------------

def study_yaml(name, seed, budget, parallel, sock):
    lines = [f"name: {name.replace('_', '-')}-s{seed}-p{parallel}",
             "objective: {metric: loss, direction: minimize}", "search_space:"]
    for key, (kind, lo, hi, scale) in problem(name)[5].items():
        if kind == "bool":
            lines.append(f"  {key}: {{type: categorical, values: [true, false]}}")
            continue
        bounds = f"low: {lo}, high: {hi}" if kind == "int" else f"low: {lo!r}, high: {hi!r}"
        lines.append(f"  {key}: {{type: {kind}, {bounds}{', log: true' if scale == 'log' else ''}}}")
    args = " ".join(f"{k}={{{k}}}" for k in problem(name)[5])
    lines += [f"trial: {{command: \"/usr/bin/python3 {os.path.abspath(__file__)} eval {sock} "
              f"{name} {args}\"}}",
              f"tuner: {{seed: {seed}}}",
              f"budget: {{max_trials: {budget}, max_parallel: {parallel}, "
              f"max_failed: {budget}}}"]
    return "\n".join(lines) + "\n"


def run_hyperpack(hyperpack, name, seed, budget, parallel, sock, work):
    stem = os.path.join(work, f"{name}-{seed}-{parallel}")
    with open(stem + ".yaml", "w") as f:
        f.write(study_yaml(name, seed, budget, parallel, sock))
    subprocess.run([hyperpack, "run", stem + ".yaml", "--storage", stem + ".db", "--progress",
                    "quiet"], check=True, stdout=subprocess.DEVNULL)
    out = subprocess.run([hyperpack, "trials", f"{name.replace('_', '-')}-s{seed}-p{parallel}",
                          "--json", "--storage", stem + ".db"], check=True, capture_output=True,
                         text=True).stdout
    trials = sorted(json.loads(out), key=lambda t: t["trial"])
    return ([t["value"] if t.get("value") is not None else math.inf for t in trials],
            [t["params"] for t in trials])


def optuna_distributions(optuna, name):
    """Problem `name`'s space as Optuna's distributions (under the caller's Optuna)."""
    d = optuna.distributions
    return {key: (d.CategoricalDistribution([True, False]) if kind == "bool"
                  else d.IntDistribution(lo, hi, log=scale == "log") if kind == "int"
                  else d.FloatDistribution(lo, hi, log=scale == "log"))
            for key, (kind, lo, hi, scale) in problem(name)[5].items()}


def optuna_worker(args):
    """One Optuna study (under this python's Optuna): its losses in the order they were told."""
    import warnings
    warnings.simplefilter("ignore")
    import optuna
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    batch = args.parallel > 1
    if args.method == "gp5":
        sampler = optuna.samplers.GPSampler(seed=args.seed)
    elif args.method == "tpe5":
        sampler = optuna.samplers.TPESampler(seed=args.seed)
    elif args.method == "tpe31":
        sampler = optuna.samplers.TPESampler(seed=args.seed, constant_liar=batch)
    else:
        sampler = optuna.samplers.RandomSampler(seed=args.seed)
    dists = optuna_distributions(optuna, args.problem)
    study = optuna.create_study(sampler=sampler)
    losses, params = [], []
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(args.parallel) as pool:
        while len(losses) < args.budget:
            trials = [study.ask(dists) for _ in range(min(args.parallel, args.budget - len(losses)))]
            results = list(pool.map(lambda t: evaluate(args.socket, args.problem, t.params),
                                    trials))
            for t, loss in zip(trials, results):
                if math.isfinite(loss):
                    study.tell(t, loss)
                else:
                    study.tell(t, state=optuna.trial.TrialState.FAIL)
                losses.append(loss)
                params.append(t.params)
    print(json.dumps({"losses": losses, "params": params}))


def run_optuna(python, method, name, seed, budget, parallel, sock):
    out = subprocess.run([python, os.path.abspath(__file__), "optuna-worker", "--method", method,
                          "--problem", name, "--seed", str(seed), "--budget", str(budget),
                          "--parallel", str(parallel), "--socket", sock],
                         check=True, capture_output=True, text=True).stdout
    told = json.loads(out.strip().splitlines()[-1])
    return [math.inf if x is None else x for x in told["losses"]], told["params"]


def run(args):
    names = problems_of(args.problems)
    modes = [int(m) for m in args.modes.split(",")]
    methods = args.methods.split(",")
    pythons = {"gp5": args.python50, "tpe5": args.python50, "tpe31": "/usr/bin/python3",
               "random": "/usr/bin/python3"}
    work = tempfile.mkdtemp(prefix="bayesmark-")
    server, sock = start_evaluator(work)
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    jobs = [(m, n, s, p) for p in modes for n in names for s in seeds for m in methods]
    results = []

    def one(job):
        method, name, seed, parallel = job
        start = time.time()
        if method == "hyperpack":
            losses, params = run_hyperpack(args.hyperpack, name, seed, args.budget, parallel, sock,
                                           work)
        else:
            losses, params = run_optuna(pythons[method], method, name, seed, args.budget, parallel,
                                        sock)
        label = args.label if method == "hyperpack" and args.label else method
        return {"method": label, "problem": name, "seed": seed, "parallel": parallel,
                "losses": losses, "params": params, "seconds": time.time() - start}

    from concurrent.futures import ThreadPoolExecutor
    try:
        with ThreadPoolExecutor(args.jobs) as pool:
            for i, r in enumerate(pool.map(one, jobs)):
                results.append(r)
                print(f"[{i + 1}/{len(jobs)}] {r['method']:10s} {r['problem']:28s} seed "
                      f"{r['seed']} x{r['parallel']}: best {min(r['losses']):.4g} "
                      f"({r['seconds']:.0f} s)", flush=True)
                with open(args.out, "w") as f:
                    json.dump({"budget": args.budget, "results": results}, f)
    finally:
        server.terminate()
    print(f"wrote {args.out}")


# ---- scoring -------------------------------------------------------------------------------

def expected_random_best(losses, n):
    """E[min of n draws with replacement from `losses`] (order statistics)."""
    xs = sorted(losses)
    m = len(xs)
    return sum(x * (((m - i) / m) ** n - ((m - i - 1) / m) ** n) for i, x in enumerate(xs))


def load_results(files, methods=None):
    """The results in `files`; only those of `methods` (a list) when given, each of which must be
    there."""
    results = []
    for path in files:
        with open(path) as f:
            results += json.load(f)["results"]
    if methods:
        missing = sorted(set(methods) - {r["method"] for r in results})
        if missing:
            sys.exit(f"--methods: no results for {', '.join(missing)} in {', '.join(files)}")
        results = [r for r in results if r["method"] in methods]
    return results


def common_results(results):
    """The results on the problems that every method ran the same number of times (a table
    over unequal sets of problems would compare the problems, not the methods)."""
    runs = {}
    for r in results:
        key = (r["method"], r["parallel"])
        runs.setdefault(r["problem"], {}).setdefault(key, 0)
        runs[r["problem"]][key] += 1
    keys = {(r["method"], r["parallel"]) for r in results}
    keep = {n for n, c in runs.items() if set(c) == keys and len(set(c.values())) == 1}
    left = sorted(set(runs) - keep)
    if left:
        print(f"left out, not run alike by every method: {', '.join(left)}")
    return [r for r in results if r["problem"] in keep]


def scorer(draw_losses, seen):
    """Bayesmark's normalised score, score(problem, loss), for the problems in `seen` (problem ->
    the losses the runs found): 100 at the best loss known (theirs and the draws'), 0 at the median
    random draw."""
    opt, median = {}, {}
    for n, losses in seen.items():
        finite = sorted(x for x in draw_losses.get(n, []) if math.isfinite(x))
        if not finite:
            sys.exit(f"no random draws of {n}: run `draws` for it first")
        opt[n] = min(list(losses) + finite)
        median[n] = finite[len(finite) // 2]

    def score(n, best):
        span = median[n] - opt[n]
        return 100.0 * (1.0 - (best - opt[n]) / span) if span > 0 else 100.0

    return score


def score_table(results, draw_losses, checkpoints, by_model=False, by_problem=False, paired=None):
    results = common_results(results)
    names = sorted({r["problem"] for r in results})
    score = scorer(draw_losses, {n: [x for r in results if r["problem"] == n for x in r["losses"]]
                                 for n in names})
    methods = sorted({r["method"] for r in results})
    table = {}
    for parallel in sorted({r["parallel"] for r in results}):
        rows = {}
        for m in methods:
            rs = [r for r in results if r["method"] == m and r["parallel"] == parallel]
            if rs:
                rows[m] = {c: [score(r["problem"], min(r["losses"][:c])) for r in rs]
                           for c in checkpoints}
        rows["random (expected)"] = {
            c: [score(n, expected_random_best([x for x in draw_losses[n] if math.isfinite(x)], c))
                for n in names] for c in checkpoints}
        table[parallel] = rows
        print(f"\nmax_parallel {parallel}: mean normalised score over {len(names)} problems "
              f"(100 = best known, 0 = the median random draw)")
        print(f"{'method':22s}" + "".join(f"{c:>8d}" for c in checkpoints))
        for m, row in rows.items():
            print(f"{m:22s}" + "".join(f"{sum(v) / len(v):8.1f}" for v in row.values()))
        if paired:
            differences(results, parallel, methods, paired, score, checkpoints)
        if by_model or by_problem:
            breakdown(results, parallel, methods, names, score, checkpoints[-1], by_problem,
                      rows["random (expected)"][checkpoints[-1]])
    return table


def differences(results, parallel, methods, ref, score, checkpoints):
    """Each method's score minus `ref`'s on the same problem and seed: the mean over those pairs
    and its standard error."""
    runs = {(r["method"], r["problem"], r["seed"]): r for r in results if r["parallel"] == parallel}
    print(f"\n  minus {ref}, paired by problem and seed (mean +- standard error)")
    for m in methods:
        if m == ref:
            continue
        keys = [(p, s) for (mm, p, s) in runs if mm == m and (ref, p, s) in runs]
        if len(keys) < 2:
            continue
        cells = []
        for c in checkpoints:
            d = [score(p, min(runs[(m, p, s)]["losses"][:c]))
                 - score(p, min(runs[(ref, p, s)]["losses"][:c])) for p, s in keys]
            mean = sum(d) / len(d)
            se = (sum((x - mean) ** 2 for x in d) / (len(d) - 1) / len(d)) ** 0.5
            cells.append(f"{mean:+6.1f} +-{se:4.1f}")
        print(f"  {m:20s}" + "".join(f"{x:>16s}" for x in cells) + f"   ({len(keys)} pairs)")


def breakdown(results, parallel, methods, names, score, n, by_problem, random_scores):
    """Each method's mean score at `n` by model (or problem), beside random search's expected
    score there (`random_scores`, one per problem in `names`): the issue's floor per family."""
    random_of = dict(zip(names, random_scores))
    groups = {}
    for name in names:
        groups.setdefault(name if by_problem else name.split("_")[0], []).append(name)
    print(f"\n  at {n}, by {'problem' if by_problem else 'model'} (mean over its problems and "
          "seeds)")
    print(f"  {'':28s}" + "".join(f"{m:>12s}" for m in methods) + f"{'random':>12s}")
    for group, members in sorted(groups.items()):
        cells = []
        for m in methods:
            v = [score(r["problem"], min(r["losses"][:n])) for r in results
                 if r["method"] == m and r["parallel"] == parallel and r["problem"] in members]
            cells.append(f"{sum(v) / len(v):12.1f}" if v else f"{'':12s}")
        floor = sum(random_of[name] for name in members) / len(members)
        print(f"  {group:28s}" + "".join(cells) + f"{floor:12.1f}")


def split(_):
    names = list(PROBLEMS)
    random.Random(46).shuffle(names)
    half = len(names) // 2
    out = {"seed": 46, "dev": sorted(names[:half]), "check": sorted(names[half:]),
           "check24": sorted(names[half:half + 24])}
    if os.path.exists(SPLIT_FILE):
        sys.exit(f"{SPLIT_FILE} exists: the split is made once")
    with open(SPLIT_FILE, "w") as f:
        json.dump(out, f, indent=1)
    print(json.dumps(out, indent=1))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("draws")
    d.add_argument("--problems", default="all")
    d.add_argument("--draws", type=int, default=200)
    d.add_argument("--jobs", type=int, default=2)
    d.add_argument("--out", default=os.path.join(HERE, "data", "bayesmark_draws.json"))
    r = sub.add_parser("run")
    r.add_argument("--problems", default="dev")
    r.add_argument("--seeds", type=int, default=3)
    r.add_argument("--first-seed", type=int, default=0)
    r.add_argument("--budget", type=int, default=64)
    r.add_argument("--modes", default="1,8")
    r.add_argument("--methods", default="hyperpack,gp5,tpe5,tpe31")
    r.add_argument("--hyperpack", default=os.path.abspath("build/cli/hyperpack"))
    r.add_argument("--python50", default=None, help="a python with Optuna 5.0")
    r.add_argument("--jobs", type=int, default=2)
    r.add_argument("--out", default="bayesmark.json")
    r.add_argument("--label", help="the name hyperpack's results go by (comparing builds)")
    t = sub.add_parser("table")
    t.add_argument("files", nargs="+")
    t.add_argument("--draws", default=os.path.join(HERE, "data", "bayesmark_draws.json"))
    t.add_argument("--checkpoints", default="16,32,64")
    t.add_argument("--by-model", action="store_true")
    t.add_argument("--by-problem", action="store_true")
    t.add_argument("--methods", help="only these methods' results (comma-separated), for files "
                                      "that hold more")
    t.add_argument("--paired", metavar="METHOD",
                   help="also each method's difference from METHOD's, problem by problem and seed "
                        "by seed")
    sub.add_parser("split")
    s = sub.add_parser("serve")
    s.add_argument("socket")
    e = sub.add_parser("eval")
    e.add_argument("socket")
    e.add_argument("problem")
    e.add_argument("params", nargs="*")
    w = sub.add_parser("optuna-worker")
    for flag in ("--method", "--problem", "--socket"):
        w.add_argument(flag, required=True)
    for flag in ("--seed", "--budget", "--parallel"):
        w.add_argument(flag, type=int, required=True)
    a = p.parse_args()
    if a.command == "run":
        if any(m in ("gp5", "tpe5") for m in a.methods.split(",")) and not a.python50:
            sys.exit("gp5 and tpe5 need --python50 (../shared/tools/optuna-python 5.0)")
        run(a)
    elif a.command == "draws":
        draws(a)
    elif a.command == "table":
        with open(a.draws) as f:
            losses = json.load(f)["losses"]
        methods = a.methods.split(",") if a.methods else None
        score_table(load_results(a.files, methods), losses,
                    tuple(int(c) for c in a.checkpoints.split(",")), a.by_model, a.by_problem,
                    a.paired)
    elif a.command == "split":
        split(a)
    elif a.command == "serve":
        serve(a.socket)
    elif a.command == "optuna-worker":
        optuna_worker(a)
    else:
        params = dict(kv.split("=", 1) for kv in a.params)
        loss = evaluate(a.socket, a.problem, params)
        if math.isfinite(loss):
            print(json.dumps({"loss": loss}), flush=True)
        else:
            sys.exit("the evaluator could not score this configuration")


if __name__ == "__main__":
    main()
