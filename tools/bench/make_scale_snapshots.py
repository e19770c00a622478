#!/usr/bin/python3
"""Synthetic snapshot sets for the diagnose-at-scale benchmark, built from a real capture.

Takes one node snapshot file written by `hangscope collect --once` of a real hung gloo job
(store-wait: the ranks wait in dist.barrier, one diverged rank waits in a store key) and writes
NODES files of RANKS_PER_NODE ranks each: every rank is a copy of a real waiting rank of the
capture (its stacks, threads, facts, logs), renumbered (rank, local rank, world size, pid,
RANK/LOCAL_RANK/WORLD_SIZE), except one rank that is a copy of the real diverged rank. The job
key stays the real one, so the whole set is one job.

Usage: make_scale_snapshots.py REAL.json OUT_DIR NODES RANKS_PER_NODE DIVERGED_RANK
"""
import json
import os
import sys


def load_template(path):
    with open(path) as f:
        doc = json.load(f)
    sample = doc["snapshots"][-1]
    ranks = [p for p in sample["processes"] if p.get("identity", {}).get("role") == "rank"]
    if len(ranks) < 2:
        sys.exit(f"{path}: needs at least two rank processes, found {len(ranks)}")
    return doc, ranks


def diverged_template(ranks):
    """The rank whose stack differs from the majority's (the real diverged rank)."""
    def signature(p):
        main = next((t for t in p["threads"] if t["tid"] == p["pid"]), p["threads"][0])
        # Schema 2 refers to shared stacks by id; schema 1 has the frames inline.
        return (main.get("python_stack"), main.get("merged_stack"),
                tuple(f.get("function") for f in main.get("python_frames", [])[:4]))
    counts = {}
    for p in ranks:
        counts[signature(p)] = counts.get(signature(p), 0) + 1
    minority = min(ranks, key=lambda p: counts[signature(p)])
    majority = max(ranks, key=lambda p: counts[signature(p)])
    return majority, minority


_TEXT = {}


def renumber(process, rank, local_rank, world, pid):
    # A fresh copy from the template's JSON text (several times faster than copy.deepcopy:
    # 131,072 ranks are copied).
    text = _TEXT.get(id(process))
    if text is None:
        text = _TEXT[id(process)] = json.dumps(process)
    p = json.loads(text)
    old_pid = p["pid"]
    p["pid"] = pid
    for t in p["threads"]:
        if t["tid"] == old_pid:
            t["tid"] = pid
    identity = p["identity"]
    identity["rank"] = rank
    identity["local_rank"] = local_rank
    identity["world_size"] = world
    # torch.distributed as a rank of the scaled job holds it: its rank in a default group of
    # `world` ranks (sent as its size only, as the agent sends it).
    distributed = p.get("distributed")
    if distributed:
        distributed["rank"] = rank
        distributed["world_size"] = world
        for group in distributed.get("groups", []):
            if group.get("is_default"):
                group.pop("ranks", None)
                group["size"] = world
                group["group_rank"] = rank
    env = p.get("environment", {})
    for key, value in (("RANK", rank), ("LOCAL_RANK", local_rank), ("WORLD_SIZE", world)):
        if key in env:
            env[key] = str(value)
    return p


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    real, out_dir = sys.argv[1], sys.argv[2]
    nodes, per_node, diverged = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    doc, ranks = load_template(real)
    waiting, odd = diverged_template(ranks)
    world = nodes * per_node
    os.makedirs(out_dir, exist_ok=True)
    for n in range(nodes):
        out = {"snapshots": []}
        for sample in doc["snapshots"]:
            s = {k: v for k, v in sample.items() if k != "processes"}
            s["node_name"] = f"node{n:05d}"
            s["hostname"] = s["node_name"]
            processes = []
            for local in range(per_node):
                rank = n * per_node + local
                template = odd if rank == diverged else waiting
                processes.append(renumber(template, rank, local, world, 1000 + local))
            s["processes"] = processes
            out["snapshots"].append(s)
        with open(os.path.join(out_dir, f"node{n:05d}.json"), "w") as f:
            json.dump(out, f, separators=(",", ":"))


if __name__ == "__main__":
    main()
