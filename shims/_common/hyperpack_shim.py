"""What hyperpack's stand-ins for other tools' clients share (shims/*/): the trial's parameters
and the metric lines hyperpack reads. hyperpack puts this folder on the trial's PYTHONPATH beside
the tool's own stand-in."""
import json
import os


def params(nested_env=None):
    """The trial's parameters from HYPERPACK_PARAMS_FILE (or HYPERPACK_PARAMS). `nested_env` names
    a variable holding {flat name: [group, ..., name]}, the importer's record of groups it
    flattened: those parameters are handed back nested."""
    path = os.environ.get("HYPERPACK_PARAMS_FILE")
    if path and os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            flat = json.load(f)
    else:
        flat = json.loads(os.environ.get("HYPERPACK_PARAMS", "{}"))
    layout = json.loads(os.environ.get(nested_env, "{}")) if nested_env else {}
    out = {}
    for name, value in flat.items():
        where = layout.get(name, [name])
        target = out
        for part in where[:-1]:
            target = target.setdefault(part, {})
        target[where[-1]] = value
    return out


def number(value):
    """A metric's value as a float (numpy and torch scalars too), or None: booleans and anything
    that is not a number are not metrics."""
    if isinstance(value, bool):
        return None
    try:
        return float(value.item() if hasattr(value, "item") and callable(value.item) else value)
    except (TypeError, ValueError):
        return None


def numbers(metrics, prefix="", separator="/"):
    """The numeric members of `metrics`, a nested mapping's keys joined with `separator`."""
    out = {}
    for key, value in metrics.items():
        name = prefix + str(key)
        if isinstance(value, dict):
            out.update(numbers(value, name + separator, separator))
            continue
        v = number(value)
        if v is not None:
            out[name] = v
    return out


def emit(line):
    """One metric line on stdout, where hyperpack reads it."""
    print(json.dumps(line), flush=True)
