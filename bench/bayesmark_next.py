#!/usr/bin/python3
"""One step from the same history: what each tuner asks next after the first k trials of a run.

A whole Bayesmark run (bench/bayesmark.py) is one draw of a long, noisy path: two tuners that differ
a little need hundreds of runs before their difference clears its standard error. Here every tuner
is handed the same histories, the first k trials of recorded runs (by default hyperpack's, one at a
time), and asked for one configuration more; each answer is evaluated once by the same resident
evaluator. The paired differences on thousands of histories resolve what a few hundred whole runs
cannot. It measures the next step only: a tuner that explores pays now and collects later, so a
change chosen here is still judged by whole runs (`bayesmark.py run`) before it ships.

Methods: hyperpack (the CLI: `create`, `add-results` with the history, `ask`; the tuner is rebuilt
from the history, as an ask without kept state is) and gp5 (Optuna 5.0's GPSampler, seeded with the
run's seed, the history added as completed trials; under --python50).

Per history it records the proposal, its loss, the history's best loss (the incumbent) and the
proposal's distance in the unit cube (log scales in logs) to the nearest earlier trial and to the
incumbent. `table` shows, per method: the proposal's mean score (Bayesmark's normalisation, as
bayesmark.py scores a run: 100 the best loss known, 0 a median random draw), how often it beats the
incumbent, the mean gain (the score of the best after the step minus before it: what a run
collects), the median distances; with --paired, each method's differences from one method over the
same histories, with their standard errors.

Usage (PY=$(../shared/tools/sklearn-python)):
  $PY bench/bayesmark_next.py run --runs RUNS.json [--from METHOD] [--method hyperpack|gp5]
        [--hyperpack build/cli/hyperpack] [--label NAME] [--python50 P5] [--problems dev-fast]
        [--seeds 0-11] [--steps 12,16,...,56] [--jobs 2] --out NEXT.json
  $PY bench/bayesmark_next.py table NEXT.json [NEXT.json ...] [--paired NAME] [--by-model]
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

import bayesmark as bm


def unit(name, params):
    """A configuration in the unit cube of its problem's space (log scales in logs)."""
    out = []
    for key, (kind, lo, hi, scale) in bm.problem(name)[5].items():
        v = params[key]
        if kind == "bool":
            out.append(1.0 if bm.as_bool(v) else 0.0)
        elif scale == "log":
            out.append((math.log(float(v)) - math.log(lo)) / (math.log(hi) - math.log(lo)))
        else:
            out.append((float(v) - lo) / (hi - lo))
    return out


def histories(args):
    with open(args.runs) as f:
        runs = json.load(f)["results"]
    names = set(bm.problems_of(args.problems))
    first, last = (int(s) for s in args.seeds.split("-"))
    steps = [int(k) for k in args.steps.split(",")]
    out = []
    for r in runs:
        if (r["method"] != args.source or r["parallel"] != 1 or r["problem"] not in names or
                not first <= r["seed"] <= last):
            continue
        for k in steps:
            h = [(p, v) for p, v in zip(r["params"][:k], r["losses"][:k]) if math.isfinite(v)]
            if len(r["losses"]) >= k and h:
                out.append((r["problem"], r["seed"], k, h))
    if not out:
        sys.exit(f"no runs of {args.source!r} one at a time in {args.runs} for those problems")
    return out


def ask_hyperpack(binary, name, seed, history):
    with tempfile.TemporaryDirectory(prefix="next-") as work:
        spec, db = os.path.join(work, "s.yaml"), os.path.join(work, "s.db")
        with open(spec, "w") as f:
            f.write(bm.study_yaml(name, seed, len(history) + 1, 1, os.path.join(work, "none")))
        study = f"{name.replace('_', '-')}-s{seed}-p1"
        with open(os.path.join(work, "r.json"), "w") as f:
            json.dump([{"params": p, "value": v} for p, v in history], f)
        for cmd in (["create", spec], ["add-results", study, os.path.join(work, "r.json")]):
            subprocess.run([binary] + cmd + ["--storage", db], check=True, capture_output=True)
        out = subprocess.run([binary, "ask", study, "--json", "--storage", db], check=True,
                             capture_output=True, text=True).stdout
    return json.loads(out)["params"]


def ask_gp5(python, chunk):
    """The GPSampler's answers to `chunk`'s histories, from a worker under `python`."""
    payload = [(n, s, h) for n, s, _, h in chunk]
    out = subprocess.run([python, os.path.abspath(__file__), "gp5-worker"],
                         input=json.dumps(payload), check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def gp5_worker():
    """Under Optuna 5.0: for each (problem, seed, history) on stdin, the GPSampler's next
    configuration after the history, added as completed trials."""
    import warnings
    warnings.simplefilter("ignore")
    import optuna
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    out = []
    for name, seed, history in json.load(sys.stdin):
        dists = bm.optuna_distributions(optuna, name)
        study = optuna.create_study(sampler=optuna.samplers.GPSampler(seed=seed))
        for params, value in history:
            p = {k: (bm.as_bool(params[k])
                     if isinstance(d, optuna.distributions.CategoricalDistribution)
                     else int(params[k]) if isinstance(d, optuna.distributions.IntDistribution)
                     else float(params[k])) for k, d in dists.items()}
            study.add_trial(optuna.trial.create_trial(params=p, distributions=dists,
                                                      value=value))
        out.append(study.ask(dists).params)
    print(json.dumps(out))


def counted(pool, fn, items, what):
    """pool.map(fn, items), printing how many are done at each tenth."""
    items = list(items)
    done, out = [0], [None] * len(items)

    def one(i):
        out[i] = fn(items[i])
        done[0] += 1
        if done[0] % max(1, len(items) // 10) == 0 or done[0] == len(items):
            print(f"{what}: {done[0]}/{len(items)}", flush=True)

    list(pool.map(one, range(len(items))))
    return out


def run(args):
    jobs = histories(args)
    print(f"{len(jobs)} histories", flush=True)
    work = tempfile.mkdtemp(prefix="bayesmark-next-")
    server, sock = bm.start_evaluator(work)
    try:
        with ThreadPoolExecutor(args.jobs) as pool:
            if args.method == "hyperpack":
                asked = counted(pool, lambda j: ask_hyperpack(args.hyperpack, j[0], j[1], j[3]),
                                jobs, "asked")
            else:
                chunks = [jobs[i::args.jobs] for i in range(args.jobs)]
                parts = list(pool.map(lambda c: ask_gp5(args.python50, c), chunks))
                asked = [None] * len(jobs)
                for i, part in enumerate(parts):
                    asked[i::args.jobs] = part
            losses = counted(pool, lambda a: bm.evaluate(sock, a[0][0], a[1]), zip(jobs, asked),
                             "evaluated")
    finally:
        server.terminate()
    label = args.label or args.method
    out = []
    for (name, seed, k, h), params, loss in zip(jobs, asked, losses):
        u = unit(name, params)
        dist = [math.dist(u, unit(name, p)) for p, _ in h]
        best = min(range(len(h)), key=lambda i: h[i][1])
        out.append({"method": label, "problem": name, "seed": seed, "step": k, "params": params,
                    "loss": loss if math.isfinite(loss) else None, "incumbent": h[best][1],
                    "near": min(dist), "to_incumbent": dist[best]})
    with open(args.out, "w") as f:
        json.dump({"from": args.runs, "results": out}, f)
    print(f"wrote {args.out}")


def table(args):
    with open(os.path.join(bm.HERE, "data", "bayesmark_draws.json")) as f:
        draws = json.load(f)["losses"]
    rows = []
    for path in args.files:
        with open(path) as f:
            rows += json.load(f)["results"]
    by = {}
    for r in rows:
        by.setdefault(r["method"], {})[(r["problem"], r["seed"], r["step"])] = r
    keys = sorted(set.intersection(*(set(m) for m in by.values())))
    names = {k[0] for k in keys}
    seen = {n: [] for n in names}
    for r in rows:
        if r["problem"] in seen:
            seen[r["problem"]] += [v for v in (r["loss"], r["incumbent"]) if v is not None]
    score = bm.scorer(draws, seen)
    worst = {n: max(x for x in draws[n] if math.isfinite(x)) for n in names}

    def measures(r):
        """The answer's score, and the gain: the best's score after the step minus before it (an
        answer that failed counts as the worst random draw)."""
        n, loss = r["problem"], worst[r["problem"]] if r["loss"] is None else r["loss"]
        return score(n, loss), score(n, min(loss, r["incumbent"])) - score(n, r["incumbent"])

    print(f"{len(keys)} histories, {len(names)} problems")
    print(f"| method | proposal's score | beats the incumbent | gain | near | to the incumbent |"
          + (f" gain - {args.paired}'s | score - {args.paired}'s |" if args.paired else ""))
    print("|---|---|---|---|---|---|" + ("---|---|" if args.paired else ""))
    for method, m in by.items():
        s, g = zip(*(measures(m[k]) for k in keys))
        beats = [m[k]["loss"] is not None and m[k]["loss"] < m[k]["incumbent"] for k in keys]
        line = (f"| {method} | {statistics.mean(s):.1f} | {100 * statistics.mean(beats):.1f}% | "
                f"{statistics.mean(g):.2f} | {statistics.median(m[k]['near'] for k in keys):.3f} | "
                f"{statistics.median(m[k]['to_incumbent'] for k in keys):.2f} |")
        if args.paired:
            ps, pg = zip(*(measures(by[args.paired][k]) for k in keys))
            line += (f" {mean_and_error([a - b for a, b in zip(g, pg)], '.2f')} |"
                     f" {mean_and_error([a - b for a, b in zip(s, ps)], '.1f')} |")
        print(line)
    if args.by_model:
        by_model(by, keys, measures, by.get(args.paired), args.paired)


def mean_and_error(xs, fmt):
    error = statistics.stdev(xs) / math.sqrt(len(xs)) if len(xs) > 1 else 0.0
    return f"{statistics.mean(xs):+{fmt}} ± {error:{fmt}}"


def by_model(by, keys, measures, ref, ref_name):
    """The mean gain per model family; with a reference method, the paired difference from its."""
    models = sorted({k[0].split("_")[0] for k in keys})
    print("\ngain by model" + (f", minus {ref_name}'s" if ref else "") + ": " + ", ".join(models))
    for method, m in by.items():
        cells = []
        for x in models:
            of = [k for k in keys if k[0].startswith(x + "_")]
            g = [measures(m[k])[1] - (measures(ref[k])[1] if ref else 0) for k in of]
            cells.append(mean_and_error(g, ".2f") if ref else f"{statistics.mean(g):.2f}")
        print(f"{method}: " + ", ".join(cells))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--runs", required=True, help="a bayesmark.py run's JSON: the histories")
    r.add_argument("--from", dest="source", default="hyperpack",
                   help="whose runs give the histories (their method or label)")
    r.add_argument("--method", choices=("hyperpack", "gp5"), default="hyperpack")
    r.add_argument("--hyperpack", default=os.path.abspath("build/cli/hyperpack"))
    r.add_argument("--label", help="the name the answers go by (comparing builds)")
    r.add_argument("--python50", help="a python with Optuna 5.0 (for gp5)")
    r.add_argument("--problems", default="dev-fast")
    r.add_argument("--seeds", default="0-11", help="FIRST-LAST")
    r.add_argument("--steps", default="12,16,20,24,28,32,36,40,44,48,52,56")
    r.add_argument("--jobs", type=int, default=2)
    r.add_argument("--out", required=True)
    t = sub.add_parser("table")
    t.add_argument("files", nargs="+")
    t.add_argument("--paired", metavar="METHOD")
    t.add_argument("--by-model", action="store_true")
    sub.add_parser("gp5-worker")
    a = p.parse_args()
    if a.command == "run":
        if a.method == "gp5" and not a.python50:
            sys.exit("gp5 needs --python50 (../shared/tools/optuna-python 5.0)")
        run(a)
    elif a.command == "gp5-worker":
        gp5_worker()
    else:
        table(a)


if __name__ == "__main__":
    main()
