"""hyperpack's stand-in for the Weights & Biases client, so that a sweep's program runs unmodified.

hyperpack puts this package first on a trial's PYTHONPATH when its study says `trial.shim: wandb`
(as `hyperpack import --from wandb` writes). `wandb.init(config=...)` returns a run whose config is
the program's own defaults with the trial's parameters over them (from HYPERPACK_PARAMS_FILE; the
parameters win, as a sweep's do); `wandb.log({...})` and `run.summary[...] = v` print their numeric
values to stdout as JSON lines, which hyperpack reads as the trial's metrics (a nested dict's keys
joined with '/', as the charts group them). `wandb.sweep` and `wandb.agent(function=f)` call `f`
once: each hyperpack trial is one run. Media, artifacts, watching and anything else are accepted and
do nothing: nothing leaves the machine. Not thread-safe.
"""
import os
import sys

import hyperpack_shim

__version__ = "0.0.0+hyperpack"


def _numbers(data):
    return hyperpack_shim.numbers(data)


def _emit(line):
    hyperpack_shim.emit(line)


def _trial_params():
    # Nested sweep parameters, flattened by the importer, come back nested.
    return hyperpack_shim.params("HYPERPACK_WANDB_NESTED")


class Config(dict):
    """wandb.config: item and attribute access; the trial's parameters cannot be overwritten."""

    def __init__(self):
        super().__init__()
        object.__setattr__(self, "_locked", set())

    def _lock(self, params):
        for key, value in params.items():
            dict.__setitem__(self, key, _Nested(value) if isinstance(value, dict) else value)
            self._locked.add(key)

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name, value):
        self[name] = value

    def __setitem__(self, key, value):
        if key not in self._locked:
            dict.__setitem__(self, key, value)

    def update(self, data=None, allow_val_change=None, **more):
        if data is not None and not isinstance(data, dict):
            data = vars(data)  # an argparse namespace
        for key, value in list((data or {}).items()) + list(more.items()):
            self[key] = value

    def setdefaults(self, data):
        for key, value in data.items():
            if key not in self:
                self[key] = value

    def as_dict(self):
        return dict(self)

    def keys(self):
        return dict.keys(self)


class _Nested(dict):
    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class _Summary(dict):
    def __setitem__(self, key, value):
        dict.__setitem__(self, key, value)
        values = _numbers({key: value})
        if values:
            _emit(values)

    def update(self, data=None, **more):
        for key, value in list((data or {}).items()) + list(more.items()):
            self[key] = value


class _NoOp:
    """Whatever W&B offers that has no meaning here: callable, and every attribute is one too."""

    def __call__(self, *args, **kwargs):
        return self

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __iter__(self):
        return iter(())

    def __bool__(self):
        return False


config = Config()
summary = _Summary()
run = None
_step = 0


class Run:
    def __init__(self, name=None):
        self.config = config
        self.summary = summary
        self.id = os.environ.get("HYPERPACK_TRIAL_ID", "0")
        self.name = name or "%s-%s" % (os.environ.get("HYPERPACK_STUDY", "run"), self.id)
        self.project = None
        self.dir = os.environ.get("HYPERPACK_TRIAL_DIR", os.getcwd())

    def log(self, data, step=None, commit=None, sync=None):
        log(data, step=step, commit=commit)

    def finish(self, exit_code=None, quiet=None):
        finish()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        finish()
        return False

    def __getattr__(self, name):
        return _NoOp()


def init(project=None, entity=None, config=None, name=None, **kwargs):
    """The trial's run: its config is `config` with the trial's parameters over it."""
    global run
    if run is None:
        run = Run(name)
        params = _trial_params()
        if config is not None:
            sys.modules[__name__].config.update(config)
        sys.modules[__name__].config._lock(params)
    elif config is not None:
        run.config.update(config)
    run.project = project
    return run


def log(data, step=None, commit=None, sync=None):
    """The numeric values of `data`, as one JSON line with W&B's step."""
    global _step
    if step is not None:
        _step = int(step)
    values = _numbers(data)
    if values:
        line = dict(values)
        line.setdefault("step", _step)
        _emit(line)
    if commit is not False and step is None:
        _step += 1


def finish(exit_code=None, quiet=None):
    global run
    run = None


def sweep(sweep=None, entity=None, project=None, **kwargs):
    return os.environ.get("HYPERPACK_STUDY", "sweep")


def agent(sweep_id=None, function=None, entity=None, project=None, count=None, **kwargs):
    """Each hyperpack trial is one run: the function runs once."""
    if function is not None:
        function()


def login(*args, **kwargs):
    return True


def __getattr__(name):
    # Image, Table, Histogram, Artifact, watch, save, define_metric, plot, ...: accepted, ignored.
    if name.startswith("__"):
        raise AttributeError(name)
    return _NoOp()
