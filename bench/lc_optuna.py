#!/usr/bin/env python3
"""Optuna's samplers and pruners on a table of real learning curves, side by side with hyperpack's.

A table (bench/lc_table.py) holds configurations of one space, each trained epoch by epoch, with
its validation error and the seconds of every epoch. `build/bench/asha_bench --table FILE --json
OUT` replays hyperpack's methods on it in virtual time; `run` replays Optuna's the same way, and
`table` puts both side by side as regret against the budget spent:

  PY=$(../shared/tools/optuna-python 5.0)
  $PY bench/lc_optuna.py run --table bench/data/lc_mlp-sgd-fmnist.json --seeds 20 --jobs 2 \\
      --out optuna.json
  build/bench/asha_bench --table bench/data/lc_mlp-sgd-fmnist.json --seeds 20 --threads 2 \\
      --json hyperpack.json
  python3 bench/lc_optuna.py table hyperpack.json optuna.json

The replay is asha_bench's: 8 GPUs in virtual time, one trial a GPU. Each free GPU asks the study
for a trial (study.ask over the table's space), which is served by the curve of the table's
nearest configuration (the unit cube, log dimensions in log space: bench/curve_table.h's rule). It
pays the start cost, then each epoch's recorded seconds; after every epoch it reports the error
(trial.report) and asks trial.should_prune(); a pruned trial is told PRUNED and its GPU asks for
the next. A trial trained to the table's last epoch is told COMPLETE with its final error. Events
are played in the order of their virtual time, so the pruners see the study as it stands then.
The budget and the start cost are asha_bench's defaults: 40 full runs of the table's mean
configuration on the 8 GPUs, and a tenth of a full run per start.

Regret: the final error of the best trial trained to the last epoch by then, minus the table's
best final error. `table` gives its median [quartiles] over seeds at several shares of the budget,
its mean over seeds at the whole budget (finer than the median, which moves in steps of one
validation example), and how soon each method reaches the reference method's (default gp+asha)
median regret at the whole budget. A share of the budget is read from the whole budget's runs at
that time, which is what a study given that budget does unless it acts at its budget's end (with
`budget.finalists`, hyperpack's `:fK` methods): runs of such a study given a part of the budget
(asha_bench --budget-trials 10 beside 40) may be passed too, and that share's cell is then theirs at
their end, marked *. Beside a run's trials and its full runs, in parentheses, the
distinct table configurations that served them: proposals nearest to the same configuration see
the same curve. Then how near its incumbent each method searched (each run's median distance in
the unit cube from a trial to the best trial completed before it began, over the trials begun and
over those trained to the end, the median over seeds), how often it began a trial at a bound, and
last how soon a trial first *reported*, at any epoch, an error within --report-gap of the table's
best final error, as a share of the budget: the measure of the real runs (bench/peer_fmnist.sh's
first validation accuracy of 0.90).

A table's final error is one training's draw, and among its best configurations the draw, not the
configuration, orders them (lc_table.py repeats). With lc_table.py's repeats of every configuration
of the table (bench/data/lc_FAMILY.repeats.json, two to six other seeds each, where it is shipped;
or `--repeats R.json`), `table` also scores each run's choice (its completed trial with the lowest
error seen, which is what a user would pick; for hyperpack's runs the choice their study made,
asha_bench's `choices`, which with `budget.finalists` is the best mean of a re-run configuration:
asha_bench serves a configuration's second and third runs the repeats' first two other seeds, and
`table` then judges every run by the seeds after them, or by the offsets `--judge` names) by
that configuration's mean final error over the other seeds' trainings, less the lowest such mean:
the error the choice gives when trained again, which no luck of the served draw can lower. That
is the measure methods are judged by where it exists; its last column is the best configuration
each run completed, so scored: what a perfect choice among the run's own completions would give.
`run --fresh-draws` (and asha_bench --fresh-draws) serves each further trial of a configuration,
a proposal nearest one already served, its next draw (the table's own, then the repeats' first
two other seeds, in turn) at its last epoch, where by default it sees the first trial's curve
again: a nearby configuration is a new training, whose luck a real one would not share, and a lucky
draw is not confirmed by proposals near it. Its epochs before the last are the table's (the repeats
hold other seeds' final errors only), so no pruner sees the draw coming. With `--draw-curves` too
(two other seeds' whole curves, lc_table.py repeats --curves; bench/data/lc_FAMILY.curves.json by
default), a draw is that seed's whole curve: a further trial is a whole other training, which a
pruner sees as it would. With `--rotate-draws` too, the draw a configuration is first served
turns with the run's seed ((seed + configuration) mod 3), not always the table's own: the table is
one training of each configuration, and a configuration whose one training was lucky would
otherwise be served that luck first in every run. Both replays must be run the same way; the
judge is the same.
`paired BASE VARIANT [BASE VARIANT ...]` compares two versions run on the same seeds (a change
to hyperpack, say) where medians cannot: each variant run against the base's run of the same
method and seed, both choices scored as above (other seeds' trainings) at the variant's budget
(the base, given at least as much, read at that time), the difference's mean over every pair with
its standard error, and the pairs lower, level and higher. `--strip :f3` matches a variant's
`gp:f3` to the base's `gp`. A run that completed nothing by then counts as the table's median
configuration (a draw at random).
`versus FILES --ours gp+forecast:f3` sets one of our methods against each Optuna pair where the
seeds are not the same runs (the two replays draw differently): by table and budget, the two
medians of each run's choice so scored, the gap's 95% bootstrap interval (each side's seeds drawn
again with replacement) and the shares of draws in which each side is lower, a pair being decided
where the interval leaves out zero; and pooled over the tables, the mean gap with its
standard error. The files may hold several tables; each is judged by its own repeats.
`finalists RUNS --table T` asks what a run would have chosen had it trained its k best
completions once more with the repeats' first other seed (finalists_at), both choices scored by
the mean of the seeds after it (the second alone where a file has two; `--judge` names others).
"""
import argparse
import heapq
import json
import math
import multiprocessing
import os
import random
import sys
import time

SERVED_DRAWS = 2  # asha_bench's kRerunDraws: the repeats' seeds a replay may serve
METHODS = ["tpe", "tpe+median", "tpe+sha", "tpe+hyperband", "gp", "gp+median", "gp+sha",
           "gp+hyperband", "random", "random+hyperband"]
DEFAULT_METHODS = ["tpe", "tpe+sha", "tpe+hyperband", "gp", "gp+sha", "gp+hyperband"]


def read_json(path, keys, what):
    """The JSON object in `path`, which must hold `keys`; else exit naming the file."""
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise SystemExit(f"lc_optuna: {path}: {e}")
    for key in keys:
        if not isinstance(data, dict) or key not in data:
            raise SystemExit(f"lc_optuna: {path}: no '{key}': not {what}")
    return data


def load_table(path):
    return read_json(path, ("family", "epochs", "space", "configs"),
                     "a table of bench/lc_table.py")


def coordinates(space, params):
    """`params` in the unit cube, one coordinate per parameter (bench/curve_table.cc's rule)."""
    x = []
    for p in space:
        v = min(max(float(params[p["name"]]), p["low"]), p["high"])
        if p.get("log", False):
            x.append(math.log(v / p["low"]) / math.log(p["high"] / p["low"]))
        else:
            x.append((v - p["low"]) / (p["high"] - p["low"]))
    return x


class Table:
    def __init__(self, table):
        self.space = table["space"]
        self.epochs = table["epochs"]
        self.family = table["family"]
        self.curves = table["configs"]
        self.points = [coordinates(self.space, c["params"]) for c in self.curves]
        self.best = min(c["error"][-1] for c in self.curves)
        self.mean_full_s = sum(sum(c["seconds"]) for c in self.curves) / len(self.curves)

    def nearest(self, params):
        x = coordinates(self.space, params)
        best, best_d = 0, math.inf
        for i, p in enumerate(self.points):
            d = sum((a - b) ** 2 for a, b in zip(x, p))
            if d < best_d:  # ties: the lower index
                best, best_d = i, d
        return best


def distributions(optuna, space):
    out = {}
    for p in space:
        log = bool(p.get("log", False))
        if p["type"] == "int":
            out[p["name"]] = optuna.distributions.IntDistribution(int(p["low"]), int(p["high"]),
                                                                  log=log)
        else:
            out[p["name"]] = optuna.distributions.FloatDistribution(p["low"], p["high"], log=log)
    return out


def make_study(optuna, method, seed, epochs):
    sampler_name, _, pruner_name = method.partition("+")
    if sampler_name == "tpe":
        sampler = optuna.samplers.TPESampler(seed=seed)
    elif sampler_name == "gp":
        if not hasattr(optuna.samplers, "GPSampler"):
            raise SystemExit(f"lc_optuna: Optuna {optuna.__version__} has no GPSampler "
                             "(3.6 and later): run under ../shared/tools/optuna-python 5.0")
        sampler = optuna.samplers.GPSampler(seed=seed)
    else:
        sampler = optuna.samplers.RandomSampler(seed=seed)
    if pruner_name == "sha":
        pruner = optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=3)
    elif pruner_name == "hyperband":
        pruner = optuna.pruners.HyperbandPruner(min_resource=1, max_resource=epochs,
                                                reduction_factor=3)
    elif pruner_name == "median":
        pruner = optuna.pruners.MedianPruner()
    else:
        pruner = optuna.pruners.NopPruner()
    # Named by the seed: Hyperband assigns brackets by a hash of the study's name and the trial's
    # number, so a name drawn at random (create_study's default) would make a replay differ from
    # one run to the next.
    return optuna.create_study(study_name=f"lc-seed-{seed}", direction="minimize",
                               sampler=sampler, pruner=pruner)


class Draws:
    """--fresh-draws: the k-th trial a configuration serves ends at its k-th draw, in turn (0 the
    table's own, then `draws[index]`, the repeats' seeds served), from draw (seed + index) mod 3
    with `rotate_seed` (--rotate-draws); without them, always the first.
    With `curves` (--draw-curves; by index, those seeds' whole curves) a draw is its whole curve,
    else the table's curve with its last epoch moved to the draw."""

    def __init__(self, draws, curves=None, rotate_seed=None):
        self.draws, self.curves, self.visits = draws, curves, {}
        self.rotate_seed = rotate_seed  # --rotate-draws: the run's seed

    def errors(self, index, curve):
        """The errors, epoch by epoch, that the next trial of configuration `index` is served,
        and which draw they are (0 the table's own)."""
        if self.draws is None:
            return curve["error"], 0
        k = self.visits.get(index, 0)
        self.visits[index] = k + 1
        n = len(self.draws[index]) + 1
        # --rotate-draws: the first draw turns with the seed, as asha_bench --rotate-draws.
        d = (k + (0 if self.rotate_seed is None else self.rotate_seed + index)) % n
        if not d:
            return curve["error"], 0
        if self.curves is not None:
            return self.curves[index][d - 1], d
        final = curve["error"][-1]
        return curve["error"][:-1] + [final + (self.draws[index][d - 1] - final)], d


class ReplayLog:
    """What a replay keeps of its trials, for the run's record (replay's return)."""

    def __init__(self, space, fresh=False):
        self.space = space
        self.fresh = fresh  # --fresh-draws: keep the draw each completion was served
        self.completed_draws = []
        self.trials = 0
        self.completions = []  # (virtual time, final error)
        self.completed_configs = []  # the table configuration of each completion
        self.reported = []  # (virtual time, error) each time a report beat every earlier one
        # The distinct table configurations that served the trials started and those trained to
        # the end: by default proposals nearest to the same one see the same curve.
        self.configs, self.full_configs = set(), set()
        self.begun, self.done = [], []  # (start, unit coordinates, full); (end, error, coordinates)

    def begin(self, now, params, index):
        """A trial begun; its position in `begun`."""
        self.trials += 1
        self.configs.add(index)
        self.begun.append([now, coordinates(self.space, params), False])
        return len(self.begun) - 1

    def report(self, now, error):
        if not self.reported or error < self.reported[-1][1]:
            self.reported.append([now, error])

    def complete(self, now, error, index, k, draw=0):
        self.completions.append([now, error])
        self.completed_draws.append(draw)
        self.completed_configs.append(index)
        self.full_configs.add(index)
        self.begun[k][2] = True
        self.done.append((now, error, self.begun[k][1]))

    def record(self, method, seed, seconds):
        near_started, near_full = near_incumbent(self.begun, self.done)
        out = {"method": method, "seed": seed, "trials": self.trials,
               "configs": len(self.configs), "full_configs": len(self.full_configs),
               "near_started": near_started, "near_full": near_full,
               "at_bound": at_bound(self.begun, self.space), "completions": self.completions,
               "reported": self.reported, "completed_configs": self.completed_configs,
               "seconds": seconds}
        if self.fresh:
            out["completed_draws"] = self.completed_draws
        return out


def replay(args):
    """One method on one seed: the completions (virtual time, final error) and the trials begun."""
    table_path, method, seed, budget_trials, start_cost, gpus, draws, curves, rotate = args
    import optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    table = Table(load_table(table_path))
    horizon = budget_trials * (table.mean_full_s + start_cost) / gpus
    study = make_study(optuna, method, seed, table.epochs)
    dists = distributions(optuna, table.space)
    events, order, workers = [], 0, {}
    log = ReplayLog(table.space, draws is not None)
    served = Draws(draws, curves, seed if rotate else None)
    t0 = time.perf_counter()

    def start(gpu, now):
        nonlocal order
        trial = study.ask(dists)
        index = table.nearest(trial.params)
        curve = table.curves[index]
        k = log.begin(now, trial.params, index)
        workers[gpu] = [trial, curve, 0, index, k, *served.errors(index, curve)]
        order += 1
        heapq.heappush(events, (now + start_cost + curve["seconds"][0], order, gpu))

    for gpu in range(gpus):
        start(gpu, 0.0)
    while events:
        now, _, gpu = heapq.heappop(events)
        if now > horizon:
            break
        trial, curve, epochs, index, k, errors, draw = workers[gpu]
        epochs += 1
        workers[gpu][2] = epochs
        error = errors[epochs - 1]
        log.report(now, error)
        if epochs == table.epochs:
            study.tell(trial, error)
            log.complete(now, error, index, k, draw)
            start(gpu, now)
            continue
        trial.report(error, epochs)
        if trial.should_prune():
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            start(gpu, now)
            continue
        order += 1
        heapq.heappush(events, (now + curve["seconds"][epochs], order, gpu))
    return log.record(method, seed, time.perf_counter() - t0)


NEAR_BOUND = 0.02  # asha_bench's kNearBound


def at_bound(begun, space):
    """The share of the trials begun with a unit-cube coordinate within NEAR_BOUND of its bound,
    over the numeric parameters with more than two values (a switch is always at one): how often
    a method proposes at the edge of the space (asha_bench's rule)."""
    graded = [p["type"] == "float" or p["high"] - p["low"] > 1 for p in space]
    near = [any(g and (u < NEAR_BOUND or u > 1 - NEAR_BOUND) for g, u in zip(graded, x))
            for _, x, _ in begun]
    return sum(near) / len(near) if near else None


def near_incumbent(begun, done):
    """The median distance in the unit cube from each trial begun (and each trained to the end) to
    the best trial completed before it began: how near its incumbent a method searches, and which
    trials it lets finish (asha_bench's rule); None when no trial began after a completion."""
    started, full = [], []
    for start, x, finished in begun:
        prior = [d for d in done if d[0] <= start]
        if not prior:
            continue
        incumbent = min(prior, key=lambda d: d[1])[2]
        distance = math.dist(x, incumbent)
        started.append(distance)
        if finished:
            full.append(distance)
    def median(v):
        return quantile(v, 0.5) if v else None
    return median(started), median(full)


def serving_draws(path, table, served=SERVED_DRAWS):
    """--fresh-draws: by table index, the final errors of the repeats' first `served` seeds besides
    the table's own (asha_bench --fresh-draws serves the same; the judge takes the seeds after)."""
    r, others = read_repeats(path, table.family)
    if len(others) < served:
        raise SystemExit(f"lc_optuna: {path}: --fresh-draws serves {served} seeds besides the "
                         f"table's own; the file has {len(others)} (offsets {r['offsets']})")
    by_index = {c["index"]: [c["repeats"][k] for k in others[:served]] for c in r["configs"]}
    return [by_index[i] for i in range(len(table.curves))]


def draw_curves(path, table, served=SERVED_DRAWS):
    """--draw-curves: by table index, the whole curves of the first `served` seeds a repeats file
    keeps them of (lc_table.py repeats --curves: its curve_offsets), each checked to hold the
    table's epochs and end at that seed's final error (asha_bench --draw-curves reads the same)."""
    r, _ = read_repeats(path, table.family)
    kept = r.get("curve_offsets") or []
    if len(kept) < served:
        raise SystemExit(f"lc_optuna: {path}: expected the whole curves of {served} seeds "
                         f"(curve_offsets {kept}): lc_table.py repeats --curves")
    curves = {}
    for c in r["configs"]:
        mine = c.get("curves") or []
        for d, o in enumerate(kept[:served]):
            e = mine[d] if d < len(mine) else []
            final = c["repeats"][r["offsets"].index(o)] if o in r["offsets"] else None
            if len(e) != table.epochs or e[-1] != final:
                raise SystemExit(f"lc_optuna: {path}: configuration {c['index']}: the curve of "
                                 f"offset {o} holds {len(e)} errors ending at "
                                 f"{e[-1] if e else None}; expected {table.epochs} ending at its "
                                 f"repeat {final}")
        curves[c["index"]] = mine[:served]
    return [curves[i] for i in range(len(table.curves))]


def run(args):
    import optuna
    table = Table(load_table(args.table))
    draws = curves = None
    for flag, given in (("draw-curves", args.draw_curves is not None),
                        ("rotate-draws", args.rotate_draws)):
        if given and not args.fresh_draws:
            raise SystemExit(f"lc_optuna: run --{flag} is a way of serving fresh draws: pass "
                             "--fresh-draws too")
    if args.fresh_draws:
        path = args.repeats or shipped_repeats(table.family)
        if path is None:
            raise SystemExit(f"lc_optuna: run --fresh-draws: no repeats of {table.family}'s table "
                             f"to serve: pass --repeats (lc_table.py repeats)")
        draws = serving_draws(path, table)
    if args.draw_curves is not None:
        curves = draw_curves(args.draw_curves or shipped_curves(table.family), table)
    methods = args.methods.split(",")
    for m in methods:
        if m not in METHODS:
            raise SystemExit(f"lc_optuna: --methods: unknown method '{m}'; expected one of "
                             + ", ".join(METHODS))
    if any(m.startswith("gp") for m in methods) and not hasattr(optuna.samplers, "GPSampler"):
        raise SystemExit(f"lc_optuna: Optuna {optuna.__version__} has no GPSampler (3.6 and "
                         "later): run under ../shared/tools/optuna-python 5.0")
    start_cost = args.start_cost if args.start_cost is not None else table.mean_full_s / 10
    horizon = args.budget_trials * (table.mean_full_s + start_cost) / args.gpus
    jobs = [(args.table, m, s, args.budget_trials, start_cost, args.gpus, draws, curves,
             args.rotate_draws)
            for m in methods for s in range(args.first_seed, args.first_seed + args.seeds)]
    runs = []
    with multiprocessing.Pool(args.jobs) as pool:
        for r in pool.imap_unordered(replay, jobs):
            runs.append(r)
            best = min((e for _, e in r["completions"]), default=math.inf)
            print(f"lc_optuna: {r['method']:<16} seed {r['seed']:2d}: best {best:.4g}, "
                  f"{r['trials']} trials ({len(r['completions'])} full), {r['seconds']:.1f}s "
                  f"[{len(runs)}/{len(jobs)}]", file=sys.stderr, flush=True)
    runs.sort(key=lambda r: (methods.index(r["method"]), r["seed"]))
    out = {"tool": f"optuna {optuna.__version__}", "family": table.family,
           "epochs": table.epochs, "gpus": args.gpus, "horizon_s": horizon,
           "start_cost_s": start_cost, "in_place": True, "best_final_error": table.best,
           "fresh_draws": draws is not None, "draw_curves": curves is not None,
           "rotate_draws": args.rotate_draws,
           "repeats_served": SERVED_DRAWS if draws else 0,
           "runs": runs}
    with open(args.out, "w") as f:
        json.dump(out, f)
    print(f"lc_optuna: {len(runs)} runs written to {args.out}", file=sys.stderr)


def quantile(values, q):
    v = sorted(values)
    h = (len(v) - 1) * q
    lo = math.floor(h)
    hi = min(lo + 1, len(v) - 1)
    if math.isinf(v[lo]) or (h > lo and math.isinf(v[hi])):
        return math.inf
    return v[lo] + (h - lo) * (v[hi] - v[lo])


def regret_at(run, t, best):
    return min((e for when, e in run["completions"] if when <= t), default=math.inf) - best


def read_repeats(path, family):
    """A repeats file of lc_table.py for every configuration of `family`'s table, checked: the
    family, every configuration, a seed besides the table's own; its contents and the positions of
    its other seeds among its offsets."""
    r = read_json(path, ("family", "offsets", "configs", "of"), "lc_table.py repeats' output")
    if r["family"] != family:
        raise SystemExit(f"lc_optuna: {path}: repeats of {r['family']}, not of {family}")
    if len(r["configs"]) != r["of"]:
        raise SystemExit(f"lc_optuna: {path}: {len(r['configs'])} of the table's {r['of']} "
                         f"configurations; --repeats needs every one (repeats --top {r['of']})")
    others = [k for k, o in enumerate(r["offsets"]) if o != 0]
    if not others:
        raise SystemExit(f"lc_optuna: {path}: no seed but the table's own (offsets {r['offsets']})")
    return r, others


def judging_seeds(path, r, others, served, judge=None):
    """The positions in r's offsets to judge by: the offsets `judge` names (a list of ints), else
    every seed besides the table's own after the first `served` of them (those the replay served
    to finalists and third runs). A judge seed may be neither the table's own nor a served one,
    which the runs saw."""
    if len(others) <= served:
        raise SystemExit(f"lc_optuna: {path}: the runs were served its first {served} other "
                         f"seeds, and it has no seed after them to judge by "
                         f"(offsets {r['offsets']})")
    if judge is None:
        return others[served:]
    seen = [r["offsets"][k] for k in others[:served]]
    picked = []
    for o in judge:
        if o == 0 or o in seen:
            raise SystemExit(f"lc_optuna: --judge {o}: " +
                             ("the table's own seed" if o == 0 else "served to the runs' "
                              "finalists") + f"; judge by offsets the runs did not see "
                             f"({','.join(str(r['offsets'][k]) for k in others[served:])})")
        if o not in r["offsets"]:
            raise SystemExit(f"lc_optuna: --judge {o}: {path} has offsets {r['offsets']}")
        picked.append(r["offsets"].index(o))
    return picked


def parse_offsets(text):
    """--judge's value: offsets, comma-separated (3,4,5,6), or a range (3-6); None if absent."""
    if text is None:
        return None
    try:
        if "-" in text:
            low, high = (int(x) for x in text.split("-"))
            out = list(range(low, high + 1))
        else:
            out = [int(x) for x in text.split(",")]
    except ValueError:
        out = []
    if not out or len(set(out)) != len(out):
        raise SystemExit(f"lc_optuna: --judge {text}: expected distinct offsets of the repeats "
                         f"file, as 3,4 or 3-6")
    return out


def read_expected(path, family, served=0, judge=None):
    """Each configuration's mean final error over a repeats file's seeds other than the table's
    own (offset 0), the error a user would get again, free of the luck of the draw the replay
    served. `served`: the replay served the first that many of those seeds too (to finalists and
    their third runs, asha_bench --repeats), so only the seeds after them judge; `judge`: the
    offsets to judge by instead (judging_seeds)."""
    r, others = read_repeats(path, family)
    served = int(served)  # runs written before third runs say true: one seed
    seeds = judging_seeds(path, r, others, served, judge)
    return {c["index"]: sum(c["repeats"][k] for k in seeds) / len(seeds) for c in r["configs"]}


def shipped_curves(family):
    """bench/data's whole curves of two other seeds of every configuration of `family`'s table
    (lc_table.py repeats --top 256 --offsets 7,8 --curves)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "data",
                        f"lc_{family}.curves.json")


def shipped_repeats(family):
    """bench/data's repeats of every configuration of `family`'s table, with other seeds than the
    table's own (lc_table.py repeats --top all --offsets 1,2); None where none is shipped."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data",
                        f"lc_{family}.repeats.json")
    return path if os.path.exists(path) else None


def expected_regret_at(run, t, expected, best):
    """The run's choice by time t, scored by `expected` (read_expected), less `best`, the lowest
    there; inf if none. The choice: hyperpack's own where the run kept it (asha_bench's choices:
    ties go to the lower trial number, and with finalists the best mean of a re-run
    configuration), else the completed trial with the lowest error seen (the first of equals)."""
    if "completed_configs" not in run:
        raise SystemExit("lc_optuna: --repeats: a run written before completed_configs were kept; "
                         "replay it again")
    if "choices" in run:  # the study's own choice (with finalists, the best mean of a re-run one)
        chosen = [c for when, c in run["choices"] if when <= t]
        return expected[chosen[-1]] - best if chosen else math.inf
    seen = [(e, k, c) for k, ((when, e), c) in
            enumerate(zip(run["completions"], run["completed_configs"])) if when <= t]
    return expected[min(seen)[2]] - best if seen else math.inf


def first_time_at(run, level, best):
    """When the run's regret first fell to `level` or below; inf if never."""
    for when, e in sorted(run["completions"]):
        if e - best <= level + 1e-12:
            return when
    return math.inf


def first_report_at(run, level):
    """When a trial of the run first reported an error of `level` or below, at any epoch; inf if
    none did; None for runs written before reports were kept."""
    if "reported" not in run:
        return None
    return next((when for when, e in run["reported"] if e <= level + 1e-12), math.inf)


def report_cell(runs, level, horizon):
    """first_report_at over seeds as shares of the budget: median [quartiles], 'never' past it."""
    times = [first_report_at(x, level) for x in runs]
    if any(t is None for t in times):
        return "?"

    def share(q):
        v = quantile([t / horizon for t in times], q)
        return fmt(v, 2) if v <= 1 else "never"
    return f"{share(0.5)} [{share(0.25)}, {share(0.75)}]"


def fmt(x, digits=3):
    return "none" if math.isinf(x) else f"{x:.{digits}g}"


def read_runs(path):
    return read_json(path, ("tool", "family", "gpus", "epochs", "horizon_s", "start_cost_s",
                            "best_final_error", "runs"),
                     "the runs of asha_bench --json or lc_optuna.py run")


def near(a, b):
    return abs(a - b) <= 1e-6 * max(1.0, abs(b))


def check_draws(path, runs, ref_path, ref):
    """Runs replayed with --fresh-draws and without, or with --draw-curves or --rotate-draws and
    without, are not the same replay: exit naming both."""
    for flag in ("fresh_draws", "draw_curves", "rotate_draws"):
        a, b = bool(runs.get(flag)), bool(ref.get(flag))
        if a != b:
            raise SystemExit(f"lc_optuna: {path} was replayed {'with' if a else 'without'} "
                             f"--{flag.replace('_', '-')} and {ref_path} "
                             f"{'with' if b else 'without'}: not the same replay; replay both "
                             f"the same way")


def budget_shares(paths, files, budgets):
    """The whole budget (the longest horizon among the files) and each file's share of it: 1, or
    one of `budgets` where a file's runs were given that part of the budget (asha_bench or `run`
    --budget-trials), as a study that ends there (its finalists at its end)."""
    ref = files[0]
    whole = max(f["horizon_s"] for f in files)
    shares = []
    for p, f in zip(paths, files):
        for key in ("family", "gpus", "epochs"):
            if f[key] != ref[key]:
                raise SystemExit(f"lc_optuna: {p}: {key} {f[key]} differs from {paths[0]}'s "
                                 f"{ref[key]}: not the same replay")
        check_draws(p, f, paths[0], ref)
        if not near(f["start_cost_s"], ref["start_cost_s"]):
            raise SystemExit(f"lc_optuna: {p}: start_cost_s {f['start_cost_s']:.6g} differs from "
                             f"{paths[0]}'s {ref['start_cost_s']:.6g}: not the same budget")
        share = next((b for b in [1.0] + budgets if near(f["horizon_s"], b * whole)), None)
        if share is None:
            raise SystemExit(f"lc_optuna: {p}: horizon_s {f['horizon_s']:.6g} is not the same "
                             f"budget as the longest ({whole:.6g}) nor one of --budgets' shares "
                             f"of it ({', '.join(f'{b:g}' for b in budgets)})")
        shares.append(share)
    return whole, shares


def group_runs(paths, files, shares):
    """Runs by method name and by their file's share of the budget (the first file's runs where
    a method and share are in two); every method needs runs of the whole budget."""
    by_method, source = {}, {}
    for path, f, share in zip(paths, files, shares):
        hyperpack = f["tool"] == "hyperpack"
        tag = "" if hyperpack else "optuna "
        where = " in place" if hyperpack and f["in_place"] else ""
        for r in f["runs"]:
            name = tag + r["method"] + where
            if source.setdefault((name, share), path) != path:
                continue  # a method in two files: the first file's runs
            by_method.setdefault(name, {}).setdefault(share, []).append(r)
    for name, by_share in by_method.items():
        if 1.0 not in by_share:
            raise SystemExit(f"lc_optuna: {name}: runs of a part of the budget only; the table "
                             f"needs its runs of the whole budget too")
    return by_method


def at_budget(by_share, b, whole):
    """The runs that say where a method stands at share b of the budget, the time to read them at,
    and whether they are studies given that budget (else the whole budget's, read at b)."""
    if b != 1.0 and b in by_share:
        return by_share[b], b * whole, True
    return by_share[1.0], b * whole, False


def table(args):
    files = [read_runs(p) for p in args.files]
    ref = files[0]
    budgets = [float(b) for b in args.budgets.split(",")]
    horizon, shares = budget_shares(args.files, files, budgets)
    best = ref["best_final_error"]
    grouped = group_runs(args.files, files, shares)
    by_method = {name: by_share[1.0] for name, by_share in grouped.items()}
    reference = by_method.get(args.reference)
    if reference is None:
        raise SystemExit(f"lc_optuna: --reference {args.reference}: no such method in the files "
                         f"({', '.join(by_method)})")
    # The upper median, a value some seed reached: at least half the reference's seeds reach it.
    regrets = sorted(regret_at(r, horizon, best) for r in reference)
    level = regrets[len(regrets) // 2]
    print(f"{ref['family']}: {ref['gpus']} GPUs, budget {horizon:.3g} s of virtual time, start "
          f"{ref['start_cost_s']:.3g} s; regret = best final error of a fully trained trial - "
          f"{best:.4g} (the table's best); median [quartiles] over seeds.")
    head = " | ".join(f"regret at {b:g} of the budget" for b in budgets)
    print(f"\n| method | seeds | {head} | mean regret at the whole budget | share of the budget to "
          f"{args.reference}'s median regret ({fmt(level, 2)}) | trials (distinct configurations) "
          f"| trained to the end (distinct) | distance to the incumbent: started, trained to the "
          f"end | started at a bound | share of the budget to a report within "
          f"{args.report_gap:g} of the best ({fmt(best + args.report_gap, 4)}) |")
    print("|---|---|" + "---|" * len(budgets) + "---|---|---|---|---|---|---|")
    for name, runs in by_method.items():
        cells = []
        for b in budgets:
            part, t, own = at_budget(grouped[name], b, horizon)
            r = [regret_at(x, t, best) for x in part]
            cells.append(f"{fmt(quantile(r, 0.5))} [{fmt(quantile(r, 0.25))}, "
                         f"{fmt(quantile(r, 0.75))}]" + ("*" if own else ""))
        reach = quantile([first_time_at(x, level, best) / horizon for x in runs], 0.5)
        mean = sum(regret_at(x, horizon, best) for x in runs) / len(runs)
        print(f"| {name} | {len(runs)} | " + " | ".join(cells) +
              f" | {fmt(mean)} | {fmt(reach, 2) if reach <= 1 else 'never'} | "
              f"{counted(runs, 'trials', 'configs')} | {counted(runs, 'full', 'full_configs')} | "
              f"{nearness(runs)} | {bound_share(runs)} | "
              f"{report_cell(runs, best + args.report_gap, horizon)} |")
    if any(len(by_share) > 1 for by_share in grouped.values()):
        print("\n\\* a study given that part of the budget, read at its end (its finalists "
              "there), not the whole budget's study read at that time.")
    repeats = shipped_repeats(ref["family"]) if args.repeats is None else args.repeats
    if repeats and repeats != "none":
        served = max(int(f.get("repeats_served") or 0) for f in files)
        judge = parse_offsets(args.judge)
        print(f"\nOther seeds' trainings of each configuration: {repeats}" +
              (f" (the first {served} served to finalists, judged by the seeds after them)"
               if served and judge is None else "") +
              (f" (judged by offsets {','.join(map(str, judge))})" if judge else ""))
        expected_table(grouped, budgets, horizon,
                       read_expected(repeats, ref["family"], served, judge))


def expected_table(grouped, budgets, horizon, expected):
    """Regret as above, with each run's choice scored by other seeds' trainings of it."""
    best = min(expected.values())
    print(f"\nThe same runs, each choice scored by its mean final error over other seeds' "
          f"trainings, less the lowest such mean ({best:.4g}):")
    head = " | ".join(f"expected regret at {b:g} of the budget" for b in budgets)
    print(f"\n| method | {head} | mean at the whole budget | the best it completed, so scored "
          f"(median at the whole budget) |")
    print("|---|" + "---|" * len(budgets) + "---|---|")
    for name, by_share in grouped.items():
        runs, cells = by_share[1.0], []
        for b in budgets:
            part, t, own = at_budget(by_share, b, horizon)
            r = [expected_regret_at(x, t, expected, best) for x in part]
            cells.append(f"{fmt(quantile(r, 0.5))} [{fmt(quantile(r, 0.25))}, "
                         f"{fmt(quantile(r, 0.75))}]" + ("*" if own else ""))
        mean = sum(expected_regret_at(x, horizon, expected, best) for x in runs) / len(runs)
        oracle = quantile([min((expected[c] for (when, _), c in
                                zip(x["completions"], x["completed_configs"]) if when <= horizon),
                               default=math.inf) - best for x in runs], 0.5)
        print(f"| {name} | " + " | ".join(cells) + f" | {fmt(mean)} | {fmt(oracle)} |")


def judge_of(args, command, family, files):
    """How `command` (paired, versus) scores a table's runs: each configuration's mean over the
    repeats' judging seeds (read_expected), the lowest such mean, and the regret that counts for
    a run that completed nothing by then (the table's median configuration's)."""
    repeats = shipped_repeats(family) if args.repeats is None else args.repeats
    if not repeats:
        raise SystemExit(f"lc_optuna: {command}: no repeats of {family}'s table to judge by: pass "
                         f"--repeats (lc_table.py repeats)")
    served = max(int(f.get("repeats_served") or 0) for f in files)
    expected = read_expected(repeats, family, served, parse_offsets(args.judge))
    best = min(expected.values())
    return expected, best, quantile([v - best for v in expected.values()], 0.5)


def paired_scores(base_path, var_path, args, judged):
    """(family, the variant's budget in seconds, base score, variant score) for each of the
    variant's runs, scored at that budget by other seeds' trainings (expected_regret_at).
    `judged` keeps each table's read repeats (and the median regret) for the next pair."""
    base, var = read_runs(base_path), read_runs(var_path)
    for key in ("family", "gpus", "epochs"):
        if base[key] != var[key]:
            raise SystemExit(f"lc_optuna: paired: {var_path}: {key} {var[key]} differs from "
                             f"{base_path}'s {base[key]}: not the same replay")
    check_draws(var_path, var, base_path, base)
    h = var["horizon_s"]
    if base["horizon_s"] < h and not near(base["horizon_s"], h):
        raise SystemExit(f"lc_optuna: paired: {base_path} was given {base['horizon_s']:.6g} s, "
                         f"less than {var_path}'s {h:.6g}: pass the base given at least as much")
    family = var["family"]
    key = (family, max(int(f.get("repeats_served") or 0) for f in (base, var)))
    if key not in judged:
        judged[key] = judge_of(args, "paired", family, (base, var))
    expected, best, unfinished = judged[key]

    def score(run):
        v = expected_regret_at(run, h, expected, best)
        return unfinished if math.isinf(v) else v
    by_key = {(r["method"], r["seed"]): r for r in base["runs"]}
    out = []
    for r in var["runs"]:
        name = r["method"]
        if args.strip and name.endswith(args.strip):
            name = name[:-len(args.strip)]
        x = by_key.get((name, r["seed"]))
        if x is None:
            raise SystemExit(f"lc_optuna: paired: {base_path} has no run of {name}, seed "
                             f"{r['seed']}, to pair with {var_path}'s {r['method']}")
        out.append((family, h, score(x), score(r)))
    return out


def mean_and_error(values):
    """The mean and its standard error (0 for a single value)."""
    m = sum(values) / len(values)
    if len(values) < 2:
        return m, 0.0
    var = sum((v - m) ** 2 for v in values) / (len(values) - 1)
    return m, math.sqrt(var / len(values))


def paired(args):
    if not args.files or len(args.files) % 2:
        raise SystemExit("lc_optuna: paired: pass files in pairs, BASE VARIANT [BASE VARIANT ...]")
    rows, judged = [], {}
    for base_path, var_path in zip(args.files[::2], args.files[1::2]):
        rows += paired_scores(base_path, var_path, args, judged)
    print("Variant minus base, each run against the base's of the same method and seed, scored by "
          "other seeds' trainings of its choice; thousandths; mean ± standard error:\n")
    print("| table | budget | pairs | base's mean | variant minus base | lower | level | higher |")
    print("|---|---|---|---|---|---|---|---|")
    # A budget as a share of the longest a table's variants were given.
    whole = {}
    for family, h, _, _ in rows:
        whole[family] = max(whole.get(family, 0), h)
    groups = {}
    for family, h, b, v in rows:
        share = f"{h / whole[family]:.3g}"
        groups.setdefault((family, share), []).append((b, v))
        groups.setdefault(("all", share), []).append((b, v))
    if len({share for _, share in groups}) > 1:
        groups[("all", "all")] = [(b, v) for _, _, b, v in rows]
    summary = []
    for (family, budget), pairs in sorted(groups.items(), key=lambda g: (g[0][0] == "all", g[0])):
        d = [1000 * (v - b) for b, v in pairs]
        m, se = mean_and_error(d)
        counts = [sum(x < -1e-9 for x in d), sum(abs(x) <= 1e-9 for x in d),
                  sum(x > 1e-9 for x in d)]
        base_mean = 1000 * sum(b for b, _ in pairs) / len(pairs)
        print(f"| {family} | {budget} | {len(d)} | {base_mean:.3f} | {m:+.3f} ± {se:.3f} | "
              + " | ".join(map(str, counts)) + " |")
        summary.append({"table": family, "budget": budget, "pairs": len(d), "base_mean": base_mean,
                        "difference": m, "standard_error": se, "lower": counts[0],
                        "level": counts[1], "higher": counts[2]})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"unit": "thousandths of regret", "rows": summary}, f, indent=1)


def versus_scores(paths, args, budgets):
    """{family: {method: {share: [each run's score]}}}: every run's choice at each share of the
    budget scored by other seeds' trainings (expected_regret_at), a run that completed nothing by
    then the table's median configuration, as `paired` scores; the files grouped by table."""
    by_family = {}
    for p in paths:
        f = read_runs(p)
        ps, fs = by_family.setdefault(f["family"], ([], []))
        ps.append(p)
        fs.append(f)
    out = {}
    for family, (ps, fs) in by_family.items():
        whole, shares = budget_shares(ps, fs, budgets)
        grouped = group_runs(ps, fs, shares)
        expected, best, unfinished = judge_of(args, "versus", family, fs)
        scores = {}
        for name, by_share in grouped.items():
            for b in budgets:
                part, t, _ = at_budget(by_share, b, whole)
                v = [expected_regret_at(x, t, expected, best) for x in part]
                scores.setdefault(name, {})[b] = [unfinished if math.isinf(s) else s for s in v]
        out[family] = scores
    return out


def median_gap(ours, theirs, draws, rng):
    """Our median less theirs, its 95% bootstrap interval (each side's seeds drawn again with
    replacement, independently: the two replays' seeds are not the same runs), and the shares of
    draws in which ours is lower and higher."""
    gap = quantile(ours, 0.5) - quantile(theirs, 0.5)
    boot = sorted(quantile([ours[rng.randrange(len(ours))] for _ in ours], 0.5) -
                  quantile([theirs[rng.randrange(len(theirs))] for _ in theirs], 0.5)
                  for _ in range(draws))
    lower = sum(g < -1e-12 for g in boot) / draws
    higher = sum(g > 1e-12 for g in boot) / draws
    return gap, (boot[int(0.025 * draws)], boot[int(0.975 * draws) - 1]), lower, higher


def bar_share(ours, theirs, draws, rng):
    """The share of bootstrap draws (each method's seeds drawn again) in which our median is
    below every one of `theirs`: how often the cell would meet a bar of 'lower than each'."""
    def median_of_draw(v):
        return quantile([v[rng.randrange(len(v))] for _ in v], 0.5)
    return sum(median_of_draw(ours) < min(median_of_draw(t) for t in theirs) - 1e-12
               for _ in range(draws)) / draws


def bar_shares(scores, ours, budgets, draws):
    """{(table, budget): bar_share of our method against every Optuna pair there}."""
    rng = random.Random(1)
    return {(family, b): bar_share(by_method[ours][b], [v[b] for m, v in by_method.items()
                                                        if m.startswith("optuna ")], draws, rng)
            for family, by_method in scores.items() for b in budgets}


def versus_rows(scores, ours, budgets, draws):
    """One row for each table, budget and Optuna pair: our method against it."""
    rng = random.Random(0)  # the same draws from one run to the next
    rows = []
    for family, by_method in scores.items():
        if ours not in by_method:
            raise SystemExit(f"lc_optuna: versus: no runs of {ours} on {family} (methods: "
                             f"{', '.join(by_method)})")
        theirs = [m for m in by_method if m.startswith("optuna ")]
        if not theirs:
            raise SystemExit(f"lc_optuna: versus: no Optuna runs of {family}: pass the files of "
                             f"`run` beside asha_bench's")
        for b in budgets:
            o = by_method[ours][b]
            for name in theirs:
                t = by_method[name][b]
                gap, (lo, hi), lower, higher = median_gap(o, t, draws, rng)
                mo, so = mean_and_error(o)
                mt, st = mean_and_error(t)
                rows.append({"table": family, "budget": b, "optuna": name[len("optuna "):],
                             "seeds": [len(o), len(t)], "ours_median": 1000 * quantile(o, 0.5),
                             "optuna_median": 1000 * quantile(t, 0.5), "median_gap": 1000 * gap,
                             "interval": [1000 * lo, 1000 * hi], "lower_share": lower,
                             "higher_share": higher, "mean_gap": 1000 * (mo - mt),
                             "mean_gap_error": 1000 * math.hypot(so, st)})
    return rows


def versus(args):
    """Our method against each Optuna pair, by table and budget (medians, their bootstrap
    interval, how often each side is lower), and pooled over the tables (the mean gap)."""
    if args.draws < 100:
        raise SystemExit("lc_optuna: versus: --draws must be >= 100")
    budgets = [float(b) for b in args.budgets.split(",")]
    scores = versus_scores(args.files, args, budgets)
    rows = versus_rows(scores, args.ours, budgets, args.draws)
    bars = bar_shares(scores, args.ours, budgets, args.draws)
    print(f"{args.ours} against each Optuna pair: each run's choice scored by other seeds' "
          f"trainings of it; thousandths of regret. A pair is decided where the 95% interval of "
          f"the gap between the medians ({args.draws} bootstrap draws) leaves out zero.\n")
    print("| table | budget | seeds | ours | Optuna's lowest median | pairs: ours lower / level / "
          "higher | decided: ours lower / Optuna's lower | the closest pair: gap [95%] | "
          "draws in which ours is below every pair |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (family, b), cell in group_by(rows, lambda r: (r["table"], r["budget"])):
        low = min(cell, key=lambda r: r["optuna_median"])
        close = max(cell, key=lambda r: (r["higher_share"], r["median_gap"]))
        counts = [sum(r["median_gap"] < -1e-9 for r in cell),
                  sum(abs(r["median_gap"]) <= 1e-9 for r in cell),
                  sum(r["median_gap"] > 1e-9 for r in cell)]
        print(f"| {family} | {b:g} | {low['seeds'][0]}, {low['seeds'][1]} | "
              f"{cell[0]['ours_median']:.3f} | {low['optuna_median']:.3f} ({low['optuna']}) | "
              f"{' / '.join(map(str, counts))} | {sum(r['interval'][1] < 0 for r in cell)} / "
              f"{sum(r['interval'][0] > 0 for r in cell)} | {close['optuna']}: "
              f"{close['median_gap']:+.3f} [{close['interval'][0]:+.3f}, "
              f"{close['interval'][1]:+.3f}] | {bars[family, b]:.2f} |")
    pooled = versus_pooled(rows)
    print("\nPooled over the tables: our mean less the pair's, each table's gap weighted alike, "
          "± its standard error; then the tables where our median is lower / level / higher.\n")
    print("| Optuna pair | " + " | ".join(f"at {b:g} of the budget" for b in budgets) + " |")
    print("|---|" + "---|" * len(budgets))
    for name, cells in group_by(pooled, lambda r: r["optuna"]):
        print(f"| {name} | " + " | ".join(
            f"{r['mean_gap']:+.3f} ± {r['mean_gap_error']:.3f}; {r['tables_lower']} / "
            f"{r['tables_level']} / {r['tables_higher']}" for r in cells) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"unit": "thousandths of regret", "ours": args.ours, "rows": rows,
                       "pooled": pooled, "cells": [{"table": t, "budget": b, "bar_share": v}
                                                   for (t, b), v in bars.items()]}, f, indent=1)


def versus_pooled(rows):
    """For each Optuna pair and budget, the tables' mean gaps averaged (errors added in
    quadrature) and the tables counted by the sign of their median gap."""
    pooled = []
    for (name, b), cell in group_by(rows, lambda r: (r["optuna"], r["budget"])):
        n = len(cell)
        pooled.append({"optuna": name, "budget": b, "tables": n,
                       "mean_gap": sum(r["mean_gap"] for r in cell) / n,
                       "mean_gap_error": math.sqrt(sum(r["mean_gap_error"] ** 2 for r in cell)) / n,
                       "tables_lower": sum(r["median_gap"] < -1e-9 for r in cell),
                       "tables_level": sum(abs(r["median_gap"]) <= 1e-9 for r in cell),
                       "tables_higher": sum(r["median_gap"] > 1e-9 for r in cell)})
    return pooled


def group_by(rows, key):
    """[(key, rows)] in the order each key first appears."""
    groups = {}
    for r in rows:
        groups.setdefault(key(r), []).append(r)
    return list(groups.items())


def finalists_at(run, t, k, full_s, start_cost, again, judge):
    """The run's choice by time t had it trained its k best completed configurations (distinct,
    by their lowest observed error) once more on k GPUs: chosen from what had completed by t less
    the longest of their runs and a start, the one with the lowest mean of its two draws (the
    served one and `again`'s) is the choice, scored by `judge`. Where nothing had completed that
    early, the plain choice at t; inf where nothing had completed by t."""
    def top(by):
        seen = sorted((e, i, c) for i, ((when, e), c) in
                      enumerate(zip(run["completions"], run["completed_configs"])) if when <= by)
        best = {}
        for e, _, c in seen:
            best.setdefault(c, e)
            if len(best) == k:
                break
        return best
    chosen = top(t)
    if not chosen:
        return math.inf
    plain = min(chosen.items(), key=lambda ce: ce[1])[0]
    for _ in range(5):  # the set fixes the time it needs, and that time the set: a few rounds
        earlier = top(t - max(full_s[c] for c in chosen) - start_cost)
        if not earlier:
            return judge[plain]
        if earlier == chosen:
            break
        chosen = earlier
    return judge[min(chosen, key=lambda c: ((chosen[c] + again[c]) / 2, c))]


def serve_and_judge(r, others, seeds=None):
    """A repeats file's configurations' re-runs for finalists: the first other seed's draw, and
    the mean of the other seeds after it (or of the positions `seeds`), which neither choice
    sees, to judge by."""
    seeds = others[1:] if seeds is None else seeds
    again = {c["index"]: c["repeats"][others[0]] for c in r["configs"]}
    judge = {c["index"]: sum(c["repeats"][k] for k in seeds) / len(seeds) for c in r["configs"]}
    return again, judge


def finalists(args):
    """Each run's choice against the same run had it trained its k best again (finalists_at):
    the re-runs drawn from the repeats' first other seed, both choices scored by the mean of the
    seeds after it (serve_and_judge)."""
    runs = read_runs(args.runs)
    t = load_table(args.table)
    if t["family"] != runs["family"]:
        raise SystemExit(f"lc_optuna: {args.table}: the table of {t['family']}, not of "
                         f"{runs['family']}")
    path = args.repeats or shipped_repeats(runs["family"])
    if not path:
        raise SystemExit(f"lc_optuna: no repeats of {runs['family']}: give --repeats")
    r, others = read_repeats(path, runs["family"])
    if len(others) < 2:
        raise SystemExit(f"lc_optuna: {path}: finalists need two seeds besides the table's own "
                         f"(offsets {r['offsets']})")
    seeds = judging_seeds(path, r, others, 1, parse_offsets(args.judge))
    again, judge = serve_and_judge(r, others, seeds)
    full_s = {i: sum(c["seconds"]) for i, c in enumerate(t["configs"])}
    best, horizon = min(judge.values()), runs["horizon_s"]
    budgets = [float(b) for b in args.budgets.split(",")]
    print(f"{runs['family']}: each run's choice, and its choice had it trained its {args.k} best "
          f"again with offset {r['offsets'][others[0]]}, scored by the mean of offsets "
          f"{','.join(str(r['offsets'][k]) for k in seeds)}, less its lowest "
          f"({best:.4g}); median over seeds (mean at the whole budget).")
    print("\n| method | " + " | ".join(f"at {b:g} of the budget: plain, finalists" for b in budgets)
          + " |")
    print("|---|" + "---|" * len(budgets))
    by_method = {}
    for x in runs["runs"]:
        by_method.setdefault(x["method"], []).append(x)
    for name, rs in by_method.items():
        cells = []
        for b in budgets:
            plain = [expected_regret_at(x, b * horizon, judge, 0) for x in rs]
            final = [finalists_at(x, b * horizon, args.k, full_s, runs["start_cost_s"], again,
                                  judge) for x in rs]
            cell = f"{fmt(quantile(plain, 0.5) - best)}, {fmt(quantile(final, 0.5) - best)}"
            if b == budgets[-1]:
                cell += (f" ({fmt(sum(plain) / len(plain) - best)}, "
                         f"{fmt(sum(final) / len(final) - best)})")
            cells.append(cell)
        print(f"| {name} | " + " | ".join(cells) + " |")


def bound_share(runs):
    """The median over runs of the share of trials begun at a bound; '?' for runs written before
    it was measured."""
    v = [x["at_bound"] for x in runs if x.get("at_bound") is not None]
    return f"{quantile(v, 0.5):.2f}" if v and all("at_bound" in x for x in runs) else "?"


def nearness(runs):
    """The median over runs of each run's median distance to its incumbent, for the trials begun
    and those trained to the end; '?' for runs written before it was measured."""
    out = []
    for key in ("near_started", "near_full"):
        v = [x[key] for x in runs if x.get(key) is not None]
        out.append(f"{quantile(v, 0.5):.2f}" if v and all(key in x for x in runs) else "?")
    return ", ".join(out)


def counted(runs, total, distinct):
    """The median count of a run's trials (or of those trained to the end, `full`) and, in
    parentheses, of the distinct table configurations that served them (runs written before
    they were counted have none)."""
    def of(run, key):
        return len(run["completions"]) if key == "full" else run[key]
    out = f"{quantile([of(x, total) for x in runs], 0.5):.0f}"
    if all(distinct in x for x in runs):
        out += f" ({quantile([x[distinct] for x in runs], 0.5):.0f})"
    return out


def add_run_parser(sub):
    r = sub.add_parser("run", help="replay Optuna's samplers and pruners on a table")
    r.add_argument("--table", required=True)
    r.add_argument("--methods", default=",".join(DEFAULT_METHODS),
                   help="comma-separated, of: " + ", ".join(METHODS))
    r.add_argument("--seeds", type=int, default=20)
    r.add_argument("--first-seed", type=int, default=0,
                   help="seeds FIRST .. FIRST+N-1, so that more seeds add to earlier runs")
    r.add_argument("--budget-trials", type=float, default=40)
    r.add_argument("--start-cost", type=float, default=None,
                   help="seconds a trial's start costs (default: a tenth of a full run's mean)")
    r.add_argument("--gpus", type=int, default=8)
    r.add_argument("--jobs", type=int, default=1)
    r.add_argument("--fresh-draws", action="store_true",
                   help="each further trial a configuration serves ends at its next draw (its last "
                   "epoch's error): the table's own, then the repeats' first two other seeds, in "
                   "turn (asha_bench --fresh-draws); default: the first trial's curve again")
    r.add_argument("--draw-curves", nargs="?", const="", metavar="FILE",
                   help="with --fresh-draws: the draws after the table's own are two other seeds' "
                   "whole curves, FILE's (lc_table.py repeats --curves; default: "
                   "bench/data/lc_FAMILY.curves.json), not the table's curve ending at the "
                   "repeats' finals (asha_bench --draw-curves)")
    r.add_argument("--rotate-draws", action="store_true",
                   help="with --fresh-draws: a configuration's first trial is served draw (seed + "
                   "configuration) mod 3, not always the table's own, the later ones the draws "
                   "after it in turn, so that over seeds no one training of the table decides "
                   "every run (asha_bench --rotate-draws)")
    r.add_argument("--repeats", help="with --fresh-draws (default: "
                   "bench/data/lc_FAMILY.repeats.json)")
    r.add_argument("--out", required=True)


def add_scoring_parsers(sub):
    """table, paired and versus: each reads the replays' --json files."""
    t = sub.add_parser("table", help="regret against budget, from --json files of both replays")
    t.add_argument("files", nargs="+")
    t.add_argument("--budgets", default="0.25,0.5,1")
    t.add_argument("--reference", default="gp+asha")
    t.add_argument("--report-gap", type=float, default=0.005,
                   help="a report this near the table's best final error counts (default 0.005)")
    t.add_argument("--repeats", help="lc_table.py repeats of every configuration of the table: "
                   "each run's choice also scored by other seeds' trainings of it (default: "
                   "bench/data/lc_FAMILY.repeats.json where it exists; 'none': not scored so)")
    t.add_argument("--judge", help="the repeats' offsets to judge by, as 3,4 or 3-6 (default: "
                   "every offset after those served to the runs' finalists)")
    pr = sub.add_parser("paired", help="a variant's runs against a base's, seed by seed")
    pr.add_argument("files", nargs="+", help="BASE VARIANT [BASE VARIANT ...]: --json files")
    pr.add_argument("--strip", default="", help="a suffix of the variant's method names to leave "
                    "out when matching the base's (:f3 matches gp:f3 to gp)")
    pr.add_argument("--repeats", help="as table's (default: bench/data/lc_FAMILY.repeats.json)")
    pr.add_argument("--judge", help="as table's: the repeats' offsets to judge by, as 3-6")
    pr.add_argument("--json", help="also write the rows here")
    v = sub.add_parser("versus", help="one of ours against each Optuna pair: medians with "
                       "bootstrap intervals by table and budget, and pooled over tables")
    v.add_argument("files", nargs="+", help="--json files of both replays, of one or more tables")
    v.add_argument("--ours", default="gp+forecast:f3", help="our method (default: %(default)s)")
    v.add_argument("--budgets", default="0.25,0.5,1")
    v.add_argument("--repeats", help="as table's (default: bench/data/lc_FAMILY.repeats.json)")
    v.add_argument("--judge", help="as table's: the repeats' offsets to judge by, as 3-6")
    v.add_argument("--draws", type=int, default=2000, help="bootstrap draws (default: %(default)s)")
    v.add_argument("--json", help="also write the rows here")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    add_run_parser(sub)
    add_scoring_parsers(sub)
    f = sub.add_parser("finalists", help="each run's choice had it trained its k best again")
    f.add_argument("runs")
    f.add_argument("--table", required=True, help="the table the runs replayed (its seconds)")
    f.add_argument("--repeats", help="lc_table.py repeats with two seeds besides the table's "
                   "(default: bench/data/lc_FAMILY.repeats.json)")
    f.add_argument("--judge", help="the repeats' offsets to judge by, as 2-4 (default: every "
                   "offset after the first other seed, which serves the re-runs)")
    f.add_argument("--k", type=int, default=3)
    f.add_argument("--budgets", default="0.5,1")
    args = ap.parse_args()
    if args.cmd == "finalists":
        if args.k < 1:
            raise SystemExit("lc_optuna: --k must be > 0")
        finalists(args)
    elif args.cmd == "run":
        if args.seeds < 1 or args.jobs < 1 or args.gpus < 1 or not args.budget_trials > 0:
            raise SystemExit("lc_optuna: --seeds, --jobs, --gpus and --budget-trials must be > 0")
        if args.first_seed < 0:
            raise SystemExit("lc_optuna: --first-seed must be >= 0")
        run(args)
    elif args.cmd == "paired":
        paired(args)
    elif args.cmd == "versus":
        versus(args)
    else:
        table(args)


if __name__ == "__main__":
    main()
