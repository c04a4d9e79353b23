#!/usr/bin/python3
"""Optuna's own sampler test suite, pointed at hyperpack.optuna.GPSampler.

Takes tests/samplers_tests/test_samplers.py from a fetched Optuna repository at the tag of the
Optuna installed (3.1.0 on Debian bookworm), writes a copy under a temporary folder in which every
sampler list names GPSampler alone, the multi-objective one too (the test of the samplers that
refuse multi-objective studies keeps Optuna's own core one), and runs it with pytest under
/usr/bin/python3. Prints pytest's summary, then one JSON line of the counts. The copy is thrown away.

    /usr/bin/python3 bench/optuna_sampler_suite.py --optuna-git /path/to/optuna.git \
        --pythonpath build/python [--ref v3.1.0] [--slow] [--keep DIR]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

GP = "lambda: hyperpack.optuna.GPSampler(n_startup_trials=0)"
GP_SEED = "lambda seed: hyperpack.optuna.GPSampler(seed=seed)"


def replace_list(text, head, body):
    """The statement that starts with `head` (up to its closing ')' at column 0), with `body`."""
    start = text.index(head)
    end = text.index("\n)\n", start) + 3
    return text[:start] + body + text[end:]


def pointed_at_hyperpack(text):
    text = text.replace("import optuna\n", "import optuna\nimport hyperpack.optuna\n", 1)
    text = replace_list(text, "parametrize_sampler = pytest.mark.parametrize(",
                        f'parametrize_sampler = pytest.mark.parametrize("sampler_class", [{GP}])\n')
    text = replace_list(
        text, "parametrize_relative_sampler = pytest.mark.parametrize(",
        f'parametrize_relative_sampler = pytest.mark.parametrize(\n'
        f'    "relative_sampler_class", [{GP}])\n')
    text = replace_list(
        text, "parametrize_multi_objective_sampler = pytest.mark.parametrize(",
        'parametrize_multi_objective_sampler = pytest.mark.parametrize(\n'
        f'    "multi_objective_sampler_class", [{GP}])\n')
    start = text.index("sampler_class_with_seed: Dict[")
    end = text.index("\n}\n", start) + 3
    text = (text[:start] + 'sampler_class_with_seed: Dict[str, Tuple[Callable[[int], BaseSampler], '
            f'bool]] = {{\n    "GPSampler": ({GP_SEED}, False),\n}}\n' + text[end:])
    # The reseed test's list: GPSampler keeps no RandomState of its own (a seed), and has an
    # independent sampler that it reseeds.
    text = re.sub(r'(@pytest\.mark\.parametrize\(\n    "sampler_class,expected_has_rng,'
                  r'expected_has_another_sampler",\n    \[\n).*?(\n    \],\n\)\ndef '
                  r'test_sampler_reseed_rng)',
                  lambda m: m.group(1) + f"        ({GP}, False, True)," + m.group(2), text,
                  flags=re.S)
    # The multi-objective refusal test lists Optuna's samplers that refuse such studies: GPSampler
    # models them, so it keeps Optuna's own core sampler there (CmaEsSampler); the integration
    # ones need packages Debian does not have.
    text = re.sub(r'(@pytest\.mark\.parametrize\(\n    "sampler_class",\n    \[\n).*?(\n    \],\n\)'
                  r'\ndef test_raise_error_for_samplers_during_multi_objectives)',
                  lambda m: m.group(1) + "        lambda: optuna.samplers.CmaEsSampler("
                  "n_startup_trials=0)," + m.group(2), text, flags=re.S)
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--optuna-git", required=True, help="a fetched Optuna repository (git dir)")
    ap.add_argument("--ref", default="v3.1.0")
    ap.add_argument("--pythonpath", required=True, help="where the hyperpack package is built")
    ap.add_argument("--slow", action="store_true", help="run the tests Optuna marks slow too")
    ap.add_argument("--keep", help="write the copy here and keep it")
    args = ap.parse_args()
    text = subprocess.run(["git", "--git-dir", args.optuna_git, "show",
                           f"{args.ref}:tests/samplers_tests/test_samplers.py"],
                          check=True, capture_output=True, text=True).stdout
    folder = args.keep or tempfile.mkdtemp(prefix="optuna-suite-")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "test_samplers.py")
    with open(path, "w") as f:
        f.write(pointed_at_hyperpack(text))
    env = dict(os.environ, PYTHONPATH=os.path.abspath(args.pythonpath))
    cmd = ["/usr/bin/python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE", path]
    if not args.slow:
        cmd += ["-m", "not slow and not integration"]
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=folder)
    print(run.stdout[-6000:], run.stderr[-2000:], sep="")
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|deselected|error)",
                                              run.stdout.splitlines()[-1] if run.stdout else "")}
    print(json.dumps({"ref": args.ref, **counts}))
    return 0 if run.returncode in (0, 5) and not counts.get("failed") else 1


if __name__ == "__main__":
    sys.exit(main())
