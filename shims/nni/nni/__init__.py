"""hyperpack's stand-in for NNI's trial API, so that an NNI trial program runs unmodified.

hyperpack puts this package first on a trial's PYTHONPATH when its study says `trial.shim: nni`
(as `hyperpack import --from nni` writes). Parameters come from the JSON file hyperpack names in
HYPERPACK_PARAMS_FILE; results are printed to stdout as JSON lines, which hyperpack reads:
{"default": value, "step": n} for each intermediate result, {"default": value} for the final one.
A dict result reports each numeric member; its "default" is the objective, as in NNI.

Nested choices, which hyperpack tunes as flat conditional parameters, are handed back nested
(`{"layer0": {"_name": "Conv", "kernel_size": 3}}`) from the layout the importer writes in
HYPERPACK_NNI_NESTED. Not thread-safe, as NNI's own is not meant to be called from threads.
"""
import json
import os

import hyperpack_shim

__version__ = "999.hyperpack"

_params = None
_intermediate_seq = 0


class NoMoreTrialError(Exception):
    pass


def _load_params():
    flat = hyperpack_shim.params()
    return _nest(flat, json.loads(os.environ.get("HYPERPACK_NNI_NESTED", "{}")))


def _nest(flat, layout):
    # layout: {choice: {option: {child: flat_name}}}; a child absent from the trial is inactive.
    params = dict(flat)
    for choice, options in layout.items():
        if choice not in params:
            continue
        option = params[choice]
        nested = {"_name": option}
        for child, name in options.get(str(option), {}).items():
            if name in params:
                nested[child] = params.pop(name)
        for other in options.values():
            for name in other.values():
                params.pop(name, None)
        params[choice] = nested
    return params


def get_next_parameter():
    """The trial's parameters, as NNI's tuner would have sent them."""
    global _params
    if _params is None:
        _params = _load_params()
    return dict(_params)


get_next_parameters = get_next_parameter


def get_current_parameter(tag=None):
    params = _params if _params is not None else get_next_parameter()
    return params if tag is None else params[tag]


def get_experiment_id():
    return os.environ.get("HYPERPACK_STUDY", "")


def get_trial_id():
    return os.environ.get("HYPERPACK_TRIAL_ID", "")


def get_sequence_id():
    return int(os.environ.get("HYPERPACK_TRIAL_ID", "0") or 0)


_number = hyperpack_shim.number


def _line(metric):
    if isinstance(metric, dict):
        line = {k: _number(v) for k, v in metric.items() if _number(v) is not None}
        if "default" not in line:
            raise ValueError("a dict result needs a numeric 'default' member, as in NNI")
        return line
    value = _number(metric)
    if value is None:
        raise ValueError("a result must be a number or a dict with 'default'")
    return {"default": value}


def report_intermediate_result(metric):
    """One intermediate result (an epoch's), as a JSON line with its step."""
    global _intermediate_seq
    _intermediate_seq += 1
    line = _line(metric)
    line["step"] = _intermediate_seq
    hyperpack_shim.emit(line)


def report_final_result(metric):
    """The trial's result."""
    hyperpack_shim.emit(_line(metric))
