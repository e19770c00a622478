#!/usr/bin/python3
"""A real torch.distributed (gloo) inference job over TP x PP x DP ranks, hung at one rank.

Written the way users write and launch jobs, not the way hangscope reads them: the ranks come
from one of four launchers, the process groups from vLLM's initialize_model_parallel (the
simulated vLLM of tools/repro/sim: real module paths and function names), and the culprit
rank (``--culprit R``) hangs the job in one of the scenarios below.

Launchers (``--launcher``; one launcher process per node, started by tools/testbed/node.sh
with ``--job``, or alone for one node):
  torchrun      a stand-in for torchrun's elastic agent (it holds no process group) starts the
                node's ranks with RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK,
                ROLE_RANK, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_* in their environment;
                init_process_group(init_method="env://").
  spawn         torch.multiprocessing.spawn from one parent per node (the tutorial pattern):
                the rank is node_index * ranks_per_node + the spawn index, an ARGUMENT of the
                worker function; init_process_group(init_method="tcp://MASTER:PORT", rank=...,
                world_size=...); no RANK, LOCAL_RANK or WORLD_SIZE in any environment.
  vllm-worker   vLLM's multiproc executor: the parent (titled VLLM::EngineCore, or
                VLLM::EngineCore_DP<d> when the node holds one DP replica) starts one
                multiprocessing "spawn" Process per rank (name VllmWorker-<rank>), the rank an
                argument; env:// with MASTER_ADDR/MASTER_PORT but no RANK; after the groups are
                built the worker retitles itself VLLM::Worker[_DP<d>][_PP<p>][_TP<t>].
  ray-actor     Ray actors: the parent stands in for the raylet and starts one worker process
                per rank, retitled ray::RayWorkerWrapper at once (as Ray does when the actor is
                created), the rank an argument; init via tcp://MASTER:PORT.

Layout (``--layout tp=2,pp=2,dp=2``): world = TP x PP x DP = nodes x ranks per node; the groups
are vLLM's (ExternalDP x DP x PP x TP, TP innermost: rank = dp * PP * TP + pp * TP + tp), built
by Worker.init_device -> init_worker_distributed_environment -> initialize_model_parallel on
every rank in the same order (world, TP, PP, DP, EP). The custom all-reduce is disabled
(--disable-custom-all-reduce, as deployments without GPU P2P do; the simulated one spins like
broken P2P) except for symmetric-memory, which needs it.

Scenarios (``--scenario``; STALL_STEP = 2 healthy steps first, so every group has run
collectives before the hang; for tp-skip, pp-chain and dp-stall ``--stall-after SECONDS``
instead runs healthy steps for that long, see below):
  tp-skip           decode steps (the TP all_reduce of RowParallelLinear, then a world barrier
                    at the step's end); at STALL_STEP the culprit takes the empty-shard
                    shortcut, skips its TP all_reduce and waits in the world barrier; its TP
                    peers wait in the TP all_reduce, everyone else in the world barrier. Needs
                    TP >= 2.
  pp-chain          vLLM model steps (Worker.execute_model: DP batch coordination, recv from
                    the previous stage, TP all_reduce, send to the next stage); at STALL_STEP
                    the culprit, a stage before the last, waits for a KV-cache save
                    (wait_for_kv_cache_save, a lock) after its forward and never sends: the
                    next stage waits in recv, its own peers in the next step's collectives.
                    Needs PP >= 2; the culprit's PP rank < PP - 1.
  dp-stall          the same model steps; at STALL_STEP the culprit never gets its batch
                    (prepare_batch, a loop of sleeps) and issues no collective: its DP peers
                    wait in coordinate_batch_across_dp's all_reduce, its TP peers in the
                    forward's all_reduce. Needs DP >= 2.
  init-hang         the culprit never reaches init_process_group (load_checkpoint, sleeping over
                    its shards); every other rank waits inside init_process_group (rank 0 hosts
                    the TCPStore and waits for the workers).
  init-missing      the culprit's process is never started (its launcher says why and announces
                    "rank R absent"); every other rank waits inside init_process_group.
  loop-early-exit   warm-up: every rank runs a loop of all_reduces on the world group (one per
                    CUDA-graph capture size); the culprit's list of sizes is one shorter, so it
                    leaves the loop one iteration early and waits in the next collective, its
                    TP group's barrier; the others wait in the loop's last all_reduce. (gloo:
                    an all_reduce against a barrier on the same group hangs until the group's
                    timeout; against an all_reduce of another size it aborts the process, so
                    the next collective is on another group.) Needs TP >= 2.
  slow-healthy      no hang: model steps with 0.5-1.5 s of work (sleeps) between them, forever;
                    every rank announces "progressing".
  busy-healthy      no hang: model steps back to back, forever, with ``--step-ms MS`` of host
                    work (a sleep) between them (0: none at all, a loop with no pause); every
                    rank announces "progressing". The rhythm of a busy decode server.
  transport-stall   every rank loops on the world group's all_reduce (a step's logits gather)
                    with ``--step-ms`` between steps and announces "waiting" once it runs; the
                    job hangs when the test cuts the link between the nodes' ranks (cluster.sh
                    --fabric, then `cluster.sh cut`): every rank ends up in the same all_reduce,
                    none diverged.
  symmetric-memory  seed A on TP subgroups (TP groups across nodes, e.g. 4 nodes x 1 rank with
                    tp=2,dp=2; torchrun, LOCAL_WORLD_SIZE says which node a rank is on): the
                    culprit's node cannot rendezvous the MNNVL buffer of its TP group and moves
                    on to in_the_same_node_as's barrier; its TP peer waits in the rendezvous
                    (store.wait); the other TP groups finish and wait in the next new_group.
  autotune-cache    seed B on TP subgroups: the culprit leaves a FlashInfer autotune cache file
                    valid for its own (tp_size, tp_rank) on its node before starting; in
                    kernel_warmup -> flashinfer_autotune it hits the cache and waits in the
                    world barrier while its TP peers tune and wait in _profile_single_kernel's
                    all_reduce on the tune group (the TP group's CPU group).
  compiled-dag      seed C with vLLM's groups (--launcher ray-actor, PP = 2, DP = 1): Ray
                    compiled-graph workers (ray::RayWorkerWrapper.execute_model_ray) run
                    do_exec_tasks; the culprit, a stage-0 worker, stalls in compute at step 2;
                    its TP peers wait in the TP group's all_reduce, stage 1 in Channel.read
                    (dist.recv). Node 0's launcher also starts the graph's driver
                    (gloo_barrier_hang.py --driver: VLLM::EngineCore, no rank), which announces
                    "driver pid <pid> waiting".

``--stall-after SECONDS`` (tp-skip, pp-chain, dp-stall): a job that runs healthy, then hangs,
as a watcher sees one. Every rank announces ``rank <r> pid <pid> progressing`` before its first
step and steps on (with ``--step-ms`` of host work between steps, as busy-healthy); the culprit
takes the scenario's stall path at its first step that starts SECONDS or more after its own
first step (instead of at STALL_STEP) and announces ``rank <r> pid <pid> diverged`` then (one
more line, the only one telling when the hang began); its peers announce nothing more and
hang as the scenario says. ``--step-ms`` also paces tp-skip, pp-chain and dp-stall without
``--stall-after`` (default 0: back to back).

Every rank prints one line ``rank <r> pid <pid> <waiting|diverged|progressing>`` (one
write(2)) before its blocking step (init-hang: before init_process_group; the culprit before
load_checkpoint), which tools/testbed/cluster.sh waits for; for init-missing the launcher prints
``rank <r> absent``. Every rank and helper dies with its parent (PR_SET_PDEATHSIG) and every
launcher with its node.
"""
import argparse
import ctypes
import datetime
import itertools
import multiprocessing
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SIM_DIR = os.path.join(HERE, "sim")
LAUNCHERS = ("torchrun", "spawn", "vllm-worker", "ray-actor")
SCENARIOS = ("tp-skip", "pp-chain", "dp-stall", "init-hang", "init-missing", "loop-early-exit",
             "slow-healthy", "busy-healthy", "transport-stall", "symmetric-memory",
             "autotune-cache", "compiled-dag")
# The healthy steps every rank runs before the culprit diverges.
STALL_STEP = 2
# loop-early-exit: the CUDA-graph capture sizes (one all_reduce each); the culprit's list lacks
# the last one.
CAPTURE_SIZES = (1, 2, 4, 8, 16)
# The hidden size of the simulated model's activations.
HIDDEN_SIZE = 64
# ray-actor: the title Ray gives an actor's worker process.
RAY_ACTOR_TITLE = "ray::RayWorkerWrapper"


def die_with_parent():
    """PR_SET_PDEATHSIG(SIGKILL): the process dies with its parent (torchrun's agent, the spawn
    parent, vLLM's executor and Ray's raylet all tear their workers down when they go)."""
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_PDEATHSIG = 1
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def announce(line):
    """One write(2) per line (lines of several ranks sharing stdout never interleave), then the
    same in vLLM's log format (its timestamp tells hangscope when the rank went quiet)."""
    os.write(1, (line + "\n").encode())
    stamp = time.strftime("%m-%d %H:%M:%S", time.gmtime())
    os.write(1, f"INFO {stamp} [parallel_job.py] {line}\n".encode())


def log(message):
    """A log line in vLLM's format on stdout (one write(2))."""
    stamp = time.strftime("%m-%d %H:%M:%S", time.gmtime())
    os.write(1, f"INFO {stamp} [parallel_job.py] {message}\n".encode())


def parse_layout(text):
    """'tp=2,pp=2,dp=2' -> {'tp': 2, 'pp': 2, 'dp': 2} (missing sizes are 1)."""
    layout = {"tp": 1, "pp": 1, "dp": 1}
    for part in filter(None, text.split(",")):
        name, _, value = part.partition("=")
        if name not in layout or not value.isdigit() or int(value) < 1:
            raise ValueError(f"--layout: expected tp=N,pp=N,dp=N, got {text!r}")
        layout[name] = int(value)
    return layout


def coordinates(rank, layout):
    """vLLM's place of a global rank: (dp, pp, tp) for rank = dp * PP * TP + pp * TP + tp."""
    tp, pp = layout["tp"], layout["pp"]
    return rank // (tp * pp), rank // tp % pp, rank % tp


def scenario_error(args, layout, world_size):
    """Why the scenario cannot run with this layout, launcher and culprit (None if it can)."""
    if layout["tp"] * layout["pp"] * layout["dp"] != world_size:
        return (f"--layout {args.layout}: TP x PP x DP must be the world size "
                f"({args.nodes} nodes x {args.ranks_per_node} ranks = {world_size})")
    if not 0 <= args.culprit < world_size:
        return f"--culprit must be a rank (0..{world_size - 1}), got {args.culprit}"
    dp, pp, tp = coordinates(args.culprit, layout)
    needs = {"tp-skip": ("tp", 2), "loop-early-exit": ("tp", 2), "pp-chain": ("pp", 2),
             "dp-stall": ("dp", 2), "autotune-cache": ("tp", 2), "symmetric-memory": ("tp", 2),
             "compiled-dag": ("pp", 2)}
    if args.scenario in needs:
        name, size = needs[args.scenario]
        if layout[name] < size:
            return f"--scenario {args.scenario} needs {name.upper()} >= {size}"
    if args.scenario == "pp-chain" and pp == layout["pp"] - 1:
        return "--scenario pp-chain: the culprit must be in a stage before the last"
    if args.scenario == "compiled-dag":
        if args.launcher != "ray-actor" or layout["pp"] != 2 or layout["dp"] != 1:
            return "--scenario compiled-dag needs --launcher ray-actor, PP = 2 and DP = 1"
        if pp != 0:
            return "--scenario compiled-dag: the culprit must be in pipeline stage 0"
    if args.scenario == "symmetric-memory":
        if args.launcher != "torchrun":
            return "--scenario symmetric-memory needs --launcher torchrun (LOCAL_WORLD_SIZE)"
        if layout["tp"] <= args.ranks_per_node:
            return "--scenario symmetric-memory needs TP groups across nodes (TP > ranks per node)"
    if args.stall_after is not None and args.scenario not in ("tp-skip", "pp-chain", "dp-stall"):
        return "--stall-after applies to tp-skip, pp-chain and dp-stall only"
    if args.scenario == "init-missing" and args.launcher == "spawn":
        return "--scenario init-missing: torch.multiprocessing.spawn starts every index"
    return None


# ---------------------------------------------------------------------------------------------
# The rank: what the worker does once its launcher started it.


def load_checkpoint(rank):
    """init-hang: the culprit loads its checkpoint shards before joining the job (as a model
    loader reading safetensors from a slow network filesystem): it never finishes."""
    shard = 0
    while True:
        read_checkpoint_shard(rank, shard)
        shard += 1


def read_checkpoint_shard(rank, shard):
    """Reads one shard (model-0000N-of-00163.safetensors); on a stalled filesystem, slowly."""
    time.sleep(1.0)


def prepare_batch(step, stall):
    """The scheduler's next batch for this rank (tokenised requests). dp-stall: the culprit's
    batch never comes (it polls its input queue, sleeping, and issues no collective)."""
    from vllm.v1.core.sched.output import SchedulerOutput
    while stall:
        time.sleep(0.05)  # waiting for the detokenizer / input queue
    return SchedulerOutput(total_num_scheduled_tokens=8)


_kv_save_lock = threading.Lock()


def wait_for_kv_cache_save():
    """pp-chain: the culprit waits for its KV-cache save to finish before its step's output may
    leave (a KV connector's wait_for_save); the transfer thread never releases the lock."""
    _kv_save_lock.acquire()
    _kv_save_lock.acquire()


def row_parallel_linear_forward(hidden_states, local_tokens):
    """A RowParallelLinear layer's forward: the local matmul, then the all-reduce across the
    tensor-parallel group. tp-skip: a rank whose shard got no tokens takes an early-exit
    shortcut and skips the all-reduce (the bug: its TP peers still all-reduce)."""
    from vllm.distributed.communication_op import tensor_model_parallel_all_reduce
    if local_tokens == 0:
        return hidden_states
    return tensor_model_parallel_all_reduce(hidden_states)


def decode_step_with_barrier(step, skip):
    """tp-skip: one decode step as a hand-written loop does it: the layer's forward (TP
    all_reduce), then a barrier over the whole job at the step's end."""
    import torch
    from vllm.distributed.parallel_state import get_world_group
    hidden_states = torch.ones(8, HIDDEN_SIZE)
    row_parallel_linear_forward(hidden_states, local_tokens=0 if skip else 8)
    sync_step_end(get_world_group())


def sync_step_end(world):
    """The step's end: a barrier over every rank (the world group's CPU group)."""
    world.barrier()


def capture_cudagraphs(capture_sizes):
    """loop-early-exit: vLLM-style warm-up, one dummy forward per CUDA-graph capture size, each
    with an all_reduce on the world group agreeing on the padded batch; then the TP group's
    barrier before serving."""
    import torch
    from vllm.distributed.parallel_state import get_tp_group, get_world_group
    for size in capture_sizes:
        num_tokens = torch.tensor([size], dtype=torch.int64)
        get_world_group().all_reduce(num_tokens)
    get_tp_group().barrier()


def cudagraph_capture_sizes(rank, culprit):
    """The capture sizes this rank computed (from its free memory): the culprit's list is one
    shorter than everyone else's."""
    if rank == culprit:
        return CAPTURE_SIZES[:-1]
    return CAPTURE_SIZES


class StallClock:
    """When a hanging scenario's culprit takes its stall path: at STALL_STEP (every rank
    announces "waiting" or "diverged" there), or with --stall-after at the culprit's first step
    that starts that many seconds after its own first step (every rank announces "progressing"
    before its first step, the culprit "diverged" when it stalls)."""

    def __init__(self, rank, is_culprit, stall_after=None):
        self.rank = rank
        self.is_culprit = is_culprit
        self.stall_after = stall_after
        self.started = None
        self.stalled = False

    def reached(self, step):
        """Whether `step` is the stall step (announcing it); true once at most."""
        if self.stalled:
            return False
        if self.stall_after is None:
            if step != STALL_STEP:
                return False
            announce(f"rank {self.rank} pid {os.getpid()} "
                     f"{'diverged' if self.is_culprit else 'waiting'}")
            self.stalled = True
            return True
        if self.started is None:
            self.started = time.monotonic()
            announce(f"rank {self.rank} pid {os.getpid()} progressing")
        if not self.is_culprit or time.monotonic() - self.started < self.stall_after:
            return False
        announce(f"rank {self.rank} pid {os.getpid()} diverged")
        self.stalled = True
        return True


def serve_model_steps(worker, rank, scenario, culprit, step_seconds=0.0, stall_after=None):
    """The worker's busy loop (vLLM's worker_busy_loop): the next batch, then
    Worker.execute_model, step after step. pp-chain and dp-stall hang at STALL_STEP (or, with
    stall_after, once the culprit has stepped that many seconds: StallClock), with
    step_seconds of work between steps; slow-healthy never hangs (0.5-1.5 s of work between
    steps), nor does busy-healthy (step_seconds of work between steps)."""
    is_culprit = rank == culprit
    rng = random.Random(rank)
    stall = StallClock(rank, is_culprit, stall_after)
    for step in itertools.count():
        stalls = False
        if scenario == "slow-healthy":
            if step == 0:
                announce(f"rank {rank} pid {os.getpid()} progressing")
            detokenize_and_stream(rng.uniform(0.5, 1.5))
        elif scenario == "busy-healthy":
            if step == 0:
                announce(f"rank {rank} pid {os.getpid()} progressing")
            if step_seconds > 0:
                detokenize_and_stream(step_seconds)
        else:
            if step > 0 and step_seconds > 0:
                detokenize_and_stream(step_seconds)
            stalls = stall.reached(step) and is_culprit
            if scenario == "pp-chain" and stalls:
                worker.model_runner._simulate_after_forward = wait_for_kv_cache_save
        batch = prepare_batch(step, stall=scenario == "dp-stall" and stalls)
        worker.execute_model(batch)


def gather_logits_forever(rank, step_seconds):
    """transport-stall: each step's logits all-reduced over the world group (vLLM's
    GroupCoordinator.all_reduce on the world's CPU group), forever."""
    import torch
    from vllm.distributed.parallel_state import get_world_group
    logits = torch.ones(HIDDEN_SIZE)
    for step in itertools.count():
        get_world_group().all_reduce(logits)
        if step == 0:
            announce(f"rank {rank} pid {os.getpid()} waiting")
        if step_seconds > 0:
            time.sleep(step_seconds)


def detokenize_and_stream(seconds):
    """slow-healthy: the CPU-side work between steps (detokenising, streaming to clients)."""
    time.sleep(seconds)


def run_rank(args, rank, local_rank, world_size, init_method):
    """One rank: the scenario's steps before init, Worker.init_device (torch.distributed and
    vLLM's groups), then the scenario."""
    die_with_parent()
    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
    if SIM_DIR not in sys.path:
        sys.path.insert(0, SIM_DIR)
    if HERE not in sys.path:
        sys.path.insert(1, HERE)
    layout = parse_layout(args.layout)
    dp_rank, pp_rank, tp_rank = coordinates(rank, layout)
    is_culprit = rank == args.culprit
    if args.launcher == "ray-actor":
        import setproctitle  # Ray titles the actor's worker process when the actor is created
        setproctitle.setproctitle(RAY_ACTOR_TITLE)
    if args.scenario == "autotune-cache" and is_culprit:
        import gloo_barrier_hang  # a cache file for this rank's (tp_size, tp_rank) only
        gloo_barrier_hang.leave_autotune_cache(layout["tp"], tp_rank)
    from vllm.config import ParallelConfig
    from vllm.v1.worker.gpu_worker import Worker
    if args.scenario in ("init-hang", "init-missing"):
        # After the imports: an announced rank is at init_process_group's door (or, the culprit,
        # in its checkpoint), not still importing torch.
        announce(f"rank {rank} pid {os.getpid()} {'diverged' if is_culprit else 'waiting'}")
        if is_culprit:
            load_checkpoint(rank)
    parallel_config = ParallelConfig(
        tensor_parallel_size=layout["tp"], pipeline_parallel_size=layout["pp"],
        data_parallel_size=layout["dp"], data_parallel_rank=dp_rank, rank=pp_rank * layout["tp"]
        + tp_rank, disable_custom_all_reduce=args.scenario != "symmetric-memory")
    worker = Worker(rank=rank, local_rank=local_rank, parallel_config=parallel_config,
                    distributed_init_method=init_method)
    if args.scenario == "symmetric-memory":
        from vllm.distributed.device_communicators import custom_all_reduce
        local_world_size = int(os.environ["LOCAL_WORLD_SIZE"])
        failing_node = args.culprit // local_world_size
        custom_all_reduce.torch_symm_mem._simulate_unsupported_ranks(
            [r for r in range(world_size) if r // local_world_size == failing_node])
        announce(f"rank {rank} pid {os.getpid()} "
                 f"{'diverged' if rank // local_world_size == failing_node else 'waiting'}")
    worker.init_device(backend="gloo")
    if args.launcher == "vllm-worker":
        setup_proc_title_and_log_prefix()
    scenario = args.scenario
    if scenario in ("init-hang", "init-missing", "symmetric-memory"):
        announce(f"rank {rank} left init")
        return
    if scenario == "tp-skip":
        stall = StallClock(rank, is_culprit, args.stall_after)
        for step in itertools.count():
            skip = stall.reached(step) and is_culprit
            decode_step_with_barrier(step, skip)
            if args.step_ms > 0:
                detokenize_and_stream(args.step_ms / 1000)
    elif scenario == "loop-early-exit":
        announce(f"rank {rank} pid {os.getpid()} {'diverged' if is_culprit else 'waiting'}")
        capture_cudagraphs(cudagraph_capture_sizes(rank, args.culprit))
        announce(f"rank {rank} left the warm-up")
    elif scenario == "autotune-cache":
        from vllm.model_executor.warmup.kernel_warmup import kernel_warmup
        announce(f"rank {rank} pid {os.getpid()} {'diverged' if is_culprit else 'waiting'}")
        kernel_warmup(worker)
        announce(f"rank {rank} left the warm-up")
    elif scenario == "compiled-dag":
        run_compiled_dag_worker(rank, layout, args.culprit)
    elif scenario == "transport-stall":
        gather_logits_forever(rank, args.step_ms / 1000)
    else:
        serve_model_steps(worker, rank, scenario, args.culprit, args.step_ms / 1000,
                          args.stall_after)


def setup_proc_title_and_log_prefix():
    """vLLM's WorkerProc.setup_proc_title_and_log_prefix, once the groups exist: the process
    title VLLM::Worker with _DP<d>, _PP<p>, _TP<t> for each dimension of size > 1."""
    import setproctitle
    from vllm.distributed.parallel_state import get_dp_group, get_pp_group, get_tp_group
    process_name = "Worker"
    if get_dp_group().world_size > 1:
        process_name += f"_DP{get_dp_group().rank_in_group}"
    if get_pp_group().world_size > 1:
        process_name += f"_PP{get_pp_group().rank_in_group}"
    if get_tp_group().world_size > 1:
        process_name += f"_TP{get_tp_group().rank_in_group}"
    setproctitle.setproctitle(f"VLLM::{process_name}")


def run_compiled_dag_worker(rank, layout, culprit):
    """Seed C with vLLM's groups: the compiled graph's actor loop (do_exec_tasks) on a thread of
    Ray's system concurrency group, the TP all_reduce on the TP GroupCoordinator's device
    group; stage 1 reads stage 0's output from a Channel (dist.recv)."""
    import torch
    from ray.dag.compiled_dag_node import ExecutableTask, do_exec_tasks, schedule_for
    from ray.experimental.channel import Channel
    from vllm.distributed.parallel_state import get_pp_group, get_tp_group
    from vllm.v1.executor.ray_utils import RayWorkerWrapper
    import gloo_barrier_hang
    import setproctitle
    setproctitle.setproctitle(f"{RAY_ACTOR_TITLE}.execute_model_ray")
    tp_size = layout["tp"]
    pp_rank = get_pp_group().rank_in_group
    worker = RayWorkerWrapper(rank, pp_rank, layout["pp"], tp_size, get_tp_group().device_group)
    if rank == culprit:
        worker._stall_at_step = gloo_barrier_hang.COMPILED_DAG_STALL_STEP
    scheduler_output = torch.ones(4)
    if pp_rank == 0:
        tasks = [ExecutableTask("execute_model_ray", resolved_args=[scheduler_output])]
    else:
        tasks = [ExecutableTask("execute_model_ray",
                                input_channels=[Channel(src=get_pp_group().prev_rank)],
                                resolved_args=[scheduler_output])]
    announce(f"rank {rank} pid {os.getpid()} {'diverged' if rank == culprit else 'waiting'}")
    thread = threading.Thread(target=do_exec_tasks, args=(worker, tasks, schedule_for(tasks)),
                              name="ray_system_concurrency_group")
    thread.start()
    thread.join()


# ---------------------------------------------------------------------------------------------
# The launchers: one process per node.


def worker_command(args, extra):
    """The command line of a rank process started by a launcher (this script, --rank-worker)."""
    return [sys.executable, os.path.abspath(__file__), "--rank-worker", "--launcher",
            args.launcher, "--layout", args.layout, "--scenario", args.scenario, "--culprit",
            str(args.culprit), "--nodes", str(args.nodes), "--node-index", str(args.node_index),
            "--ranks-per-node", str(args.ranks_per_node), "--master-addr", args.master_addr,
            "--master-port", str(args.master_port), "--timeout", str(args.timeout),
            "--step-ms", str(args.step_ms),
            *(["--stall-after", str(args.stall_after)] if args.stall_after is not None else []),
            *extra]


def clean_environment():
    """The launcher's environment without any rank variable (a fresh shell's)."""
    return {name: value for name, value in os.environ.items()
            if name not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
                            "GROUP_RANK", "ROLE_RANK", "MASTER_ADDR", "MASTER_PORT")}


def absent_reason(launcher, rank):
    """init-missing: why the launcher did not start the culprit, as that launcher says it."""
    if launcher == "ray-actor":
        return (f"Warning: The following resource request cannot be scheduled right now: "
                f"{{'GPU': 1.0}}. The actor RayWorkerWrapper for rank {rank} is pending "
                f"(placement group bundle unavailable)")
    if launcher == "vllm-worker":
        return (f"WorkerProc for rank {rank} not started: CUDA_VISIBLE_DEVICES lists fewer "
                f"devices than the node's ranks")
    return (f"torch.distributed.elastic: local worker for rank {rank} not started "
            f"(--nproc-per-node smaller on this node)")


def local_ranks(args, world_size):
    """This node's global ranks (node_index * ranks_per_node + local index), and which of them
    the launcher leaves out (init-missing: the culprit)."""
    ranks = [args.node_index * args.ranks_per_node + i for i in range(args.ranks_per_node)]
    absent = [r for r in ranks if args.scenario == "init-missing" and r == args.culprit]
    for rank in absent:
        log(absent_reason(args.launcher, rank))
        os.write(1, f"rank {rank} absent\n".encode())
    return ranks, absent


def wait_children(processes):
    """Runs until every child has ended (reaping each as it ends), as an agent monitors its
    workers."""
    while [p.poll() for p in processes].count(None):
        time.sleep(0.5)


def launch_torchrun(args, world_size):
    """torchrun's elastic agent (static rendezvous, the agent itself holds no process group):
    one worker process per local rank with the variables torchrun sets."""
    ranks, absent = local_ranks(args, world_size)
    processes = []
    for local_rank, rank in enumerate(ranks):
        if rank in absent:
            continue
        env = dict(clean_environment(), RANK=str(rank), LOCAL_RANK=str(local_rank),
                   WORLD_SIZE=str(world_size), LOCAL_WORLD_SIZE=str(args.ranks_per_node),
                   GROUP_RANK=str(args.node_index), GROUP_WORLD_SIZE=str(args.nodes),
                   ROLE_RANK=str(rank), ROLE_NAME="default", ROLE_WORLD_SIZE=str(world_size),
                   MASTER_ADDR=args.master_addr, MASTER_PORT=str(args.master_port),
                   TORCHELASTIC_RUN_ID="parallel-job", TORCHELASTIC_RESTART_COUNT="0",
                   TORCHELASTIC_MAX_RESTARTS="0", TORCHELASTIC_USE_AGENT_STORE="False",
                   OMP_NUM_THREADS="1")
        processes.append(subprocess.Popen(worker_command(args, []), env=env))
    wait_children(processes)


def spawn_worker(index, args, world_size):
    """The tutorial's worker function, fn(i, *args): the rank from the node index and the spawn
    index, init_process_group over tcp:// with rank and world size as arguments."""
    rank = args.node_index * args.ranks_per_node + index
    run_rank(args, rank, index, world_size,
             f"tcp://{args.master_addr}:{args.master_port}")


def launch_spawn(args, world_size):
    """torch.multiprocessing.spawn(fn, args, nprocs) from the node's one parent: no rank
    variable in any environment, the rank an argument."""
    import torch.multiprocessing as mp
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"):
        os.environ.pop(name, None)
    mp.spawn(spawn_worker, args=(args, world_size), nprocs=args.ranks_per_node, join=True)


def vllm_worker_main(args, rank, local_rank, world_size):
    """vLLM's WorkerProc.worker_main: the worker process's entry point (the rank and local rank
    are arguments; the executor put MASTER_ADDR/MASTER_PORT in the environment)."""
    run_rank(args, rank, local_rank, world_size, "env://")


def launch_vllm_worker(args, world_size):
    """vLLM's MultiprocExecutor in its engine-core process: one multiprocessing 'spawn' Process
    per local rank (WorkerProc.make_worker_process), env:// with MASTER_ADDR/MASTER_PORT set,
    no rank variable; the parent's title is VLLM::EngineCore[_DP<d>]."""
    import setproctitle
    layout = parse_layout(args.layout)
    replica = layout["tp"] * layout["pp"]
    title = "VLLM::EngineCore"
    if layout["dp"] > 1 and args.ranks_per_node == replica:
        title += f"_DP{args.node_index}"
    setproctitle.setproctitle(title)
    os.environ["MASTER_ADDR"] = args.master_addr
    os.environ["MASTER_PORT"] = str(args.master_port)
    ranks, absent = local_ranks(args, world_size)
    context = multiprocessing.get_context("spawn")
    processes = []
    for local_rank, rank in enumerate(ranks):
        if rank in absent:
            continue
        process = context.Process(target=vllm_worker_main, name=f"VllmWorker-{rank}",
                                  kwargs=dict(args=args, rank=rank, local_rank=local_rank,
                                              world_size=world_size), daemon=True)
        process.start()
        processes.append(process)
    while any(p.is_alive() for p in processes):
        time.sleep(0.5)


def launch_ray_actor(args, world_size):
    """A stand-in for Ray's raylet: one worker process per actor (rank an argument), retitled
    ray::RayWorkerWrapper; for compiled-dag node 0 also runs the graph's driver (vLLM's
    EngineCore with the RayDistributedExecutor, no rank)."""
    ranks, absent = local_ranks(args, world_size)
    env = clean_environment()
    processes = []
    for local_rank, rank in enumerate(ranks):
        if rank in absent:
            continue
        processes.append(subprocess.Popen(
            worker_command(args, ["--rank", str(rank), "--local-rank", str(local_rank)]),
            env=env))
    if args.scenario == "compiled-dag" and args.node_index == 0:
        processes.append(subprocess.Popen(
            [sys.executable, os.path.join(HERE, "gloo_barrier_hang.py"), "--driver",
             "--scenario", "compiled-dag", "--world-size", str(world_size),
             "--diverged-rank", str(args.culprit)], env=env))
    wait_children(processes)


def free_port():
    """A free TCP port on 127.0.0.1 (one node alone: the job's MASTER_PORT)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    """The node's launcher (default), or a rank worker (--rank-worker, started by one)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--launcher", choices=LAUNCHERS, default="torchrun")
    parser.add_argument("--layout", default="tp=2", help="e.g. tp=2,pp=2,dp=2")
    parser.add_argument("--scenario", choices=SCENARIOS, default="tp-skip")
    parser.add_argument("--culprit", type=int, default=1, help="the rank that diverges")
    parser.add_argument("--nodes", type=int, default=1)
    parser.add_argument("--node-index", type=int, default=0)
    parser.add_argument("--ranks-per-node", type=int, default=None,
                        help="default: the layout's world size (one node)")
    parser.add_argument("--master-addr", default="127.0.0.1")
    parser.add_argument("--master-port", type=int, default=0, help="default: a free port")
    parser.add_argument("--timeout", type=int, default=1800, help="process-group timeout, s")
    parser.add_argument("--step-ms", type=float, default=0.0,
                        help="busy-healthy, transport-stall, tp-skip, pp-chain, dp-stall: host "
                        "work between steps, ms")
    parser.add_argument("--stall-after", type=float, default=None, metavar="SECONDS",
                        help="tp-skip, pp-chain, dp-stall: healthy steps for this long, then the "
                        "culprit stalls (instead of at step %d)" % STALL_STEP)
    parser.add_argument("--rank-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--local-rank", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    try:
        layout = parse_layout(args.layout)
    except ValueError as e:
        parser.error(str(e))
    if args.ranks_per_node is None:
        args.ranks_per_node = layout["tp"] * layout["pp"] * layout["dp"] // args.nodes
    world_size = args.nodes * args.ranks_per_node
    error = scenario_error(args, layout, world_size)
    if error:
        parser.error(error)
    if args.master_port == 0:
        args.master_port = free_port()
    if args.rank_worker:
        if args.launcher == "torchrun":
            # torchrun's variables, as a script reads them.
            run_rank(args, int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"]),
                     int(os.environ["WORLD_SIZE"]), "env://")
        else:
            run_rank(args, args.rank, args.local_rank, world_size,
                     f"tcp://{args.master_addr}:{args.master_port}")
        return
    die_with_parent()
    {"torchrun": launch_torchrun, "spawn": launch_spawn, "vllm-worker": launch_vllm_worker,
     "ray-actor": launch_ray_actor}[args.launcher](args, world_size)


if __name__ == "__main__":
    main()
