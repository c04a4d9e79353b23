#!/usr/bin/python3
"""Runs every experiment or sweep file of other tools' own example trees through hyperpack import.

Usage:
  bench/import_corpus.py --hyperpack build/cli/hyperpack \
      --katib KATIB_TREE --nni NNI_TREE --determined DETERMINED_TREE \
      --wandb WANDB_EXAMPLES_TREE --wandb WANDB_SWEEPS_TREE [--json] [--list]

Each TREE is a checkout of that tool's public repository (any folder of it works). The files are
chosen by what the tool itself reads, not by what hyperpack detects:
  katib:      *.yaml/*.yml with a top-level `kind: Experiment`
  nni:        *.yaml/*.yml under an examples folder with a top-level trialCommand, searchSpaceFile,
              searchSpacePath, searchSpace or search_space key (v1 and v2 experiment configs)
  determined: *.yaml/*.yml under an examples folder with a top-level `searcher:`
  wandb:      *.yaml/*.yml with a top-level `method:` (a sweep configuration)

For every file, `hyperpack import FILE --from TOOL` is run, and where it writes a study,
`hyperpack validate` reads that study. The outcomes:
  imported  exit 0 and the study validates
  refused   a non-zero exit whose every error line starts FILE:LINE:COL: (a reason the user can act on)
  defect    anything else: a crash, a library's exception text, an error without a location, or a
            study that validate refuses
A second run without --from (format detection) is reported beside it: `auto` is `same` when it
ends with the same outcome, otherwise what it did.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

SELECT = {
    "katib": (re.compile(r"^kind:\s*Experiment\s*$", re.M), False),
    "nni": (re.compile(r"^(trialCommand|searchSpaceFile|searchSpacePath|searchSpace|search_space)\s*:",
                       re.M), True),
    "determined": (re.compile(r"^searcher\s*:", re.M), True),
    "wandb": (re.compile(r"^method\s*:", re.M), False),
}
LOCATED = re.compile(r"^[^:\n]+:\d+:\d+: ")
# Texts of a library's exception or a crash that should never reach a user.
LEAKS = ("invalid node", "bad conversion", "yaml-cpp", "terminate called", "what():",
         "Segmentation", "Aborted", "std::")


def candidate_files(tool, tree):
    pattern, examples_only = SELECT[tool]
    for root, dirs, files in os.walk(tree):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if examples_only and "example" not in root.lower():
            continue
        for name in sorted(files):
            if not name.endswith((".yaml", ".yml")):
                continue
            path = os.path.join(root, name)
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
            except OSError:
                continue
            if pattern.search(text):
                yield path


def run(cmd, timeout=30):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return -1, "", "timed out"


def errors_of(stderr):
    return [l for l in stderr.splitlines() if l.strip() and "warning:" not in l]


def classify(hyperpack, path, tool, workdir):
    out = os.path.join(workdir, "study.yaml")
    if os.path.exists(out):
        os.remove(out)
    cmd = [hyperpack, "import", path, "-o", out]
    if tool:
        cmd += ["--from", tool]
    rc, _, err = run(cmd)
    leaked = next((l for l in err.splitlines() if any(k in l for k in LEAKS)), None)
    if rc < 0 or rc > 2 or leaked:
        return "defect", leaked or (err.strip().splitlines()[-1:] or ["exit %d" % rc])[0]
    if rc != 0:
        errs = errors_of(err)
        unlocated = [e for e in errs if not LOCATED.match(e)]
        if not errs or unlocated:
            return "defect", "error without FILE:LINE:COL: " + (unlocated or ["(none)"])[0]
        return "refused", errs[0]
    vrc, _, verr = run([hyperpack, "validate", out])
    if vrc != 0:
        return "defect", "validate refuses the study: " + (errors_of(verr) or ["?"])[0]
    return "imported", ""


def short(reason, path):
    # The reason without the file's own path, so equal reasons group across files.
    return reason.replace(path, "FILE")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--hyperpack", default="build/cli/hyperpack")
    for tool in SELECT:
        ap.add_argument("--" + tool, action="append", default=[], metavar="TREE")
    ap.add_argument("--json", action="store_true", help="one JSON object per file")
    ap.add_argument("--list", action="store_true", help="every file's outcome, not only the table")
    ap.add_argument("--no-auto", action="store_true", help="skip the run without --from")
    args = ap.parse_args()
    hyperpack = os.path.abspath(args.hyperpack)
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for tool in SELECT:
            for tree in getattr(args, tool):
                files = list(candidate_files(tool, tree))
                for i, path in enumerate(files, 1):
                    print("\r%s %d/%d" % (tool, i, len(files)), end="", file=sys.stderr, flush=True)
                    outcome, reason = classify(hyperpack, path, tool, workdir)
                    auto = ""
                    if not args.no_auto:
                        a_out, a_reason = classify(hyperpack, path, None, workdir)
                        auto = "same" if (a_out, a_reason) == (outcome, reason) else \
                            "%s: %s" % (a_out, a_reason or "imported")
                    rows.append({"tool": tool, "file": os.path.relpath(path, tree),
                                 "outcome": outcome, "reason": short(reason, path), "auto": auto})
                print(file=sys.stderr)
    if args.json:
        for r in rows:
            print(json.dumps(r))
        return
    report(rows, args.list, not args.no_auto)


def report(rows, listing, with_auto):
    tools = list(dict.fromkeys(r["tool"] for r in rows))
    print("| tool | files | imported | refused at a line | defect | auto-detected the same |")
    print("|---|---|---|---|---|---|")
    for tool in tools + ["all"]:
        mine = [r for r in rows if tool in ("all", r["tool"])]
        n = len(mine)
        count = lambda o: sum(r["outcome"] == o for r in mine)
        same = sum(r["auto"] == "same" for r in mine) if with_auto else "-"
        print("| %s | %d | %d (%.0f%%) | %d | %d | %s |" % (
            tool, n, count("imported"), 100.0 * count("imported") / max(n, 1), count("refused"),
            count("defect"), same))
    for kind in ("defect", "refused"):
        shown = [r for r in rows if r["outcome"] == kind]
        if shown:
            print("\n%s:" % kind)
            for r in shown:
                print("- %s %s: %s" % (r["tool"], r["file"], r["reason"]))
    if with_auto:
        odd = [r for r in rows if r["auto"] not in ("same", "")]
        if odd:
            print("\nwithout --from, differently:")
            for r in odd:
                print("- %s %s: %s" % (r["tool"], r["file"], r["auto"]))
    if listing:
        print("\nimported:")
        for r in rows:
            if r["outcome"] == "imported":
                print("- %s %s" % (r["tool"], r["file"]))


if __name__ == "__main__":
    main()
