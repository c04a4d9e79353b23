#!/usr/bin/python3
"""Simple regret of Optuna's samplers on the test functions of bench/functions.h.

    /usr/bin/python3 bench/optuna_regret.py --sampler tpe|gp|random|hyperpack [--functions branin,...]
        [--seeds 20] [--evals 100] [--batch 1] [--json]

The counterpart of tuner_regret for Optuna: the same functions over the same spaces (same
bounds, log scales and types), seeds 0 .. seeds-1 given to the sampler, sequential ask/tell for
`evals` trials. It prints, at 25, 50 and 100 evaluations (those within the budget) and at the
budget itself, the median and quartiles over seeds of the simple regret (best so far - global
minimum), as a table or, with --json, one JSON object per function and checkpoint with the keys
tuner_regret writes. `--sampler hyperpack` is hyperpack's tuner inside Optuna
(hyperpack.optuna.GPSampler, the Python module; PYTHONPATH=build/python). The time of a proposal is that of study.ask() plus the suggest_* calls (where
Optuna's samplers do their work); that of an observation is study.tell().

The function definitions need only the standard library, so that tests can import this file as a
module without Optuna; tests/bench_functions_test.cc checks them against the C++ ones.
"""

import argparse
import json
import math
import sys
import time

# ---- the test functions (see bench/functions.h for the formulas) ---------------------------


class Param:
    """One search-space parameter: 'float', 'int' or 'categorical'."""

    def __init__(self, name, kind, low=None, high=None, log=False, choices=None):
        self.name = name
        self.kind = kind
        self.low = low
        self.high = high
        self.log = log
        self.choices = choices


class TestFunction:
    def __init__(self, name, params, f_min, argmin, evaluate):
        self.name = name
        self.params = params
        self.f_min = f_min
        self.argmin = argmin  # one global minimiser, as a dict of parameter values
        self.evaluate = evaluate  # dict of parameter values -> float


def branin(x1, x2):
    b = 5.1 / (4.0 * math.pi * math.pi)
    c = 5.0 / math.pi
    t = 1.0 / (8.0 * math.pi)
    q = x2 - b * x1 * x1 + c * x1 - 6.0
    return q * q + 10.0 * (1.0 - t) * math.cos(x1) + 10.0


_H_ALPHA = [1.0, 1.2, 3.0, 3.2]
_H_A = [[10, 3, 17, 3.5, 1.7, 8],
        [0.05, 10, 17, 0.1, 8, 14],
        [3, 3.5, 1.7, 10, 17, 8],
        [17, 8, 0.05, 10, 0.1, 14]]
_H_P = [[1312, 1696, 5569, 124, 8283, 5886],
        [2329, 4135, 8307, 3736, 1004, 9991],
        [2348, 1451, 3522, 2883, 3047, 6650],
        [4047, 8828, 8732, 5743, 1091, 381]]


def hartmann6(x):
    total = 0.0
    for i in range(4):
        inner = 0.0
        for j in range(6):
            d = x[j] - _H_P[i][j] * 1e-4
            inner += _H_A[i][j] * d * d
        total += _H_ALPHA[i] * math.exp(-inner)
    return -total


def ackley(x):
    n = float(len(x))
    squares = sum(xi * xi for xi in x)
    cosines = sum(math.cos(2.0 * math.pi * xi) for xi in x)
    return (-20.0 * math.exp(-0.2 * math.sqrt(squares / n)) - math.exp(cosines / n) + 20.0
            + math.e)


def levy(x):
    w = [1.0 + (xi - 1.0) / 4.0 for xi in x]
    f = math.sin(math.pi * w[0]) ** 2
    for wi in w[:-1]:
        f += (wi - 1.0) ** 2 * (1.0 + 10.0 * math.sin(math.pi * wi + 1.0) ** 2)
    f += (w[-1] - 1.0) ** 2 * (1.0 + math.sin(2.0 * math.pi * w[-1]) ** 2)
    return f


def rosenbrock(x):
    return sum(100.0 * (x[i + 1] - x[i] * x[i]) ** 2 + (x[i] - 1.0) ** 2
               for i in range(len(x) - 1))


# Per optimizer: log10(lr) and log2(batch) at its optimum, and its best value.
_MIXED_OPTIMA = {"sgd": (-1.0, 5.0, 0.25), "adam": (-3.0, 7.0, 0.0), "rmsprop": (-2.5, 9.0, 0.1)}


def mixed(lr, batch, optimizer, dropout):
    u_star, v_star, offset = _MIXED_OPTIMA[optimizer]
    du = math.log10(lr) - u_star
    dv = (math.log2(batch) - v_star) / 2.0
    s = math.sin(math.pi * du)
    dd = dropout - 0.25
    return offset + du * du - 1.6 * du * dv + dv * dv + 0.3 * s * s + 2.0 * dd * dd


def stump5(x):
    if x[0] > 0.8:
        return 0.4
    a, b, c = x[1] - 0.3, x[2] - 0.7, x[3] - 0.5
    v = 0.25 + 0.3 * x[0] + 1.2 * (a * a + b * b + c * c)
    return 0.02 * math.floor(v / 0.02)


def ledge2(c, s):
    u, w = (math.log10(c) + 2.0) / 4.0, (math.log10(s) + 2.0) / 4.0
    step, half_width = 0.007, 0.0125
    d = w - (0.58 + 0.07 * min(max((u - 0.40) / 0.32, 0.0), 1.0))
    if u >= 0.72 and abs(d) <= half_width:
        v = 2 * step
    elif u >= 0.40 and abs(d) <= half_width:
        v = 3 * step
    elif abs(u - 0.38) <= 0.05 or (u > 0.38 and 0 < d <= 0.1):
        v = 4 * step
    else:
        e = abs(u - 0.38) - 0.05  # positive here: off the plateau's width
        v = 4 * step + 0.5 * e * e + 0.01 * w + 1e-9
    return step * math.ceil(v / step - 1e-9)


def _box(d, low, high):
    return [Param("x%d" % (i + 1), "float", low, high) for i in range(d)]


def _vector(params, d):
    return [params["x%d" % (i + 1)] for i in range(d)]


def _point(x):
    return {"x%d" % (i + 1): v for i, v in enumerate(x)}


FUNCTIONS = {f.name: f for f in [
    TestFunction("branin", [Param("x1", "float", -5.0, 10.0), Param("x2", "float", 0.0, 15.0)],
                 10.0 / (8.0 * math.pi), {"x1": math.pi, "x2": 2.275},
                 lambda p: branin(p["x1"], p["x2"])),
    TestFunction("hartmann6", _box(6, 0.0, 1.0), -3.322368011415512,
                 _point([0.20168952, 0.15001069, 0.47687398, 0.27533243, 0.31165162, 0.65730054]),
                 lambda p: hartmann6(_vector(p, 6))),
    TestFunction("ackley5", _box(5, -32.768, 32.768), 0.0, _point([0.0] * 5),
                 lambda p: ackley(_vector(p, 5))),
    TestFunction("levy10", _box(10, -10.0, 10.0), 0.0, _point([1.0] * 10),
                 lambda p: levy(_vector(p, 10))),
    TestFunction("rosenbrock4", _box(4, -5.0, 10.0), 0.0, _point([1.0] * 4),
                 lambda p: rosenbrock(_vector(p, 4))),
    TestFunction("mixed",
                 [Param("lr", "float", 1e-5, 1.0, log=True),
                  Param("batch", "int", 16, 1024, log=True),
                  Param("optimizer", "categorical", choices=["sgd", "adam", "rmsprop"]),
                  Param("dropout", "float", 0.0, 0.8)],
                 0.0, {"lr": 1e-3, "batch": 128, "optimizer": "adam", "dropout": 0.25},
                 lambda p: mixed(p["lr"], p["batch"], p["optimizer"], p["dropout"])),
    TestFunction("stump5", _box(5, 0.0, 1.0), 0.02 * 12, _point([0.0, 0.3, 0.7, 0.5, 0.5]),
                 lambda p: stump5(_vector(p, 5))),
    TestFunction("ledge2", [Param("c", "float", 1e-2, 1e2, log=True),
                            Param("s", "float", 1e-2, 1e2, log=True)],
                 0.014, {"c": 10.0 ** (0.85 * 4 - 2), "s": 10.0 ** (0.65 * 4 - 2)},
                 lambda p: ledge2(p["c"], p["s"])),
]}

# ---- the harness ----------------------------------------------------------------------------


def quantile(sorted_values, q):
    """Linear interpolation between order statistics (numpy's default; as tuner_regret)."""
    h = (len(sorted_values) - 1) * q
    lo = int(math.floor(h))
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (h - lo) * (sorted_values[hi] - sorted_values[lo])


def checkpoints(evals):
    out = [c for c in (25, 50, 100) if c <= evals]
    if not out or out[-1] != evals:
        out.append(evals)
    return out


def suggest(trial, param):
    if param.kind == "float":
        return trial.suggest_float(param.name, param.low, param.high, log=param.log)
    if param.kind == "int":
        return trial.suggest_int(param.name, param.low, param.high, log=param.log)
    return trial.suggest_categorical(param.name, param.choices)


def make_sampler(optuna, name, seed):
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    if name == "gp":
        if not hasattr(optuna.samplers, "GPSampler"):
            sys.exit("optuna_regret: --sampler gp: Optuna %s has no GPSampler (3.6 and later "
                     "have it; tests/python/optuna_python 5.0 gives one)" % optuna.__version__)
        return optuna.samplers.GPSampler(seed=seed)
    if name == "hyperpack":
        import hyperpack.optuna  # the Python module: PYTHONPATH=build/python
        return hyperpack.optuna.GPSampler(seed=seed)
    return optuna.samplers.RandomSampler(seed=seed)


def run_seed(optuna, function, sampler_name, seed, evals):
    """Best value after each evaluation, and seconds spent proposing and observing."""
    study = optuna.create_study(direction="minimize",
                                sampler=make_sampler(optuna, sampler_name, seed))
    best = math.inf
    trace = []
    propose_s = observe_s = 0.0
    for _ in range(evals):
        t0 = time.perf_counter()
        trial = study.ask()
        params = {p.name: suggest(trial, p) for p in function.params}
        propose_s += time.perf_counter() - t0
        value = function.evaluate(params)
        t1 = time.perf_counter()
        study.tell(trial, value)
        observe_s += time.perf_counter() - t1
        best = min(best, value)
        trace.append(best)
    return trace, propose_s, observe_s


def run_function(optuna, function, args, rows):
    impl = "optuna-" + args.sampler
    regrets = []
    propose_s = observe_s = 0.0
    for seed in range(args.seeds):
        start = time.perf_counter()
        trace, p_s, o_s = run_seed(optuna, function, args.sampler, seed, args.evals)
        regrets.append([b - function.f_min for b in trace])
        propose_s += p_s
        observe_s += o_s
        print("optuna_regret: %s %s seed %d/%d: regret %.4g after %d in %.2fs"
              % (impl, function.name, seed + 1, args.seeds, regrets[-1][-1], args.evals,
                 time.perf_counter() - start), file=sys.stderr, flush=True)
    calls = args.seeds * args.evals
    for checkpoint in checkpoints(args.evals):
        at = sorted(r[checkpoint - 1] for r in regrets)
        row = {"impl": impl, "function": function.name, "batch": 1, "evals": checkpoint,
               "seeds": args.seeds, "median": quantile(at, 0.5), "q1": quantile(at, 0.25),
               "q3": quantile(at, 0.75), "budget": args.evals, "propose_total_s": propose_s,
               "propose_mean_s": propose_s / calls, "observe_total_s": observe_s}
        if args.json:
            print(json.dumps(row), flush=True)
        rows.append(row)


def print_table(rows, args):
    print("optuna-%s, batch 1, %d seeds, %d evaluations: simple regret (best so far - global "
          "minimum) over seeds; ms/propose is the mean time of one ask + suggest, tuner s the "
          "total time in ask, suggest and tell" % (args.sampler, args.seeds, args.evals))
    headers = ["function", "evals", "median", "q1", "q3", "ms/propose", "tuner s"]
    cells = [[r["function"], str(r["evals"]), "%.4g" % r["median"], "%.4g" % r["q1"],
              "%.4g" % r["q3"], "%.3g" % (r["propose_mean_s"] * 1e3),
              "%.3g" % (r["propose_total_s"] + r["observe_total_s"])] for r in rows]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip())
    for c in cells:
        print("  ".join([c[0].ljust(widths[0])] + [v.rjust(w) for v, w in zip(c[1:], widths[1:])]))


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="optuna_regret",
        description="Simple regret of an Optuna sampler on test functions, median and quartiles "
                    "over seeds")
    parser.add_argument("--sampler", choices=["tpe", "gp", "random", "hyperpack"], required=True)
    parser.add_argument("--functions", default=",".join(FUNCTIONS),
                        help="comma-separated: " + ",".join(FUNCTIONS))
    parser.add_argument("--seeds", type=int, default=20, help="seeds 0 .. N-1")
    parser.add_argument("--evals", type=int, default=100, help="evaluations per run")
    parser.add_argument("--batch", type=int, default=1, help="only 1: sequential ask/tell")
    parser.add_argument("--json", action="store_true",
                        help="one JSON object per function and checkpoint")
    args = parser.parse_args(argv)
    if args.batch != 1:
        parser.error("--batch: only 1 is supported (sequential ask/tell); got %d" % args.batch)
    if args.seeds < 1 or args.evals < 1:
        parser.error("--seeds and --evals must be >= 1")
    functions = []
    for name in args.functions.split(","):
        if name not in FUNCTIONS:
            parser.error("--functions: unknown function '%s'; expected one of %s"
                         % (name, ", ".join(FUNCTIONS)))
        functions.append(FUNCTIONS[name])

    try:
        import optuna
    except ImportError:
        print("optuna_regret: cannot import optuna (Debian: apt-get install python3-optuna)",
              file=sys.stderr)
        return 1
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    rows = []
    for function in functions:
        run_function(optuna, function, args, rows)
    if not args.json:
        print_table(rows, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
