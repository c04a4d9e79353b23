#!/usr/bin/python3
"""How long one ask takes on a study that holds many trials: `hyperpack ask` against Optuna's
GPSampler, side by side.

A study of six parameters (three floats, one on a log scale; an int on a log scale; an int; a
categorical of four) holds N completed trials drawn at random (seed 0, values a smooth function of
them, as bench/optuna_ask_overhead.py draws them). Then --asks asks, each told at once:

  - hyperpack, as an ask-and-tell program uses it: `hyperpack ask STUDY` (a process that opens the
    SQLite storage, rebuilds the tuner from the trials and the state the last ask kept, proposes,
    records) and `hyperpack tell`; and the same through the Python module in one process
    (hyperpack.load_study(...).ask()). The first ask after the N trials arrive has no state yet;
  - Optuna's GPSampler (the release of the python that runs this; 5.0 for the peer users run) in
    one process with its study in memory: study.ask() and the six suggest_* calls, which refit its
    GP at every ask.

Prints the first ask and the median of the others, in seconds, for each; --json for one object.

    PYTHONPATH=build/python "$(../shared/tools/optuna-python 5.0)" bench/ask_latency.py \\
        --hyperpack build/cli/hyperpack [--trials 300] [--asks 6]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

# The study, its history and its values are optuna_ask_overhead.py's: the same six parameters.
from optuna_ask_overhead import DISTRIBUTIONS, history, value

STUDY = """name: asks
objective: {metric: loss, direction: minimize}
search_space:
  lr: {type: float, low: 1.0e-5, high: 0.1, log: true}
  dropout: {type: float, low: 0.0, high: 0.5}
  wd: {type: float, low: 0.0, high: 0.1}
  batch: {type: int, low: 16, high: 512, log: true}
  layers: {type: int, low: 1, high: 8}
  opt: {type: categorical, values: [sgd, adam, adamw, rmsprop]}
tuner: {seed: 0}
budget: {max_trials: 100000}
"""


def hyperpack_cli(binary, n, asks, work):
    db = os.path.join(work, "cli.db")
    with open(os.path.join(work, "asks.yaml"), "w") as f:
        f.write(STUDY)
    with open(os.path.join(work, "results.json"), "w") as f:
        json.dump([{"params": p, "value": value(p)} for p in history(n)], f)
    run = lambda *a: subprocess.run([binary, *a, "--storage", db], check=True,  # noqa: E731
                                    capture_output=True, text=True).stdout
    run("create", os.path.join(work, "asks.yaml"))
    run("add-results", "asks", os.path.join(work, "results.json"))
    times = []
    for _ in range(asks):
        start = time.perf_counter()
        asked = json.loads(run("ask", "asks", "--json"))
        times.append(time.perf_counter() - start)
        run("tell", "asks", str(asked["trial"]), "--value", repr(value(asked["params"])))
    return times


def hyperpack_python(binary, n, asks, work):
    import hyperpack
    db = os.path.join(work, "py.db")
    study = hyperpack.create_study(os.path.join(work, "asks.yaml"), db)
    study.add_results([(p, value(p)) for p in history(n)])
    times = []
    for _ in range(asks):
        start = time.perf_counter()
        trial = study.ask()
        times.append(time.perf_counter() - start)
        study.tell(trial, value(trial.params))
    return times


def optuna_gp(n, asks):
    import warnings
    warnings.simplefilter("ignore")
    import optuna
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    dists = DISTRIBUTIONS
    study = optuna.create_study(sampler=optuna.samplers.GPSampler(seed=0))
    for p in history(n):
        study.add_trial(optuna.trial.create_trial(params=p, distributions=dists, value=value(p)))
    times = []
    for _ in range(asks):
        start = time.perf_counter()
        trial = study.ask(dists)
        times.append(time.perf_counter() - start)
        study.tell(trial, value(trial.params))
    return times, optuna.__version__


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hyperpack", default="build/cli/hyperpack")
    ap.add_argument("--trials", type=int, default=300)
    ap.add_argument("--asks", type=int, default=6)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ask-latency-")
    rows = {"hyperpack ask (CLI)": hyperpack_cli(args.hyperpack, args.trials, args.asks, work),
            "hyperpack Study.ask (Python)": hyperpack_python(args.hyperpack, args.trials,
                                                             args.asks, work)}
    gp, release = optuna_gp(args.trials, args.asks)
    rows[f"Optuna {release} GPSampler ask"] = gp
    out = {name: {"first_s": t[0], "median_rest_s": statistics.median(t[1:])}
           for name, t in rows.items()}
    if args.json:
        print(json.dumps({"trials": args.trials, **out}))
        return
    print(f"{args.trials} trials, 6 parameters; seconds")
    print(f"{'':32s}{'first ask':>12s}{'next asks (median)':>22s}")
    for name, r in out.items():
        print(f"{name:32s}{r['first_s']:12.3f}{r['median_rest_s']:22.3f}")


if __name__ == "__main__":
    main()
