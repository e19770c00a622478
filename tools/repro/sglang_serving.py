#!/usr/bin/python3
"""One node of a simulated multi-node SGLang deployment hung at one scheduler (tools/repro/sim:
real module paths and function names), for the serving chain of issue 23.

    sglang_serving.py --node-rank R --nnodes N --dist-init-addr HOST:PORT [--tp T]
                      [--stuck-rank S] [--requests K] [--stall-step STEP]

Runs `python3 -m sglang.launch_server --model-path M --tp T --nnodes N --node-rank R
--dist-init-addr HOST:PORT --enable-hierarchical-cache --log-level debug` with tools/repro/sim
first on PYTHONPATH, as a user chasing a hang runs it on each node (its processes share the
node's stdout: the debug lines of every scheduler, "world_size=4 rank=R ...", are in one log).
Node 0's process is the HTTP server (asyncio: the TokenizerManager, K request tasks in the
/generate handler awaiting TokenizerManager.generate_request, its handle_loop task) and starts
the detokenizer (sglang::detokenizer) and the schedulers of TP ranks 0..T/N-1; node R's process
starts the schedulers of its TP ranks and then only serves /health. The schedulers
(sglang::scheduler_TP<r>) are real gloo ranks of one job (init_method tcp://HOST:PORT, world
size T): TP rank 0 broadcasts the requests with broadcast_pyobj, every forward all-reduces in
each layer. At the first decode step from step STEP (default 3) on, scheduler S (default T-1)
waits forever for its hierarchical cache's layer load (LayerDoneCounter.wait_until) and the
others wait for it in that layer's all-reduce; every request stays pending.

Lines on stdout, one per process when it reaches its final wait: "rank R pid P stuck" (the
stuck scheduler), "rank R pid P waiting" (the others of this node), on node 0 "api server pid
P: K requests in flight"; then "sglang serving ready". Nothing goes to /dev/shm (pipes stand in
for SGLang's ZMQ ipc sockets). Runs until SIGTERM or SIGINT, then kills its whole process group
(the launcher, its schedulers, the detokenizer).
"""
import argparse
import os
import signal
import subprocess
import sys
import time

from process_group import kill_process_group, lead_process_group

HERE = os.path.dirname(os.path.abspath(__file__))
SIM = os.path.join(HERE, "sim")


def kill_group_and_exit(*_):
    """Kills every other process of this process group, then exits."""
    kill_process_group()
    os._exit(0)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--node-rank", type=int, required=True)
    parser.add_argument("--nnodes", type=int, default=2)
    parser.add_argument("--dist-init-addr", required=True, help="node 0's HOST:PORT")
    parser.add_argument("--tp", type=int, default=4)
    parser.add_argument("--stuck-rank", type=int, default=None, help="default: the last")
    parser.add_argument("--requests", type=int, default=23)
    parser.add_argument("--stall-step", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=120, help="seconds to become ready")
    args = parser.parse_args()
    stuck = args.tp - 1 if args.stuck_rank is None else args.stuck_rank
    if args.tp % args.nnodes or args.tp < 2 or not 0 <= stuck < args.tp:
        parser.error("--tp must be a multiple of --nnodes (>= 2), --stuck-rank one of its ranks")
    lead_process_group()  # one group for the node's deployment: killed together
    env = dict(os.environ)
    env["PYTHONPATH"] = SIM + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    signal.signal(signal.SIGTERM, kill_group_and_exit)
    signal.signal(signal.SIGINT, kill_group_and_exit)
    server = subprocess.Popen(
        [sys.executable, "-m", "sglang.launch_server", "--model-path",
         "meta-llama/Llama-3.1-8B-Instruct", "--tp", str(args.tp), "--nnodes", str(args.nnodes),
         "--node-rank", str(args.node_rank), "--dist-init-addr", args.dist_init_addr, "--host",
         "0.0.0.0", "--port", "30000", "--enable-hierarchical-cache", "--log-level", "debug",
         "--simulate-requests",
         str(args.requests), "--simulate-stuck-rank", str(stuck), "--simulate-stall-step",
         str(args.stall_step)],
        env=env, stdout=subprocess.PIPE, text=True)
    # This node's schedulers, and on node 0 the API server.
    wanted = args.tp // args.nnodes + (1 if args.node_rank == 0 else 0)
    seen = 0
    deadline = time.monotonic() + args.timeout
    for line in server.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        if (" stuck" in line or " waiting" in line or "requests in flight" in line) and \
                " pid " in line:
            seen += 1
            if seen == wanted:
                print("sglang serving ready", flush=True)
        if time.monotonic() > deadline and seen < wanted:
            print(f"sglang serving not ready after {args.timeout} s", flush=True)
            kill_group_and_exit()
    server.wait()


if __name__ == "__main__":
    main()
