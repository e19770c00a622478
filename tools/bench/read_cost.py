#!/usr/bin/python3
"""What reading snapshot files costs `hangscope diagnose FILE...`: the peak RSS (VmHWM) and the
time when the read is done (the "read N snapshot(s)" line of its last file, or of all when
there are more than 16), then the command is ended. The
figures of docs/reliability.md ("Bounded reads") and docs/performance.md.

The cost of a read is its peak RSS above the baseline (the same measure for a one-node snapshot
of a few bytes: the executable, its libraries, the rules) divided by the size of what was read.

Usage: read_cost.py [--runs N] HANGSCOPE INPUT...
  INPUT: a snapshot file, or a directory whose files are read together (one diagnose)."""
import argparse
import os
import signal
import statistics
import subprocess
import tempfile
import time

TINY = ('{"snapshots": [{"schema_major": 2, "schema_minor": 6, "node_name": "n", '
        '"hostname": "n"}]}\n')


def files_of(path):
    if os.path.isdir(path):
        return sorted(os.path.join(path, n) for n in os.listdir(path))
    return [path]


def cost(hangscope, files):
    out = tempfile.mkdtemp(prefix="read-cost-")
    started = time.monotonic()
    child = subprocess.Popen([hangscope, "diagnose"] + files + ["-o", out + "/b"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        read = 0
        for line in child.stderr:
            read += line.startswith(b"hangscope: read ")
            # One line per file, or one for all of more than 16.
            if read == len(files) or (len(files) > 16 and read == 1):
                seconds = time.monotonic() - started
                with open(f"/proc/{child.pid}/status") as status:
                    hwm = next(int(l.split()[1]) for l in status if l.startswith("VmHWM:"))
                return seconds, hwm * 1024
        raise SystemExit(f"{files[0]}: no read line")
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        subprocess.run(["rm", "-rf", out])


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="reads of each input (medians)")
    parser.add_argument("hangscope")
    parser.add_argument("inputs", nargs="+")
    args = parser.parse_args()
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as tiny:
        tiny.write(TINY)
    try:
        baseline = statistics.median(cost(args.hangscope, [tiny.name])[1]
                                     for _ in range(args.runs))
    finally:
        os.unlink(tiny.name)
    print(f"baseline (a one-node snapshot of {len(TINY)} bytes): {baseline / 1e6:.1f} MB, "
          f"median of {args.runs}")
    print("| input | size | read done after | peak RSS by then | above baseline | "
          "per byte read |")
    print("|---|---|---|---|---|---|")
    for path in args.inputs:
        files = files_of(path)
        size = sum(os.path.getsize(f) for f in files)
        runs = [cost(args.hangscope, files) for _ in range(args.runs)]
        seconds = statistics.median(r[0] for r in runs)
        peak = statistics.median(r[1] for r in runs)
        name = os.path.basename(path.rstrip("/")) + (f" ({len(files)} files)" if len(files) > 1
                                                     else "")
        print(f"| {name} | {size / 1e6:.1f} MB | {seconds:.2f} s | {peak / 1e6:.0f} MB | "
              f"{(peak - baseline) / 1e6:.0f} MB | {(peak - baseline) / size:.1f}x |")


if __name__ == "__main__":
    main()
