#!/usr/bin/python3
"""A simulated vLLM V1 serving deployment hung at one worker (tools/repro/sim: real module paths
and function names), for the serving chain of issue 23.

    serving_chain.py [--tp N] [--stuck-rank R] [--requests K] [--stall-step S] [--idle]

Starts `python3 -m vllm.entrypoints.openai.api_server` (the API server: an asyncio program whose
K request tasks run the chat-completions handler through AsyncLLM.generate and await their
RequestOutputCollector) with tools/repro/sim first on PYTHONPATH. Its AsyncLLM starts the engine
core (a multiprocessing 'spawn' child titled VLLM::EngineCore: EngineCoreProc.run_busy_loop,
requests in and outputs out over the client's two ipc:// endpoints, unix stream sockets under
the temp dir standing in for ZMQ's, which the engine core connects to), whose MultiprocExecutor
starts N worker processes (VLLM::Worker_TP<t>: real gloo ranks with vLLM's groups, RPCs over the
shared-memory broadcast ring, answers on each worker's own ring). At step S (default 2) worker
R's KV connector never finishes saving (SharedStorageConnector.wait_for_save, after the forward);
at step S+1 the other workers wait for it in the forward's TP all_reduce and the engine core
waits in MessageQueue.acquire_read for the output rank's answer (get_response in
multiproc_executor.py). Every request stays pending.

Lines on stdout, one per process when it reaches its final wait: "rank R pid P stuck" (the
stuck worker), "rank R pid P waiting" (the others), "engine core pid P waiting", "api server pid
P: K requests in flight"; then "serving chain ready", once the broadcast rings' names were removed
from /dev/shm (they stay mapped; a SIGKILLed deployment leaves nothing behind). The script runs
until SIGTERM or SIGINT and then kills the whole process group it leads (API server, engine
core, workers).

--idle: the same deployment healthy and without requests, as a server between users: the API
server holds no request, the engine core idles in its input queue (_process_input_queue ->
queue.get) and the workers wait for the next RPC on the broadcast ring (MessageQueue.dequeue
-> acquire_read); nothing ever runs a step (--requests, --stuck-rank and --stall-step are
ignored). Each process says so once: "rank R pid P ready" (the workers), "engine core pid P
ready", "api server pid P: 0 requests in flight"; then "serving chain ready" as above.
"""
import argparse
import glob
import os
import signal
import subprocess
import sys
import time

from process_group import kill_process_group, lead_process_group

HERE = os.path.dirname(os.path.abspath(__file__))
SIM = os.path.join(HERE, "sim")


def remove_rings(before):
    """Removes the broadcast rings created since `before` from /dev/shm."""
    for path in set(glob.glob("/dev/shm/psm_*")) - before:
        try:
            os.unlink(path)
        except OSError:
            pass


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tp", type=int, default=4)
    parser.add_argument("--stuck-rank", type=int, default=3)
    parser.add_argument("--requests", type=int, default=37)
    parser.add_argument("--stall-step", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=120, help="seconds to become ready")
    parser.add_argument("--idle", action="store_true",
                        help="no requests: a healthy server waiting for its first request")
    args = parser.parse_args()
    if args.idle:
        args.requests = 0
        args.stuck_rank = -1
    if not args.idle and not 0 <= args.stuck_rank < args.tp or args.tp < 2:
        parser.error("--stuck-rank must be a rank of --tp (>= 2)")
    lead_process_group()  # one group for the whole deployment: killed together
    before = set(glob.glob("/dev/shm/psm_*"))
    env = dict(os.environ)
    env["PYTHONPATH"] = SIM + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    server = subprocess.Popen(
        [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--tensor-parallel-size",
         str(args.tp), "--simulate-requests", str(args.requests), "--simulate-stuck-rank",
         str(args.stuck_rank), "--simulate-stall-step", str(args.stall_step)],
        env=env, stdout=subprocess.PIPE, text=True)

    def stop(*_):
        """Kills every other process of this process group (the API server, the engine core,
        the workers), removes the rings they left in /dev/shm, exits."""
        kill_process_group()
        remove_rings(before)
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    wanted = args.tp + 2  # every worker, the engine core, the API server
    seen = 0
    deadline = time.monotonic() + args.timeout
    for line in server.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        final = ((" ready",) if args.idle else (" stuck", " waiting")) + ("requests in flight",)
        if any(word in line for word in final) and " pid " in line:
            seen += 1
            if seen == wanted:
                # The rings stay mapped (hangscope reads them through /proc/PID/map_files);
                # their names go now, so that a SIGKILLed deployment leaves nothing in /dev/shm.
                remove_rings(before)
                print("serving chain ready", flush=True)
        if time.monotonic() > deadline and seen < wanted:
            print(f"serving chain not ready after {args.timeout} s", flush=True)
            stop()
    server.wait()


if __name__ == "__main__":
    main()
