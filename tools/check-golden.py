#!/usr/bin/env python3
"""The golden check: the report.json of every kept case is what the case's expected.json says.

Usage: tools/check-golden.py HANGSCOPE [--update] [CASE...]
Exit:  0 every case matches (or --update wrote them); 1 a case differs or fails (its name, the
       first differing lines); 2 bad usage.

A refactoring must not change a verdict, a rank, a line of evidence: this check reruns the
analysis on kept inputs and compares the whole report.json. The cases (tests/fixtures/golden):
- a directory with snapshots/*.json.gz: real jobs of tools/repro captured on a machine like
  this one (tools/golden/capture-corpus.sh), diagnosed as `hangscope diagnose FILES`;
- the kept fixtures of other tests, named in EXTRA_CASES below: an old schema's snapshot file,
  an old bundle (`hangscope report`), flight-recorder dumps (`diagnose --flight-records`).
Inputs are given by paths relative to the repository, so names in the report do not depend on
where the checkout lives. Only the writer's version is masked. A change that moves an expected
report on purpose reruns this with --update and says why in its commit.
"""

import difflib
import gzip
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path("tests/fixtures/golden")
FLIGHT = "tests/fixtures/flight_recorder/postmortem"

# case name -> the command's arguments after the binary (paths relative to the repository).
EXTRA_CASES = {
    "schema-2.0-snapshot": ["diagnose", "tests/fixtures/snapshots/schema-2.0-flight-record-as-json.pb"],
    "schema-2.0-bundle": ["report", "tests/fixtures/bundles/schema-2.0-behind"],
}
for dumps in ("ahead", "behind", "corrupt", "healthy", "missing", "p2p_healthy", "p2p_size_mismatch",
              "pp_no_send", "rank0_behind", "transport", "two_groups"):
    EXTRA_CASES[f"postmortem-{dumps}"] = ["diagnose", "--flight-records", f"{FLIGHT}/{dumps}/pickle"]
EXTRA_CASES["postmortem-autotune-logs"] = [
    "diagnose", "--flight-records", f"{FLIGHT}/healthy/pickle", "--log",
    "tests/fixtures/postmortem_logs/autotune"]


def normalised(report):
    capture = report.get("capture")
    if isinstance(capture, dict) and "hangscope" in capture:
        capture["hangscope"] = "<version>"
    return json.dumps(report, indent=2, sort_keys=True, ensure_ascii=True) + "\n"


def run_case(hangscope, name, scratch):
    """The case's report.json, normalised, or raises RuntimeError saying why not."""
    case_dir = ROOT / CORPUS / name
    if name in EXTRA_CASES:
        arguments = list(EXTRA_CASES[name])
    else:
        inputs = scratch / "inputs" / name
        inputs.mkdir(parents=True)
        arguments = ["diagnose"]
        for packed in sorted((case_dir / "snapshots").glob("*.json.gz")):
            unpacked = inputs / packed.name[:-len(".gz")]
            unpacked.write_bytes(gzip.decompress(packed.read_bytes()))
            arguments.append(str(unpacked))
        if len(arguments) == 1:
            raise RuntimeError(f"{case_dir / 'snapshots'}: no *.json.gz snapshot")
    if arguments[0] == "diagnose":
        (scratch / "bundles").mkdir(exist_ok=True)
        arguments += ["-o", str(scratch / "bundles" / name), "--quiet"]
    result = subprocess.run([str(hangscope), *arguments, "--json"], cwd=ROOT,
                            capture_output=True, timeout=300)
    if result.returncode not in (0, 3):
        raise RuntimeError(f"hangscope {' '.join(arguments)} exited {result.returncode}: "
                           f"{result.stderr.decode(errors='replace').strip()[-600:]}")
    try:
        report = json.loads(result.stdout)
    except ValueError as error:
        raise RuntimeError(f"hangscope {' '.join(arguments)}: stdout is no JSON ({error})")
    report["exit_code"] = result.returncode
    return normalised(report)


def cases():
    names = set(EXTRA_CASES)
    for child in (ROOT / CORPUS).iterdir():
        if child.is_dir() and (child / "snapshots").is_dir():
            names.add(child.name)
    return sorted(names)


def main(argv):
    if len(argv) < 2 or argv[1].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    hangscope = Path(argv[1]).resolve()
    update = "--update" in argv[2:]
    chosen = [a for a in argv[2:] if a != "--update"]
    known = cases()
    for name in chosen:
        if name not in known:
            print(f"check-golden: no case '{name}' (cases: {', '.join(known)})", file=sys.stderr)
            return 2
    failed = 0
    scratch = Path(tempfile.mkdtemp(prefix="hangscope-golden-"))
    try:
        for name in chosen or known:
            expected_path = ROOT / CORPUS / name / "expected.json"
            try:
                actual = run_case(hangscope, name, scratch)
            except (RuntimeError, OSError, subprocess.TimeoutExpired) as error:
                print(f"FAIL {name}: {error}")
                failed += 1
                continue
            if update:
                expected_path.parent.mkdir(parents=True, exist_ok=True)
                expected_path.write_text(actual, encoding="utf-8")
                print(f"wrote {expected_path.relative_to(ROOT)}")
                continue
            if not expected_path.exists():
                print(f"FAIL {name}: {expected_path.relative_to(ROOT)} is missing "
                      f"(tools/check-golden.py HANGSCOPE --update {name})")
                failed += 1
                continue
            expected = expected_path.read_text(encoding="utf-8")
            if actual == expected:
                print(f"ok   {name}")
                continue
            failed += 1
            diff = list(difflib.unified_diff(expected.splitlines(), actual.splitlines(),
                                             "expected", "now", lineterm="", n=2))
            print(f"FAIL {name}: report.json differs from {expected_path.relative_to(ROOT)}")
            print("\n".join(diff[:60]) + ("\n  ..." if len(diff) > 60 else ""))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if failed:
        print(f"check-golden: {failed} case(s) differ; if on purpose, rerun with --update and "
              f"say why in the commit")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
