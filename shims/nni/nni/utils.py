"""nni.utils.merge_parameter, as NNI's examples use it to lay tuned values over argparse defaults."""


def _compatible(key, base, override):
    if base is None or isinstance(override, type(base)):
        return override
    if isinstance(base, float) and isinstance(override, int):
        return float(override)
    raise ValueError('Expected "%s" in override parameters to have type %s, but found %s'
                     % (key, type(base).__name__, type(override).__name__))


def merge_parameter(base_params, override_params):
    """Sets each of override_params on base_params (a dict or a namespace), in place."""
    if override_params is None:
        return base_params
    is_dict = isinstance(base_params, dict)
    for key, value in override_params.items():
        present = key in base_params if is_dict else hasattr(base_params, key)
        if not present:
            raise ValueError("Key '%s' not found in base parameters." % key)
        current = base_params[key] if is_dict else getattr(base_params, key)
        value = _compatible(key, current, value)
        if is_dict:
            base_params[key] = value
        else:
            setattr(base_params, key, value)
    return base_params
