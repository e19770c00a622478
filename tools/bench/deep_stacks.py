#!/usr/bin/python3
"""A process of THREADS threads, each parked THREAD_DEPTH + i frames deep in its own recursion:
the deep-stack target of tools/bench/read_cost.py. Prints "ready" once all of them wait.

Usage: deep_stacks.py [THREADS] [DEPTH]"""
import os
import sys
import threading

THREADS = int(sys.argv[1]) if len(sys.argv) > 1 else 64
DEPTH = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
STOP = threading.Event()
sys.setrecursionlimit(DEPTH + THREADS + 1000)
threading.stack_size(256 << 20)


def recurse(depth, ready):
    if depth == 0:
        ready.release()
        STOP.wait()
        return 0
    return recurse(depth - 1, ready) + 1


ready = threading.Semaphore(0)
for i in range(THREADS):
    threading.Thread(target=recurse, args=(DEPTH + i, ready), daemon=True).start()
for _ in range(THREADS):
    ready.acquire()
os.write(1, b"ready\n")
STOP.wait()
