#!/usr/bin/python3
"""A real torch.distributed (gloo) job hung the way multi-node inference jobs hang.

Every rank but one enters ``dist.barrier()``; the diverged rank takes another path
(``load_weights``, waiting for a TCPStore key nobody sets) and never arrives, so the others wait in gloo until the timeout.

Launcher mode (default) starts ``--world-size`` rank processes with torchrun-style environment
variables (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and prints one line per rank:
    rank <r> pid <pid> <waiting|diverged>
then waits for them. Ranks die with the launcher (PR_SET_PDEATHSIG), so killing the launcher's
process group cleans everything up.
"""
import argparse
import ctypes
import datetime
import os
import signal
import socket
import subprocess
import sys
import time


def die_with_parent():
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_PDEATHSIG = 1
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def announce(line):
    """One write(2) per line, so lines of several ranks sharing stdout never interleave."""
    os.write(1, (line + "\n").encode())


def load_weights(store, rank):
    """The diverged rank's path: it waits for a store key that no rank will ever set."""
    key = f"weights/{rank}/ready"
    store.wait([key], datetime.timedelta(hours=1))


def run_rank(args):
    import torch.distributed as dist

    die_with_parent()
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    if args.helper:
        # A helper child (like a compile worker) inheriting the rank's environment.
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    dist.init_process_group(
        "gloo",
        init_method="env://",
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=args.timeout),
    )
    if args.title:
        import setproctitle  # as vLLM does: /proc/PID/environ reads empty afterwards
        setproctitle.setproctitle(args.title)
    if rank == args.diverged_rank:
        announce(f"rank {rank} pid {os.getpid()} diverged")
        load_weights(dist.distributed_c10d._get_default_store(), rank)
    else:
        announce(f"rank {rank} pid {os.getpid()} waiting")
        dist.barrier()
        announce(f"rank {rank} left the barrier")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(args):
    port = free_port()
    ranks = []
    for rank in range(args.world_size):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank),
                   WORLD_SIZE=str(args.world_size), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
        ranks.append(subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--rank-worker",
             "--diverged-rank", str(args.diverged_rank), "--timeout", str(args.timeout)],
            env=env))
    try:
        for process in ranks:
            process.wait()
    finally:
        for process in ranks:
            if process.poll() is None:
                process.kill()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--diverged-rank", type=int, default=1)
    parser.add_argument("--timeout", type=int, default=1800, help="process-group timeout, seconds")
    parser.add_argument("--rank-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--title", help="retitle the rank with setproctitle (e.g. VLLM::Worker_TP2)")
    parser.add_argument("--helper", action="store_true", help="start a helper child process")
    args = parser.parse_args()
    if args.rank_worker:
        run_rank(args)
    else:
        launch(args)


if __name__ == "__main__":
    main()
