#!/usr/bin/python3
"""What reading a snapshot file costs `hangscope diagnose FILE`: the peak RSS (VmHWM) and the
time when the read is done (its "read N snapshot(s)" line), then the command is ended. The
figures of docs/reliability.md ("Bounded reads").

Usage: read_cost.py HANGSCOPE FILE..."""
import os
import signal
import subprocess
import sys
import tempfile
import time


def cost(hangscope, path):
    out = tempfile.mkdtemp(prefix="read-cost-")
    started = time.monotonic()
    child = subprocess.Popen([hangscope, "diagnose", path, "-o", out + "/b"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for line in child.stderr:
            if line.startswith(b"hangscope: read "):
                seconds = time.monotonic() - started
                with open(f"/proc/{child.pid}/status") as status:
                    hwm = next(int(l.split()[1]) for l in status if l.startswith("VmHWM:"))
                return seconds, hwm * 1024
        raise SystemExit(f"{path}: no read line")
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        subprocess.run(["rm", "-rf", out])


def main():
    hangscope = sys.argv[1]
    print("| file | size | read done after | peak RSS by then | per byte of file |")
    print("|---|---|---|---|---|")
    for path in sys.argv[2:]:
        size = os.path.getsize(path)
        seconds, peak = cost(hangscope, path)
        print(f"| {os.path.basename(path)} | {size / 1e6:.1f} MB | {seconds:.1f} s | "
              f"{peak / 1e6:.0f} MB | {peak / size:.1f}x |")


if __name__ == "__main__":
    main()
