"""hyperpack for Python.

hyperpack's tuner (Gaussian-process Bayesian optimisation, the `gp` of a study file) for programs
written in Python. The one most people want:

    import optuna
    import hyperpack.optuna
    study = optuna.create_study(sampler=hyperpack.optuna.GPSampler(seed=0))

`hyperpack.Tuner` is the tuner itself, as `hyperpack.optuna.GPSampler` drives it.
`hyperpack.report(step=..., **metrics)` is for a trial program that `hyperpack run` starts: it
prints the JSON line hyperpack reads, and flushes it.
"""

import json
import sys

from hyperpack._hyperpack import Tuner

__all__ = ["Tuner", "report"]


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
