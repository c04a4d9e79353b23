"""hyperpack for Python.

hyperpack's tuner (Gaussian-process Bayesian optimisation, the `gp` of a study file) for programs
written in Python. The one most people want:

    import optuna
    import hyperpack.optuna
    study = optuna.create_study(sampler=hyperpack.optuna.GPSampler(seed=0))

`hyperpack.load_study(name, storage)` opens a study that hyperpack stores (one `hyperpack run`
runs, or one made with `hyperpack.create_study(FILE)` whose trials this program evaluates):
`study.ask()`, `study.tell(trial, value)`, `study.heartbeat(trial)`, `study.best_trial`, `study.trials`, and the lifecycle
verbs (`study.stop()`, `enqueue`, `add_results`, ...) as the command line has them.

`hyperpack.Tuner` is the tuner itself, as `hyperpack.optuna.GPSampler` drives it.
`hyperpack.report(step=..., **metrics)` is for a trial program that `hyperpack run` starts: it
prints the JSON line hyperpack reads, and flushes it.
"""

import dataclasses
import json
import os
import sys
from typing import Any, Dict, List, Optional

from hyperpack._hyperpack import Study as _Study
from hyperpack._hyperpack import Tuner

__all__ = ["Study", "Trial", "Tuner", "create_study", "load_study", "report"]


@dataclasses.dataclass(frozen=True)
class Trial:
    """One trial of a stored study: its number, state ("running", "completed", "pruned",
    "failed", ...), value (None until it has one) and parameters."""

    number: int
    state: str
    value: Optional[float]
    params: Dict[str, Any]


def _storage(storage):
    return storage or os.environ.get("HYPERPACK_STORAGE") or "hyperpack.db"


class Study:
    """A study in hyperpack's storage (a SQLite file, postgresql://..., memory://NAME).

    Every call reads or writes the storage afresh, so several programs (and `hyperpack run`)
    may use one study at once. Errors: KeyError for what is not there, ValueError for bad input,
    RuntimeError for the rest (a study that a runner holds is not asked, for one).
    """

    def __init__(self, impl):
        self._impl = impl

    @property
    def name(self) -> str:
        return self._impl.name

    @property
    def storage(self) -> str:
        return self._impl.storage

    def ask(self) -> Trial:
        """Reserves the next trial: an enqueued configuration, else the tuner's proposal."""
        number, params = self._impl.ask()
        return Trial(number, "running", None, json.loads(params))

    def tell(self, trial, value: Optional[float] = None, *, state: Optional[str] = None,
             step: Optional[int] = None, values: Optional[Dict[str, float]] = None) -> None:
        """Records how an asked trial ended: its value (completed), or a state ("failed",
        "infeasible"; "pruned" with the value at `step`). A study with several objectives or
        constraints is told `values`, each one's value by metric, instead of `value`."""
        number = trial.number if isinstance(trial, Trial) else int(trial)
        if state is None:
            state = "completed" if value is not None or values else "failed"
        self._impl.tell(number, state, None if value is None else float(value), step,
                        {k: float(v) for k, v in (values or {}).items()})

    def heartbeat(self, trial) -> None:
        """Says that an asked trial is still being evaluated. A study with `ask_timeout:` fails
        an asked trial that is neither told nor sent a heartbeat within it, and asks its
        configuration again; call this more often than that while the trial runs."""
        self._impl.heartbeat(trial.number if isinstance(trial, Trial) else int(trial))

    @property
    def trials(self) -> List[Trial]:
        return [Trial(n, s, v, json.loads(p)) for n, s, v, p in self._impl.trials()]

    @property
    def best_trial(self) -> Optional[Trial]:
        """The trial `hyperpack best` names: the best that meets the study's constraints; in a
        study with `budget: {finalists: K}`, once a finalist has completed, the first run of the
        configuration with the best mean of its runs (the best single run where the re-runs
        returned their first runs' values exactly). None before a trial has completed."""
        best = self._impl.best()
        if best is None:
            return None
        n, s, v, p = best[0]
        return Trial(n, s, v, json.loads(p))

    @property
    def best_value(self) -> Optional[float]:
        """best_trial's value, or with finalists its configuration's mean (best_runs runs)."""
        best = self._impl.best()
        return None if best is None else best[1]

    @property
    def best_runs(self) -> int:
        """How many runs best_value is the mean of: 1 unless finalists re-ran it (0: none yet)."""
        best = self._impl.best()
        return 0 if best is None else best[2]

    @property
    def best_params(self) -> Optional[Dict[str, Any]]:
        best = self.best_trial
        return None if best is None else best.params

    def recommend(self) -> Trial:
        """The trial `hyperpack best --by-model` names: where one training's value is a noisy
        draw, the completed trial whose configuration a Gaussian process fitted to all of them
        (a noise term learnt) predicts best, among the five best single runs, rather than the
        best single run. Raises RuntimeError with fewer than 8 completed trials, several
        objectives or values all equal; KeyError before any trial has completed."""
        (n, s, v, p), _noise_share = self._impl.recommend()
        return Trial(n, s, v, json.loads(p))

    # ---- The lifecycle verbs: each returns what came of it, or raises RuntimeError when refused.
    def _control(self, verb, **kw) -> str:
        refused, outcome = self._impl.control(verb, **kw)
        if refused:
            raise RuntimeError(f"{verb} refused: {outcome}")
        return outcome

    def stop(self) -> str:
        return self._control("stop")

    def cancel(self) -> str:
        return self._control("cancel")

    def pause(self) -> str:
        return self._control("pause")

    def resume(self) -> str:
        return self._control("resume")

    def update(self, *, max_trials: Optional[int] = None, max_parallel: Optional[int] = None,
               time_limit_s: Optional[float] = None, priority: Optional[float] = None) -> str:
        """Changes a running study's budget (time_limit_s counts from its run's start) or its
        weight on a shared server; without a runner, kept for its next run."""
        return self._control("update", max_trials=max_trials, max_parallel=max_parallel,
                             time_limit_s=time_limit_s, priority=priority)

    def enqueue(self, params) -> str:
        """Runs these configurations next: a dict of parameters, or a list of them."""
        return self._control("enqueue", params_json=json.dumps(params))

    def add_results(self, results) -> str:
        """Results evaluated elsewhere: a list of (params, value) pairs or of
        {"params": ..., "value": ...} dicts, learnt as completed trials."""
        rows = [r if isinstance(r, dict) else {"params": r[0], "value": r[1]} for r in results]
        return self._control("add-results", results_text=json.dumps(rows),
                             results_path="add_results()")


def load_study(name: str, storage: Optional[str] = None) -> Study:
    """The stored study `name` (storage: a path or URL; default $HYPERPACK_STORAGE, else
    ./hyperpack.db). KeyError when there is none."""
    return Study(_Study(name, _storage(storage)))


def create_study(path: str, storage: Optional[str] = None) -> Study:
    """Stores the study file at `path` (it needs no trial: section) and returns it; one already
    stored under its name is returned when its space and objective are the same."""
    storage = _storage(storage)
    return Study(_Study(_Study.create(path, storage), storage))


def report(step=None, *, file=None, **metrics):
    """Reports metrics to the hyperpack run that started this program.

    One JSON line on standard output (or `file`), flushed at once, so that pruning sees it while
    the program runs: {"step": 3, "loss": 0.41, "accuracy": 0.87}. Values must be numbers; NaN and
    infinities are written as hyperpack reads them (NaN, Infinity).

        hyperpack.report(step=epoch, val_loss=val_loss, accuracy=acc)
    """
    line = {}
    if step is not None:
        if isinstance(step, bool) or not isinstance(step, int):
            raise TypeError(f"step must be an int (got {step!r})")
        line["step"] = step
    for name, value in metrics.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"metric '{name}' must be a number (got {value!r})")
        line[name] = value  # json writes NaN and Infinity bare, as hyperpack reads them
    if not metrics:
        raise TypeError("report() needs at least one metric, e.g. report(step=1, loss=0.5)")
    out = file or sys.stdout
    out.write(json.dumps(line) + "\n")
    out.flush()
