#!/usr/bin/python3
"""`hyperpack import` on the Optuna storages the Optuna project itself keeps as test assets.

Optuna's repository holds an RDB SQLite database from each schema revision since 0.9
(tests/storages_tests/rdb_tests/test_upgrade_assets/*.db) and a JournalStorage file
(tests/storages_tests/journal_tests/assets/*.log), written by the Optuna team's own scripts with
the releases of their time. This takes each from a fetched Optuna repository (read from git,
written to a temporary folder, never into this tree) and imports every study it holds:

  - as it is: a database of a revision hyperpack reads (Optuna 3.0 to 5.x) imports, an older one is
    refused with the upgrade command, and a study without trials is refused (no search space);
  - where refused as old, after `optuna storage upgrade` by the given Optuna (5.0 by default).

Each imported study is compared with what that Optuna's load_study reads of it: every trial that
ended, its state, parameters and values. Prints a table, then one JSON line of the counts.

    bench/optuna_storage_corpus.py --optuna-git /path/to/optuna.git \\
        --hyperpack build/cli/hyperpack --python "$(../shared/tools/optuna-python 5.0)"
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

STATES = {"COMPLETE": "completed", "PRUNED": "pruned", "FAIL": "failed"}

READ = r"""
import json, sys, warnings, optuna
warnings.simplefilter("ignore")
optuna.logging.set_verbosity(optuna.logging.ERROR)
url = "sqlite:///" + sys.argv[1] if sys.argv[1].endswith(".db") else None
if url is None:
    try:
        from optuna.storages.journal import JournalFileBackend as B
    except ImportError:
        from optuna.storages import JournalFileStorage as B
    url = optuna.storages.JournalStorage(B(sys.argv[1]))
out = {}
for summary in optuna.get_all_study_summaries(url):
    s = optuna.load_study(study_name=summary.study_name, storage=url)
    out[summary.study_name] = [{"state": t.state.name, "params": t.params, "values": t.values}
                               for t in s.trials]
print(json.dumps(out))
"""


def assets(git_dir, ref):
    names = subprocess.run(["git", "--git-dir", git_dir, "ls-tree", "-r", "--name-only", ref],
                           check=True, capture_output=True, text=True).stdout.split()
    return [n for n in names if n.startswith("tests/storages_tests/") and
            (n.endswith(".db") and "test_upgrade_assets" in n or
             n.endswith(".log") and "journal_tests/assets" in n)]


def optuna_view(python, path):
    run = subprocess.run([python, "-c", READ, path], capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(run.stderr[-500:])
    return json.loads(run.stdout)


def compare(ours, theirs):
    """Differences between hyperpack's trials and Optuna's ended ones (an empty list if none)."""
    ended = [t for t in theirs if t["state"] in STATES]
    if len(ours) != len(ended):
        return [f"{len(ours)} trials imported, Optuna has {len(ended)} that ended"]
    problems = []
    for i, (a, b) in enumerate(zip(ours, ended)):
        if a["params"] != b["params"]:
            problems.append(f"trial {i}: params {a['params']} != {b['params']}")
        if a["state"] != STATES[b["state"]]:
            problems.append(f"trial {i}: state {a['state']} != {b['state']}")
        values = list(a["values"].values()) if a.get("values") else [a["value"]]
        if b["state"] == "COMPLETE" and values != b["values"]:
            problems.append(f"trial {i}: values {values} != {b['values']}")
    return problems


def import_all(hyperpack, path, names, folder):
    """Each study of `path` imported: {name: (outcome, problems or None)}; hyperpack's trials."""
    rows = {}
    for name in names:
        hp = os.path.join(folder, f"hp-{os.path.basename(path)}-{len(rows)}.db")
        run = subprocess.run([hyperpack, "import", path, "--study", name, "-o", os.devnull,
                              "--storage", hp], capture_output=True, text=True)
        if run.returncode != 0:
            said = run.stderr.strip().split("\n")[-1].replace(path, os.path.basename(path))
            rows[name] = ("refused: " + said[len("hyperpack: "):], None)
            continue
        ours = re.search(r" as '(.*)': ", run.stderr).group(1)  # the name cleaned for hyperpack
        trials = json.loads(subprocess.run([hyperpack, "trials", ours, "--json", "--storage", hp],
                                           check=True, capture_output=True, text=True).stdout)
        rows[name] = ("imported", trials)
    return rows


def short(outcome):
    """An outcome in a few words, for the table."""
    for words, brief in [("upgrade it first", "refused: upgrade first"),
                         ("no trial with parameters", "refused: no trials"),
                         ("NOT as Optuna", "imported, NOT as Optuna reads it"),
                         ("imported", "imported, as Optuna reads it")]:
        if words in outcome:
            return brief
    return outcome[:40]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--optuna-git", required=True, help="a fetched Optuna repository (git dir)")
    ap.add_argument("--ref", default="HEAD")
    ap.add_argument("--hyperpack", required=True)
    ap.add_argument("--python", required=True, help="a python with the Optuna that upgrades")
    args = ap.parse_args()
    folder = tempfile.mkdtemp(prefix="optuna-corpus-")
    counts = {"files": 0, "studies": 0, "imported": 0, "matched": 0, "refused_old": 0,
              "upgraded_then_imported": 0, "refused_empty": 0, "mismatched": 0}
    print(f"{'asset':<16} {'study':<20} {'as it is':<28} after `optuna storage upgrade`")
    for asset in assets(args.optuna_git, args.ref):
        path = os.path.join(folder, os.path.basename(asset))
        with open(path, "wb") as f:
            f.write(subprocess.run(["git", "--git-dir", args.optuna_git, "show",
                                    f"{args.ref}:{asset}"], check=True,
                                   capture_output=True).stdout)
        counts["files"] += 1
        upgraded = path.replace(".db", ".upgraded.db")
        if path.endswith(".db"):
            subprocess.run(["cp", path, upgraded], check=True)
            subprocess.run([args.python, "-c", "import sys; from optuna.cli import main; "
                            "sys.argv = ['optuna', 'storage', 'upgrade', '--storage', "
                            f"'sqlite:///{upgraded}']; main()"], capture_output=True, check=True)
        theirs = optuna_view(args.python, upgraded if path.endswith(".db") else path)
        direct = import_all(args.hyperpack, path, theirs, folder)
        after = import_all(args.hyperpack, upgraded, theirs, folder) if path.endswith(".db") else {}
        for name in theirs:
            counts["studies"] += 1
            labels = []
            for outcome, trials in (direct[name], after.get(name, ("-", None))):
                if trials is not None:
                    problems = compare(trials, theirs[name])
                    counts["matched" if not problems else "mismatched"] += 1
                    outcome = "imported" if not problems else "imported, NOT as Optuna reads it"
                    for p in problems[:3]:
                        print("    " + p)
                labels.append(outcome)
            counts["imported"] += direct[name][1] is not None
            counts["refused_old"] += "upgrade it first" in direct[name][0]
            counts["upgraded_then_imported"] += ("upgrade it first" in direct[name][0] and
                                                 after[name][1] is not None)
            counts["refused_empty"] += "no trial with parameters" in direct[name][0]
            print(f"{os.path.basename(asset):<16} {name:<20} {short(labels[0]):<28} "
                  f"{short(labels[1])}")
    print(json.dumps(counts))
    return 0 if counts["mismatched"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
