#!/usr/bin/python3
"""A real torch.distributed (gloo) job hung the way multi-node inference jobs hang.

Scenarios (``--scenario``; the diverged rank is ``--diverged-rank``):
  store-wait (default)  the others wait in ``dist.barrier()``; the diverged rank waits in
                        ``load_weights`` for a TCPStore key nobody sets.
  collective-mismatch   the others wait in ``dist.barrier()`` (default group); the diverged rank
                        waits in ``dist.all_reduce`` on another gloo group (``cpu_group``).
  busy                  the others wait in ``dist.barrier()``; the diverged rank spins in Python.
  stopped               the others wait in ``dist.barrier()``; the diverged rank stopped itself
                        (SIGSTOP, state T) on its way to the barrier.
  store-exit            every rank waits in a store-based barrier for a rank that exited
                        (os._exit) before arriving; never rank 0, which hosts the TCPStore.
  uninterruptible       the others wait in ``dist.barrier()``; the diverged rank sits in state D:
                        posix_spawn (CLONE_VFORK) of a child that blocks opening a FIFO.
  allreduce-loop        no hang: every rank loops on small all-reduces (announces "progressing").
  store-steps           no hang until a rank dies: every rank loops on steps of host work
                        (HANGSCOPE_STEP_SECONDS, default 0.2 s) and a store-based step barrier
                        (keys step/<n>/<rank> on the job's TCPStore), as weight-sync and
                        checkpoint loops coordinate through the store (announces
                        "progressing"). Kill a rank other than 0 and its peers wait in the
                        store barrier forever (a store wait, unlike gloo's pairs, never sees a
                        peer die).
  pipeline              two pipeline stages (even world size >= 4, titles VLLM::Worker_PP<s>_TP<t>):
                        the diverged stage-0 rank blocks on a lock and never sends; its stage-0
                        peers sent and wait in the stage barrier; stage 1 waits in dist.recv.
  collective-behind     a simulated flight recorder on every rank (world size >= 2;
                        tools/repro/flight_recorder_sim.py): every rank runs a decode loop of
                        all-reduces on the world group, each recorded (pg "0" / "default_pg");
                        the diverged rank does 5 steps, then blocks in prepare_batch (its last
                        collective: #5 completed); the others wait in all-reduce #6 (started).
                        Each rank's dump thread makes the fifo
                        ${TORCH_NCCL_DEBUG_INFO_PIPE_FILE}<rank>.pipe and, each time something
                        is written into it (hangscope --trigger-fr-dump), writes the dump,
                        torch's pickle, to ${TORCH_NCCL_DEBUG_INFO_TEMP_FILE}<rank>; never
                        before. The ranks need both variables; the launcher sets them (below).

Seed scenarios, with the simulated vLLM / FlashInfer / Ray / torch symmetric-memory modules of
tools/repro/sim (real module paths and function names; see its README.md):
  symmetric-memory      seed A (two or more nodes; node of a rank = RANK // LOCAL_WORLD_SIZE):
                        every rank builds vLLM's TP GroupCoordinator (all ranks); in
                        CustomAllreduce._init_mnnvl_buffer the symmetric-memory rendezvous fails
                        fast on the diverged rank's node, whose ranks log "Custom collectives
                        are disabled ..." and wait in in_the_same_node_as's barrier; the other
                        node's ranks wait inside rendezvous (store.wait) forever.
  autotune-cache        seed B: the diverged rank leaves a FlashInfer autotune cache file
                        valid for it alone ($VLLM_CACHE_ROOT/flashinfer_autotune_cache/...)
                        before starting; in kernel_warmup -> flashinfer_autotune it hits the
                        cache and waits in the world barrier; the others tune and wait in
                        _profile_single_kernel's all-reduce on the tune group.
  compiled-dag          seed C: PP=2 x TP=world/2 (even world size >= 2), Ray compiled-graph
                        workers (titles ray::RayWorkerWrapper.execute_model_ray) run
                        do_exec_tasks on a thread; the diverged stage-0 rank stalls in compute
                        in execute_model_ray after two steps; its TP peers wait in the
                        all-reduce, stage 1 waits in Channel.read (dist.recv). Plus the
                        graph's driver (--driver; the launcher, or node.sh on node 0, starts
                        it), vLLM's EngineCore process (title VLLM::EngineCore, no rank: none
                        of RANK, LOCAL_RANK, LOCAL_WORLD_SIZE, WORLD_SIZE, MASTER_ADDR,
                        MASTER_PORT in its environment): EngineCoreProc.run_busy_loop ->
                        EngineCore.step -> RayDistributedExecutor.execute_model ->
                        CompiledDAGRef.get -> CompiledDAG._execute_until ->
                        SynchronousReader.read -> Channel.read, blocked in read(2) on a pipe
                        nobody writes (state S; the last stage's output never comes; real
                        Ray raises RayChannelTimeoutError after RAY_CGRAPH_get_timeout, 300 s
                        under vLLM, the simulation waits forever). It announces
                            driver pid <pid> waiting
                        and logs "RayDistributedExecutor: waiting for the compiled graph's
                        output (RAY_CGRAPH_get_timeout=300 s)".

More vLLM hangs on the same simulated modules (one node, the local launcher):
  gpu-p2p-spin          broken GPU P2P (world size 2, 4, 6, 8 or 16; no diverged rank, every
                        rank announces "progressing"): the launcher writes vLLM's P2P access
                        cache ($VLLM_CACHE_ROOT/gpu_p2p_access_cache_for_<devices>.json, every
                        pair true); every rank builds vLLM's TP GroupCoordinator (custom
                        all-reduce enabled) and runs one model step, whose all-reduce
                        (GroupCoordinator.all_reduce -> CudaCommunicator.all_reduce ->
                        CustomAllreduce.custom_all_reduce -> all_reduce) spins in Python (state
                        R) for peer flags that never arrive; rank 0 logs the shm_broadcast
                        warning "No available shared memory broadcast block found in 60
                        seconds ..." to stderr once before it spins.
  shm-broadcast-skip    /dev/shm full (root; --diverged-rank 0): the launcher re-executes
                        itself under unshare --mount with a 64 KiB tmpfs on /dev/shm, filled;
                        building the TP group, CustomAllreduce.__init__ -> in_the_same_node_as:
                        its source (rank 0) cannot create the shared-memory segment (ENOSPC),
                        logs it, skips the broadcast and waits in the flags' all_reduce; the
                        others wait in broadcast_object_list.
  warmup-timeout        cold torch.compile cache on the diverged rank: the launcher fills
                        $VLLM_CACHE_ROOT/torch_compile_cache/<hash>/rank_<r>_0/backbone for the
                        other ranks; in Worker.compile_or_warm_up_model -> _dummy_run ->
                        VllmBackend.__call__ they load their graphs and wait in _dummy_run's
                        all_reduce on the world group; the diverged rank compiles forever
                        (InductorAdaptor.compile, pure Python, state R).
  dp-dummy-desync       vLLM#28224, DP = world size >= 2 (DPEngineCoreProc.run_busy_loop): the
                        others joined a wave (START_DP_WAVE) and, without requests, run a dummy
                        batch that waits in coordinate_batch_across_dp's all-reduce (_run_ar);
                        the diverged rank took the wave for finished and waits in
                        _process_input_queue (input_queue.get()). Each engine also joins
                        vLLM's stateless DP group (its own TCPStore at VLLM_DP_MASTER_PORT,
                        outside torch's registry), which has_unfinished_dp all-reduces on.
  shm-ring-stall        a reader stalls on vLLM's shared-memory broadcast ring (world size >= 3,
                        --diverged-rank a reader, 1..N-1): rank 0 writes one scheduler output
                        per step into a MessageQueue, a real ShmRingBuffer in one SharedMemory
                        segment /dev/shm/psm_<random> of vLLM's layout and size (10 blocks of
                        10 MiB, N-1 readers: (10 MiB + N) x 10 bytes), which every rank maps;
                        ranks 1..N-1 are its readers 0..N-2 (the name comes with
                        broadcast_object_list on the world group). The diverged rank reads 3
                        blocks and blocks in the third's execute_model ->
                        _compile_graph_for_batch (threading.Event.wait); the writer fills the
                        ring and spins in MessageQueue.acquire_write (enqueue; state R, as
                        vLLM's writer) for a block it never reads, logging the shm_broadcast
                        warning "No available shared memory broadcast block found in 60
                        seconds ..." to stderr once; the other readers read every block and
                        wait in acquire_read (dequeue; sched_yield, after 10 s idle
                        time.sleep(0.1)). At the hang every block is written, read by every
                        reader but the diverged one. Each rank announces when it starts its
                        final wait; rank 0 first prints "ring /dev/shm/psm_<name>".
The launcher gives autotune-cache, gpu-p2p-spin and warmup-timeout a temporary VLLM_CACHE_ROOT
(removed when it ends, also on SIGTERM) unless VLLM_CACHE_ROOT is set. For collective-behind it
sets TORCH_NCCL_DEBUG_INFO_PIPE_FILE and TORCH_NCCL_DEBUG_INFO_TEMP_FILE to <dir>/nccl_trace_rank_
in a temporary directory (removed when it ends, also on SIGTERM), each unless already set (then
as set: the dumps go there and stay; the fifos are removed when the ranks have ended). For
shm-ring-stall the writer records its segment in a temporary directory of the launcher, which
removes both when it ends (also on SIGTERM and SIGINT); a SIGKILLed launcher leaves the segment
(the "ring" line names it).

Launcher mode (default) starts ``--world-size`` rank processes with torchrun-style environment
variables (RANK, LOCAL_RANK, LOCAL_WORLD_SIZE, WORLD_SIZE, MASTER_ADDR, MASTER_PORT; one node);
every rank prints one line
    rank <r> pid <pid> <waiting|diverged|progressing>
(one write(2)) before its blocking step, then the launcher waits for them. For compiled-dag the
launcher also starts the driver (``--driver``, the same script; the rank variables removed from
its environment), which announces ``driver pid <pid> waiting``; the launcher runs until every
rank has ended, then kills the driver and reaps it. Ranks and driver die with the launcher
(PR_SET_PDEATHSIG), so killing the launcher's process group cleans everything up (with SIGKILL,
all but shm-ring-stall's segment, above).
"""
import argparse
import ctypes
import datetime
import errno
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time

SCENARIOS = ("store-wait", "collective-mismatch", "busy", "stopped", "store-exit",
             "uninterruptible", "allreduce-loop", "pipeline", "symmetric-memory",
             "autotune-cache", "compiled-dag", "gpu-p2p-spin", "shm-broadcast-skip",
             "warmup-timeout", "dp-dummy-desync", "collective-behind", "shm-ring-stall",
             "store-steps")
# The scenarios that run on the simulated vLLM / FlashInfer / Ray modules.
SIM_SCENARIOS = ("symmetric-memory", "autotune-cache", "compiled-dag", "gpu-p2p-spin",
                 "shm-broadcast-skip", "warmup-timeout", "dp-dummy-desync", "shm-ring-stall")
# The scenarios whose ranks share a vLLM cache directory (VLLM_CACHE_ROOT) the launcher provides.
CACHE_SCENARIOS = ("autotune-cache", "gpu-p2p-spin", "warmup-timeout")
SIM_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sim")
# compiled-dag: the step at which the diverged rank stalls (the graph ran this many steps).
COMPILED_DAG_STALL_STEP = 2
# compiled-dag's driver (vLLM's EngineCore): its process title, as vLLM sets it.
DRIVER_TITLE = "VLLM::EngineCore"
# The torchrun-style variables that make a process a rank; the driver has none of them.
RANK_VARIABLES = ("RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "WORLD_SIZE", "MASTER_ADDR",
                  "MASTER_PORT")
# gpu-p2p-spin: the world sizes vLLM's custom all-reduce takes (CustomAllreduce).
CUSTOM_ALLREDUCE_WORLD_SIZES = (2, 4, 6, 8, 16)
# warmup-timeout: the torch.compile cache's hash directory (10 hex digits, as vLLM names it).
COMPILE_CACHE_HASH = "3c9e1f07ab"
# shm-broadcast-skip: the size of the tmpfs mounted (and filled) on /dev/shm.
FULL_SHM_SIZE = "64k"
# collective-behind: the decode steps (all-reduces) every rank completes before the diverged
# rank stalls; the others then wait in all-reduce #COLLECTIVE_BEHIND_STEPS + 1.
COLLECTIVE_BEHIND_STEPS = 5
# collective-behind: the flight recorder's variables (fifo and dump prefixes; rank appended).
FLIGHT_RECORDER_VARIABLES = ("TORCH_NCCL_DEBUG_INFO_PIPE_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
# shm-ring-stall: the blocks (scheduler outputs) the diverged reader reads; it stalls in the last
# one's execute_model. The writer then fills the ring (vLLM's default 10 blocks of 10 MiB) and
# waits for it: every rank's final wait is the step SHM_RING_READ_STEPS + SHM_RING_MAX_CHUNKS.
SHM_RING_READ_STEPS = 3
SHM_RING_MAX_CHUNK_BYTES = 1024 * 1024 * 10
SHM_RING_MAX_CHUNKS = 10


def die_with_parent():
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_PDEATHSIG = 1
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def announce(line):
    """One write(2) per line, so lines of several ranks sharing stdout never interleave; then
    the same in vLLM's log format (its timestamp tells hangscope when the rank went quiet)."""
    os.write(1, (line + "\n").encode())
    stamp = time.strftime("%m-%d %H:%M:%S", time.gmtime())
    os.write(1, f"INFO {stamp} [gloo_barrier_hang.py] {line}\n".encode())


def load_weights(store, rank):
    """The diverged rank's path: it waits for a store key that no rank will ever set."""
    key = f"weights/{rank}/ready"
    store.wait([key], datetime.timedelta(hours=1))


def sync_sequence_lengths(cpu_group):
    """The diverged rank's collective on another group than the one its peers wait on."""
    import torch
    import torch.distributed as dist
    dist.all_reduce(torch.zeros(4), group=cpu_group)


def slow_path_step(total, i):
    """One step of the busy loop (a second frame, so the stack moves a little)."""
    return total + i * i % 7


def compute_slow_path():
    """The diverged rank's pure Python busy loop, forever, on CPU."""
    total = 0
    i = 0
    while True:
        total = slow_path_step(total, i)
        i += 1


def pause_for_debugger():
    """The diverged rank stops itself (state T); continued, it goes on to the barrier."""
    os.kill(os.getpid(), signal.SIGSTOP)


def store_barrier(store, rank, world_size):
    """A store-based barrier: set this rank's key, then wait for every rank's key."""
    store.set(f"arrive/{rank}", b"1")
    keys = [f"arrive/{r}" for r in range(world_size)]
    store.wait(keys, datetime.timedelta(hours=1))


def exit_early():
    """The diverged rank exits before it arrives at the store barrier."""
    os._exit(1)


def spawn_compiler():
    """posix_spawn (CLONE_VFORK) of a child that blocks opening a FIFO: this thread sits in D."""
    fifo_dir = tempfile.mkdtemp(prefix="spawn-compiler-")
    fifo = os.path.join(fifo_dir, "fifo")
    os.mkfifo(fifo)
    # The child opens the FIFO through an O_PATH descriptor (inherited: O_CLOEXEC acts only at
    # exec), so the FIFO and its directory are off the disk before the spawn: nothing is left
    # behind however the rank ends.
    fifo_fd = os.open(fifo, os.O_PATH)
    os.unlink(fifo)
    os.rmdir(fifo_dir)
    fifo_path = f"/proc/self/fd/{fifo_fd}"
    os.posix_spawn("/bin/true", ["true"], os.environ,
                   file_actions=[(os.POSIX_SPAWN_OPEN, 0, fifo_path, os.O_RDONLY, 0)])


def decode_step():
    """Every rank's endless stream of small all-reduces (no hang: progress), one per step;
    HANGSCOPE_STEP_SECONDS (default 0) is the host work between steps (tools/bench/false_alarms.sh
    runs busy, 20 ms, slow and idle rhythms)."""
    import time

    import torch
    import torch.distributed as dist
    pause = float(os.environ.get("HANGSCOPE_STEP_SECONDS", "0"))
    step = 0
    while True:
        dist.all_reduce(torch.ones(8))
        step += 1
        if pause > 0:
            time.sleep(pause)


def sync_step(store, rank, world_size, step):
    """One step's store-based barrier: this rank's key for the step, then every rank's."""
    store.set(f"step/{step}/{rank}", b"1")
    store.wait([f"step/{step}/{r}" for r in range(world_size)], datetime.timedelta(hours=1))


def store_step_loop(store, rank, world_size):
    """store-steps: host work, then the step's store barrier, forever."""
    import time

    pause = float(os.environ.get("HANGSCOPE_STEP_SECONDS", "0.2"))
    step = 0
    while True:
        time.sleep(pause)
        sync_step(store, rank, world_size, step)
        step += 1


def decode_loop(recorder, rank, diverged):
    """collective-behind: the decode loop, one recorded all-reduce on the world group per step.
    After COLLECTIVE_BEHIND_STEPS steps the diverged rank prepares a batch that never comes
    (its last collective is #COLLECTIVE_BEHIND_STEPS, completed); the others go on into the next
    step's all-reduce and wait there (started)."""
    step = 0
    while True:
        if step == COLLECTIVE_BEHIND_STEPS:
            announce(f"rank {rank} pid {os.getpid()} {'diverged' if diverged else 'waiting'}")
            if diverged:
                prepare_batch()
        decode_token(recorder)
        step += 1


def decode_token(recorder):
    """One decode step: the logits' all-reduce across the world group, through the recorder."""
    import torch
    recorder.all_reduce(torch.ones(4, 8))


def prepare_batch():
    """The diverged rank waits forever for a batch that never comes (no collective issued)."""
    threading.Event().wait()


def run_collective_behind(rank, world_size, diverged_rank, timeout):
    """collective-behind: the simulated flight recorder and its dump thread (the fifo exists
    before the first step), then the decode loop."""
    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
    import flight_recorder_sim
    recorder = flight_recorder_sim.FlightRecorder(
        rank, world_size, timeout_ms=int(timeout.total_seconds() * 1000))
    flight_recorder_sim.start_dump_thread(recorder)
    decode_loop(recorder, rank, rank == diverged_rank)


def send_activations(dst):
    """A stage-0 rank sends its activations to its stage-1 peer."""
    import torch
    import torch.distributed as dist
    dist.send(torch.ones(4), dst=dst)


def stage_barrier(group, ranks):
    """A barrier over this pipeline stage's ranks."""
    import torch.distributed as dist
    dist.barrier(group=group)


def prepare_microbatch():
    """The diverged stage-0 rank blocks forever on a lock it already holds; it never sends."""
    lock = threading.Lock()
    lock.acquire()
    lock.acquire()


def receive_activations(src):
    """A stage-1 rank receives activations from its stage-0 peer, microbatch after microbatch."""
    import torch
    import torch.distributed as dist
    t = torch.empty(4)
    received = 0
    while True:
        dist.recv(t, src=src)
        received += 1


def run_symmetric_memory(rank, local_rank, world_size, local_world_size, diverged_rank):
    """Seed A: vLLM's TP group over every rank; the symmetric-memory rendezvous fails fast on
    the diverged rank's node (they move on to in_the_same_node_as), the others wait inside it."""
    from vllm.distributed import parallel_state
    from vllm.distributed.device_communicators import custom_all_reduce
    failing_node = diverged_rank // local_world_size
    failing = [r for r in range(world_size) if r // local_world_size == failing_node]
    custom_all_reduce.torch_symm_mem._simulate_unsupported_ranks(failing)
    parallel_state.init_distributed_environment(world_size, rank, "env://", local_rank, "gloo")
    announce(f"rank {rank} pid {os.getpid()} {'diverged' if rank in failing else 'waiting'}")
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=world_size,
                                             backend="gloo")
    announce(f"rank {rank} left the barrier")


def leave_autotune_cache(tp_size, tp_rank):
    """Seed B, before the rank starts: a FlashInfer autotune cache file like one a previous run
    left behind, its keys holding this rank's tp_rank (so it serves this rank only)."""
    from flashinfer.autotuner import AutoTuner
    from flashinfer.fused_moe import NUM_TOKENS_BUCKETS, MoERunner
    from vllm.model_executor.warmup.kernel_warmup import flashinfer_autotune_cache_path
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner
    hidden_size = GPUModelRunner(tp_size, tp_rank).hidden_size
    previous = AutoTuner()
    runner = MoERunner(tp_size, tp_rank)
    for tactic, num_tokens in enumerate(NUM_TOKENS_BUCKETS):
        key = previous.cache_key("trtllm::fused_moe::gemm1", runner, (num_tokens, hidden_size))
        previous.profiling_cache[key] = ("MoERunner", tactic)
    previous.save_configs(flashinfer_autotune_cache_path())


def run_autotune_cache(rank, local_rank, world_size, diverged_rank):
    """Seed B: kernel_warmup -> flashinfer_autotune on every rank (TP = world)."""
    import types
    from vllm.distributed import parallel_state
    from vllm.model_executor.warmup.kernel_warmup import kernel_warmup
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner
    parallel_state.init_distributed_environment(world_size, rank, "env://", local_rank, "gloo")
    worker = types.SimpleNamespace(model_runner=GPUModelRunner(tp_size=world_size, tp_rank=rank))
    announce(f"rank {rank} pid {os.getpid()} {'diverged' if rank == diverged_rank else 'waiting'}")
    kernel_warmup(worker)
    announce(f"rank {rank} left the barrier")


def run_compiled_dag(rank, world_size, diverged_rank, timeout):
    """Seed C: PP=2 x TP=world/2 compiled-graph workers; do_exec_tasks on a thread (the main
    thread joins it); the diverged stage-0 worker stalls in execute_model_ray's compute."""
    import torch
    import torch.distributed as dist
    from ray.dag.compiled_dag_node import ExecutableTask, do_exec_tasks, schedule_for
    from ray.experimental.channel import Channel
    from vllm.v1.executor.ray_utils import RayWorkerWrapper
    tp_size = world_size // 2
    pp_rank = rank // tp_size
    tp_groups = [dist.new_group(ranks=list(range(s * tp_size, (s + 1) * tp_size)),
                                backend="gloo", timeout=timeout) for s in range(2)]
    # vLLM's initialize_model_parallel logs each worker's place in the parallel layout.
    from vllm.distributed.parallel_state import logger as parallel_state_logger
    parallel_state_logger.info(
        "rank %d in world size %d is assigned as DP rank 0, PP rank %d, TP rank %d, EP rank N/A",
        rank, world_size, pp_rank, rank % tp_size)
    import setproctitle  # as Ray retitles its actors
    setproctitle.setproctitle("ray::RayWorkerWrapper.execute_model_ray")
    worker = RayWorkerWrapper(rank, pp_rank, 2, tp_size, tp_groups[pp_rank])
    if rank == diverged_rank:
        worker._stall_at_step = COMPILED_DAG_STALL_STEP
    scheduler_output = torch.ones(4)
    if pp_rank == 0:
        tasks = [ExecutableTask("execute_model_ray", resolved_args=[scheduler_output])]
    else:
        tasks = [ExecutableTask("execute_model_ray", input_channels=[Channel(src=rank - tp_size)],
                                resolved_args=[scheduler_output])]
    announce(f"rank {rank} pid {os.getpid()} {'diverged' if rank == diverged_rank else 'waiting'}")
    thread = threading.Thread(target=do_exec_tasks, args=(worker, tasks, schedule_for(tasks)),
                              name="ray_system_concurrency_group")
    thread.start()
    thread.join()


def run_compiled_dag_driver(world_size):
    """Seed C's driver, vLLM's EngineCore process (no rank): one request in, the engine's busy
    loop steps it; RayDistributedExecutor.execute_model waits in CompiledDAGRef.get for the last
    stage's output, which never comes."""
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.engine import EngineCoreRequestType
    from vllm.v1.engine.core import EngineCoreProc
    from vllm.v1.executor.ray_executor import RayDistributedExecutor
    import ray.dag.compiled_dag_node  # noqa: F401 (and torch: loaded before the announce)
    import ray.experimental.channel  # noqa: F401
    import setproctitle  # as vLLM's EngineCoreProc.run_engine_core titles its process
    setproctitle.setproctitle(DRIVER_TITLE)
    executor = RayDistributedExecutor(pipeline_parallel_size=2,
                                      tensor_parallel_size=world_size // 2)
    engine = EngineCoreProc(executor, Scheduler())
    # A request from the front end (the real one arrives on the engine's ZMQ input socket).
    engine.input_queue.put_nowait((EngineCoreRequestType.ADD, "cmpl-0"))
    announce(f"driver pid {os.getpid()} waiting")
    engine.run_busy_loop()


def run_driver(args, parser):
    """--driver: the scenario's driver process (compiled-dag only), not a torch.distributed
    rank: hangscope tells it by its title."""
    if args.scenario != "compiled-dag":
        parser.error(f"--driver: only --scenario compiled-dag has a driver, got {args.scenario}")
    error = scenario_error(args.scenario, args.world_size, args.diverged_rank)
    if error:
        parser.error(error)
    ranked = [name for name in RANK_VARIABLES if name in os.environ]
    if ranked:
        parser.error(f"--driver: the driver is no rank; unset {', '.join(ranked)} in its "
                     f"environment")
    die_with_parent()
    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
    sys.path.insert(0, SIM_DIR)
    run_compiled_dag_driver(args.world_size)


def leave_gpu_p2p_cache(cache_root, world_size):
    """gpu-p2p-spin, before the ranks start: vLLM's GPU P2P access cache as the node's local
    rank 0 writes it, $VLLM_CACHE_ROOT/gpu_p2p_access_cache_for_<devices>.json (devices:
    CUDA_VISIBLE_DEVICES, else 0..N-1), every directed pair "src->tgt" true: the driver (and
    the copy test) claim P2P works."""
    devices = os.environ.get("CUDA_VISIBLE_DEVICES") or ",".join(
        str(i) for i in range(world_size))
    num_dev = len(devices.split(","))
    cache = {f"{i}->{j}": True for i in range(num_dev) for j in range(num_dev)}
    os.makedirs(cache_root, exist_ok=True)
    with open(os.path.join(cache_root, f"gpu_p2p_access_cache_for_{devices}.json"), "w") as f:
        json.dump(cache, f, indent=4)


def leave_compile_cache(cache_root, world_size, cold_rank):
    """warmup-timeout, before the ranks start: vLLM's torch.compile cache as an earlier run left
    it for every rank but cold_rank: torch_compile_cache/<hash>/rank_<r>_0/backbone/ with the
    traced graph (computation_graph.py, transformed_code.py), the handles of the compiled
    piecewise graphs (vllm_compile_cache.py) and Inductor's artifacts (inductor_cache/)."""
    base = os.path.join(cache_root, "torch_compile_cache", COMPILE_CACHE_HASH)
    shutil.rmtree(os.path.join(base, f"rank_{cold_rank}_0"), ignore_errors=True)
    graph_keys = ["fq3vkzlmtb5xw2pdy7c4hrgnsj6oa7ui2ebdxk4mfq5cwzl3tvyhpr",
                  "fk7c2mbxq4ndtw6yzpl3hsvr5jgeo2ai7ubxfc4kdm6qztwl5nyhes"]
    code_names = ["cjx4q2rbt7nwmzk5dlpv3hsy6fgec2oa4uibxq7ktdn5wzl3mrhyv",
                  "c5mwbz2tq7xkn4rdlyp6hsv3jfgoe4ai2ucbx7qkdt5nzw3lmhyrk"]
    for rank in range(world_size):
        if rank == cold_rank:
            continue
        backbone = os.path.join(base, f"rank_{rank}_0", "backbone")
        inductor = os.path.join(backbone, "inductor_cache")
        files = {
            "computation_graph.py": (
                "class GraphModule(torch.nn.Module):\n"
                "    def forward(self, s0: \"Sym(s0)\", L_input_ids_: \"i64[s0]\", "
                "L_positions_: \"i64[s0]\"):\n"
                "        l_input_ids_ = L_input_ids_\n"
                "        embedding = torch.nn.functional.embedding(l_input_ids_, "
                "l_self_modules_embed_tokens_parameters_weight_)\n"
                "        unified_attention_with_output = torch.ops.vllm."
                "unified_attention_with_output(q, k, v, output, 'model.layers.0.self_attn.attn')\n"
                "        return (hidden_states,)\n"),
            "transformed_code.py": (
                "def forward(self, input_ids, positions, intermediate_tensors=None, "
                "inputs_embeds=None):\n"
                "    return __compiled_fn_1(input_ids.size(0), input_ids, positions)\n"),
            "vllm_compile_cache.py": "{\n" + "".join(
                f"    (None, {i}, 'inductor'): ('{key}',\n"
                f"                             '{inductor}/{name[1:3]}/{name}.py'),\n"
                for i, (key, name) in enumerate(zip(graph_keys, code_names))) + "}\n",
        }
        for key, name in zip(graph_keys, code_names):
            files[f"inductor_cache/fxgraph/{key[1:3]}/{key}/{name[1:]}"] = (
                f"# FX graph cache entry of {key}: compiled module {name}.py\n")
            files[f"inductor_cache/{name[1:3]}/{name}.py"] = (
                "# AOT ID: ['0_inference']\n"
                "from ctypes import c_void_p, c_long, c_int\n"
                "import torch\n"
                "from torch._inductor.runtime.triton_heuristics import grid\n"
                f"# kernel path: {inductor}/{name[1:3]}/{name}.py\n"
                "def call(args):\n"
                "    arg0_1, arg1_1 = args\n"
                "    return (arg0_1,)\n")
        for relative, text in files.items():
            path = os.path.join(backbone, relative)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)


def run_gpu_p2p_spin(rank, local_rank, world_size):
    """Broken GPU P2P: vLLM's TP group over every rank with the custom all-reduce enabled (the
    P2P access cache says every pair works); one model step, whose custom all-reduce spins on
    every rank for peer flags that never arrive. Rank 0 logs the MessageQueue's warning."""
    from vllm.distributed import parallel_state
    from vllm.distributed.device_communicators import shm_broadcast
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner
    from vllm.v1.worker.gpu_worker import Worker
    parallel_state.init_distributed_environment(world_size, rank, "env://", local_rank, "gloo")
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=world_size,
                                             backend="gloo")
    worker = Worker(GPUModelRunner(tp_size=world_size, tp_rank=rank), rank=rank,
                    local_rank=local_rank)
    announce(f"rank {rank} pid {os.getpid()} progressing")
    if rank == 0:
        shm_broadcast._simulate_ring_buffer_wait_warning()
    worker.execute_model(SchedulerOutput(total_num_scheduled_tokens=8))
    announce(f"rank {rank} left the barrier")


def run_shm_broadcast_skip(rank, local_rank, world_size, diverged_rank):
    """/dev/shm full: vLLM's TP group over every rank; CustomAllreduce.__init__ asks
    in_the_same_node_as (vLLM's shared-memory probe), whose source, rank 0, cannot create its
    segment and skips the broadcast; the others wait for it."""
    from vllm.distributed import parallel_state
    parallel_state._simulate_shm_probe()
    parallel_state.init_distributed_environment(world_size, rank, "env://", local_rank, "gloo")
    announce(f"rank {rank} pid {os.getpid()} {'diverged' if rank == diverged_rank else 'waiting'}")
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=world_size,
                                             backend="gloo")
    announce(f"rank {rank} left the barrier")


def run_warmup_timeout(rank, local_rank, world_size, diverged_rank):
    """Asymmetric warm-up: Worker.compile_or_warm_up_model on every rank (TP = world, the model
    torch.compile'd); warm ranks load their compiled graphs from the cache and wait in the
    forward's all-reduce, the cold one compiles."""
    from vllm.config import ParallelConfig
    from vllm.distributed import parallel_state
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner
    from vllm.v1.worker.gpu_worker import Worker
    parallel_state.init_distributed_environment(world_size, rank, "env://", local_rank, "gloo")
    runner = GPUModelRunner(tp_size=world_size, tp_rank=rank, compile_model=True,
                            parallel_config=ParallelConfig(tensor_parallel_size=world_size,
                                                           rank=rank))
    worker = Worker(runner, rank=rank, local_rank=local_rank,
                    compile_sizes=[runner.max_num_tokens])
    announce(f"rank {rank} pid {os.getpid()} {'diverged' if rank == diverged_rank else 'waiting'}")
    worker.compile_or_warm_up_model()
    announce(f"rank {rank} left the barrier")


def run_dp_dummy_desync(rank, local_rank, world_size, diverged_rank):
    """vLLM#28224: one DP engine per rank (DP = world, TP = 1) in DPEngineCoreProc.run_busy_loop;
    every engine but the diverged one got the coordinator's START_DP_WAVE and steps dummy
    batches; the diverged one waits for requests."""
    from vllm.config import ParallelConfig
    from vllm.distributed import parallel_state
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.engine import EngineCoreRequestType
    from vllm.v1.engine.core import DPEngineCoreProc
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner
    from vllm.v1.worker.gpu_worker import Worker
    parallel_state.init_distributed_environment(world_size, rank, "env://", local_rank, "gloo")
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=1,
                                             data_parallel_size=world_size, backend="gloo")
    # The engines' own DP group is vLLM's stateless one (ParallelConfig.stateless_init_dp_group:
    # a gloo group on its own TCPStore, outside torch's registry) at VLLM_DP_MASTER_PORT (the
    # launcher's free port; else MASTER_PORT + 1); the workers' DP group above is the one
    # coordinate_batch_across_dp all-reduces on.
    dp_port = int(os.environ.get("VLLM_DP_MASTER_PORT") or int(os.environ["MASTER_PORT"]) + 1)
    parallel_config = ParallelConfig(data_parallel_size=world_size, data_parallel_rank=rank,
                                     data_parallel_master_ip=os.environ["MASTER_ADDR"],
                                     data_parallel_master_port=dp_port)
    worker = Worker(GPUModelRunner(tp_size=1, tp_rank=0, parallel_config=parallel_config),
                    rank=rank, local_rank=local_rank)
    engine = DPEngineCoreProc(worker, Scheduler(), parallel_config)
    if rank != diverged_rank:
        # The DP coordinator's START_DP_WAVE for wave 0 (a request arrived at another engine);
        # the diverged engine's copy never came: it takes the wave for finished.
        engine.input_queue.put_nowait((EngineCoreRequestType.START_DP_WAVE, (0, -1)))
    announce(f"rank {rank} pid {os.getpid()} {'diverged' if rank == diverged_rank else 'waiting'}")
    engine.run_busy_loop()


def run_shm_ring_stall(rank, world_size, diverged_rank, record):
    """A reader stalls on vLLM's shared-memory broadcast ring (all ranks on one node): rank 0
    writes the scheduler outputs into a MessageQueue (a real ShmRingBuffer, /dev/shm/psm_*),
    ranks 1..N-1 read them (readers 0..N-2); the segment's name goes to the readers with
    broadcast_object_list on the world group. record: a file the launcher reads to remove the
    segment (appended: its path)."""
    import torch.distributed as dist
    from vllm.distributed.device_communicators.shm_broadcast import MessageQueue
    if rank == 0:
        queue = MessageQueue(n_reader=world_size - 1, n_local_reader=world_size - 1,
                             local_reader_ranks=list(range(1, world_size)),
                             max_chunk_bytes=SHM_RING_MAX_CHUNK_BYTES,
                             max_chunks=SHM_RING_MAX_CHUNKS)
        segment = f"/dev/shm/{queue.buffer.shared_memory.name}"
        if record:
            with open(record, "a") as f:
                f.write(segment + "\n")
        os.write(1, f"ring {segment}\n".encode())
        dist.broadcast_object_list([queue.export_handle()], src=0)
    else:
        received = [None]
        dist.broadcast_object_list(received, src=0)
        queue = MessageQueue.create_from_handle(received[0], rank)
    # Every reader has the segment mapped before the first block (vLLM: wait_until_ready).
    dist.barrier(group=dist.group.WORLD)
    if rank == 0:
        broadcast_scheduler_outputs(queue, rank)
    else:
        worker_busy_loop(queue, rank, rank == diverged_rank)


def broadcast_scheduler_outputs(queue, rank):
    """shm-ring-stall, the writer (rank 0): one scheduler output per step into the ring, until
    a block the stalled reader never reads is due again (the ring is full): it waits in
    acquire_write, announces and logs vLLM's ring-buffer warning when it starts waiting."""
    from vllm.distributed.device_communicators import shm_broadcast
    from vllm.v1.core.sched.output import SchedulerOutput

    def blocked():
        announce(f"rank {rank} pid {os.getpid()} waiting")
        shm_broadcast._simulate_ring_buffer_wait_warning()

    step = 0
    while True:
        if step == SHM_RING_READ_STEPS + SHM_RING_MAX_CHUNKS:
            queue._simulate_on_wait = blocked
        queue.enqueue((step, SchedulerOutput(total_num_scheduled_tokens=8)))
        step += 1


def worker_busy_loop(queue, rank, diverged):
    """shm-ring-stall, a reader: takes the next scheduler output off the ring, runs the step.
    The diverged reader stalls in the execute_model of its SHM_RING_READ_STEPS-th block (never
    reads again); the others read every block written and wait in acquire_read for the next,
    announcing when they start waiting."""
    step = 0
    while True:
        if step == SHM_RING_READ_STEPS + SHM_RING_MAX_CHUNKS:
            queue._simulate_on_wait = lambda: announce(f"rank {rank} pid {os.getpid()} waiting")
        _, scheduler_output = queue.dequeue()
        step += 1
        stall = diverged and step == SHM_RING_READ_STEPS
        if stall:
            announce(f"rank {rank} pid {os.getpid()} diverged")
        execute_model(scheduler_output, stall)


def execute_model(scheduler_output, new_shape):
    """Runs one model step for the batch; a batch shape not seen yet is compiled first."""
    if new_shape:
        _compile_graph_for_batch(scheduler_output)
    return scheduler_output.total_num_scheduled_tokens


def _compile_graph_for_batch(scheduler_output):
    """The diverged reader waits forever for a compilation that never finishes (no block
    acknowledged meanwhile)."""
    threading.Event().wait()


def full_shm_error():
    """Why this process cannot give shm-broadcast-skip its full /dev/shm (None if it can)."""
    why = ("it mounts a full tmpfs on /dev/shm in a private mount namespace "
           "(unshare --mount --propagation private)")
    if os.geteuid() != 0:
        return f"--scenario shm-broadcast-skip needs root: {why}"
    if not shutil.which("unshare"):
        return f"--scenario shm-broadcast-skip needs unshare (util-linux): {why}"
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if probe.returncode != 0:
        return (f"--scenario shm-broadcast-skip needs CAP_SYS_ADMIN: {why}, and unshare fails "
                f"here: {probe.stderr.strip()}")
    return None


def fill_dev_shm():
    """shm-broadcast-skip, in the launcher's private mount namespace: a tiny tmpfs on /dev/shm,
    filled up to ENOSPC; every rank (a child) sees it. The mount goes with the namespace."""
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={FULL_SHM_SIZE},mode=1777",
                              "tmpfs", "/dev/shm"], stderr=subprocess.PIPE, text=True)
    if mounted.returncode != 0:
        return f"--scenario shm-broadcast-skip: mounting a tmpfs on /dev/shm failed: " \
               f"{mounted.stderr.strip()}"
    fd = os.open("/dev/shm/fill", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        while True:
            os.write(fd, bytes(4096))
    except OSError as e:
        if e.errno != errno.ENOSPC:
            return f"--scenario shm-broadcast-skip: filling /dev/shm failed: {e}"
    finally:
        os.close(fd)
    return None


def scenario_error(scenario, world_size, diverged_rank):
    """Why this scenario cannot run with this world size and diverged rank (None if it can)."""
    if scenario in ("shm-broadcast-skip", "warmup-timeout", "dp-dummy-desync") and world_size < 2:
        return f"--scenario {scenario} needs a world size >= 2, got {world_size}"
    if scenario in ("symmetric-memory", "autotune-cache", "warmup-timeout",
                    "dp-dummy-desync") and not 0 <= diverged_rank < world_size:
        return (f"--scenario {scenario}: --diverged-rank must be a rank (0..{world_size - 1}), "
                f"got {diverged_rank}")
    if scenario == "gpu-p2p-spin" and world_size not in CUSTOM_ALLREDUCE_WORLD_SIZES:
        return (f"--scenario gpu-p2p-spin needs a world size vLLM's custom all-reduce takes "
                f"({', '.join(map(str, CUSTOM_ALLREDUCE_WORLD_SIZES))}), got {world_size}")
    if scenario == "shm-broadcast-skip" and diverged_rank != 0:
        return (f"--scenario shm-broadcast-skip: --diverged-rank must be 0 (in_the_same_node_as's "
                f"source, the TP group's rank 0, is the rank that skips the broadcast), "
                f"got {diverged_rank}")
    if scenario == "compiled-dag":
        if world_size < 2 or world_size % 2:
            return (f"--scenario compiled-dag needs an even world size >= 2 (PP=2 x TP=world/2), "
                    f"got {world_size}")
        if not 0 <= diverged_rank < world_size // 2:
            return (f"--scenario compiled-dag: --diverged-rank must be in pipeline stage 0 "
                    f"(0..{world_size // 2 - 1}), got {diverged_rank}")
    if scenario == "collective-behind":
        if world_size < 2:
            return (f"--scenario collective-behind needs a world size >= 2 (a rank behind and "
                    f"ranks waiting for it), got {world_size}")
        if not 0 <= diverged_rank < world_size:
            return (f"--scenario collective-behind: --diverged-rank must be a rank "
                    f"(0..{world_size - 1}), got {diverged_rank}")
    if scenario == "shm-ring-stall":
        if world_size < 3:
            return (f"--scenario shm-ring-stall needs a world size >= 3 (a writer, a reader that "
                    f"stalls and readers waiting), got {world_size}")
        if not 1 <= diverged_rank < world_size:
            return (f"--scenario shm-ring-stall: --diverged-rank must be a reader "
                    f"(1..{world_size - 1}; rank 0 writes the ring), got {diverged_rank}")
    if scenario == "store-exit" and diverged_rank == 0:
        return "--scenario store-exit: --diverged-rank must not be 0 (rank 0 hosts the TCPStore)"
    if scenario == "pipeline":
        if world_size < 4 or world_size % 2:
            return (f"--scenario pipeline needs an even world size >= 4 (two stages), "
                    f"got {world_size}")
        stage_size = world_size // 2
        if not 0 <= diverged_rank < stage_size:
            return (f"--scenario pipeline: --diverged-rank must be in stage 0 "
                    f"(0..{stage_size - 1}), got {diverged_rank}")
    return None


def run_rank(args, parser):
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    error = scenario_error(args.scenario, world_size, args.diverged_rank)
    local_world_size = int(os.environ.get("LOCAL_WORLD_SIZE", world_size))
    if not error and args.scenario == "symmetric-memory" and local_world_size >= world_size:
        error = (f"--scenario symmetric-memory needs ranks on two or more nodes "
                 f"(LOCAL_WORLD_SIZE {local_world_size} < WORLD_SIZE {world_size}): run it on "
                 f"the virtual cluster (tools/testbed/cluster.sh --scenario symmetric-memory)")
    if (not error and args.scenario in ("gpu-p2p-spin", "warmup-timeout")
            and not os.environ.get("VLLM_CACHE_ROOT")):
        error = (f"--scenario {args.scenario}: the ranks need the node's VLLM_CACHE_ROOT "
                 f"(the launcher sets it)")
    if not error and args.scenario == "collective-behind":
        missing = [name for name in FLIGHT_RECORDER_VARIABLES if not os.environ.get(name)]
        if missing:
            error = (f"--scenario collective-behind: the ranks need {' and '.join(missing)} "
                     f"(the flight recorder's fifo and dump prefixes; the launcher and "
                     f"tools/testbed/node.sh set them)")
    if error:
        parser.error(error)
    import torch.distributed as dist

    die_with_parent()
    if args.helper:
        # A helper child (like a compile worker) inheriting the rank's environment.
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    if args.scenario in SIM_SCENARIOS:
        sys.dont_write_bytecode = True  # no __pycache__ in the source tree
        sys.path.insert(0, SIM_DIR)
    if args.scenario == "autotune-cache":
        if not os.environ.get("VLLM_CACHE_ROOT"):
            # Left behind when the rank is killed: the launcher and node.sh set it instead.
            os.environ["VLLM_CACHE_ROOT"] = tempfile.mkdtemp(prefix="vllm-cache-")
        if rank == args.diverged_rank:
            leave_autotune_cache(world_size, rank)
    dist.init_process_group(
        "gloo",
        init_method="env://",
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=args.timeout),
    )
    timeout = datetime.timedelta(seconds=args.timeout)
    if args.scenario == "collective-mismatch":
        cpu_group = dist.new_group(backend="gloo", timeout=timeout)
    if args.scenario == "pipeline":
        stage_size = world_size // 2
        stage = rank // stage_size
        stage_groups = [dist.new_group(ranks=list(range(s * stage_size, (s + 1) * stage_size)),
                                       backend="gloo", timeout=timeout) for s in range(2)]
        import setproctitle
        setproctitle.setproctitle(f"VLLM::Worker_PP{stage}_TP{rank % stage_size}")
    if args.title:
        import setproctitle  # as vLLM does: /proc/PID/environ reads empty afterwards
        setproctitle.setproctitle(args.title)
    store = dist.distributed_c10d._get_default_store()
    diverged = rank == args.diverged_rank

    if args.scenario == "symmetric-memory":
        run_symmetric_memory(rank, int(os.environ.get("LOCAL_RANK", "0")), world_size,
                             local_world_size, args.diverged_rank)
    elif args.scenario == "autotune-cache":
        run_autotune_cache(rank, int(os.environ.get("LOCAL_RANK", "0")), world_size,
                           args.diverged_rank)
    elif args.scenario == "compiled-dag":
        run_compiled_dag(rank, world_size, args.diverged_rank, timeout)
    elif args.scenario == "gpu-p2p-spin":
        run_gpu_p2p_spin(rank, int(os.environ.get("LOCAL_RANK", "0")), world_size)
    elif args.scenario == "shm-broadcast-skip":
        run_shm_broadcast_skip(rank, int(os.environ.get("LOCAL_RANK", "0")), world_size,
                               args.diverged_rank)
    elif args.scenario == "warmup-timeout":
        run_warmup_timeout(rank, int(os.environ.get("LOCAL_RANK", "0")), world_size,
                           args.diverged_rank)
    elif args.scenario == "dp-dummy-desync":
        run_dp_dummy_desync(rank, int(os.environ.get("LOCAL_RANK", "0")), world_size,
                            args.diverged_rank)
    elif args.scenario == "collective-behind":
        run_collective_behind(rank, world_size, args.diverged_rank, timeout)
    elif args.scenario == "shm-ring-stall":
        run_shm_ring_stall(rank, world_size, args.diverged_rank, args.shm_ring_record)
    elif args.scenario == "allreduce-loop":
        announce(f"rank {rank} pid {os.getpid()} progressing")
        decode_step()
    elif args.scenario == "store-steps":
        announce(f"rank {rank} pid {os.getpid()} progressing")
        store_step_loop(store, rank, world_size)
    elif args.scenario == "store-exit":
        announce(f"rank {rank} pid {os.getpid()} {'diverged' if diverged else 'waiting'}")
        if diverged:
            exit_early()
        store_barrier(store, rank, world_size)
        announce(f"rank {rank} left the barrier")
    elif args.scenario == "pipeline":
        announce(f"rank {rank} pid {os.getpid()} {'diverged' if diverged else 'waiting'}")
        if stage == 1:
            receive_activations(rank - stage_size)
        if diverged:
            prepare_microbatch()
        send_activations(rank + stage_size)
        stage_barrier(stage_groups[0], list(range(stage_size)))
        announce(f"rank {rank} left the barrier")
    else:
        # The others wait in dist.barrier(); the diverged rank takes the scenario's path first.
        announce(f"rank {rank} pid {os.getpid()} {'diverged' if diverged else 'waiting'}")
        if diverged:
            if args.scenario == "store-wait":
                load_weights(store, rank)
            elif args.scenario == "collective-mismatch":
                sync_sequence_lengths(cpu_group)
            elif args.scenario == "busy":
                compute_slow_path()
            elif args.scenario == "stopped":
                pause_for_debugger()
            elif args.scenario == "uninterruptible":
                spawn_compiler()
        dist.barrier()
        announce(f"rank {rank} left the barrier")


def remove_dump_fifos(pipe_prefix, world_size):
    """collective-behind, the ranks ended: their dump fifos (${pipe_prefix}<rank>.pipe), which a
    killed rank leaves behind; the dumps stay."""
    for rank in range(world_size):
        path = f"{pipe_prefix}{rank}.pipe"
        try:
            if stat.S_ISFIFO(os.lstat(path).st_mode):
                os.unlink(path)
        except OSError:
            pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def remove_shm_rings(record):
    """shm-ring-stall, the ranks ended: the ring segments the writer recorded (/dev/shm/psm_*),
    which a killed writer leaves behind."""
    try:
        with open(record) as f:
            segments = f.read().split()
    except OSError:
        return
    for path in segments:
        if os.path.dirname(path) == "/dev/shm" and os.path.basename(path).startswith("psm_"):
            try:
                os.unlink(path)
            except OSError:
                pass


def launch(args):
    port = free_port()
    dp_port = free_port()  # dp-dummy-desync: the engines' stateless DP group
    ranks = []
    driver = None
    cache_root = None
    vllm_cache_root = os.environ.get("VLLM_CACHE_ROOT")
    if args.scenario in CACHE_SCENARIOS and not vllm_cache_root:
        # The ranks' (one node's) vLLM cache, removed when the launcher ends, also on SIGTERM.
        cache_root = vllm_cache_root = tempfile.mkdtemp(prefix="gloo_barrier_hang-vllm-cache-")
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    flight_dir = None
    flight_env = {}
    if args.scenario == "collective-behind":
        # The ranks' flight-recorder fifos and dumps, in a temporary directory removed when the
        # launcher ends, also on SIGTERM; a variable already set is used as it is (the dumps
        # stay there, the fifos are removed when the ranks have ended).
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
        unset = [name for name in FLIGHT_RECORDER_VARIABLES if not os.environ.get(name)]
        if unset:
            flight_dir = tempfile.mkdtemp(prefix="gloo_barrier_hang-flight-recorder-")
            flight_env = {name: os.path.join(flight_dir, "nccl_trace_rank_") for name in unset}
    ring_dir = None
    if args.scenario == "shm-ring-stall":
        # The writer records its ring's segment (/dev/shm/psm_*) in a temporary directory; the
        # launcher removes both when it ends, also on SIGTERM and SIGINT.
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
        ring_dir = tempfile.mkdtemp(prefix="gloo_barrier_hang-shm-ring-")
    try:
        if args.scenario == "gpu-p2p-spin":
            leave_gpu_p2p_cache(vllm_cache_root, args.world_size)
        elif args.scenario == "warmup-timeout":
            leave_compile_cache(vllm_cache_root, args.world_size, args.diverged_rank)
        for rank in range(args.world_size):
            env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank),
                       LOCAL_WORLD_SIZE=str(args.world_size),
                       WORLD_SIZE=str(args.world_size), MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
            if args.scenario == "dp-dummy-desync":
                env["VLLM_DP_MASTER_PORT"] = str(dp_port)
            if cache_root:
                env["VLLM_CACHE_ROOT"] = cache_root
            env.update(flight_env)
            command = [sys.executable, os.path.abspath(__file__), "--rank-worker",
                       "--scenario", args.scenario, "--diverged-rank", str(args.diverged_rank),
                       "--timeout", str(args.timeout)]
            if ring_dir:
                command += ["--shm-ring-record", os.path.join(ring_dir, "segments")]
            ranks.append(subprocess.Popen(command, env=env))
        if args.scenario == "compiled-dag":
            # The graph's driver (vLLM's EngineCore): the same script, no rank variables.
            env = {name: value for name, value in os.environ.items()
                   if name not in RANK_VARIABLES}
            driver = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--driver",
                 "--scenario", args.scenario, "--world-size", str(args.world_size),
                 "--diverged-rank", str(args.diverged_rank)],
                env=env)
        # Reap each rank as it ends, in any order (store-exit: no zombie rank while others wait);
        # the driver too if it ends early. Run while any rank runs.
        while [process.poll() for process in ranks].count(None):
            if driver:
                driver.poll()
            time.sleep(0.2)
    finally:
        if ring_dir:
            # A second signal must not cut the clean-up short.
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        for process in ranks + ([driver] if driver else []):
            if process.poll() is None:
                process.kill()
        if driver:
            driver.wait()
        if cache_root or args.scenario == "collective-behind" or ring_dir:
            for process in ranks:
                process.wait()
        if cache_root:
            shutil.rmtree(cache_root, ignore_errors=True)
        if args.scenario == "collective-behind":
            remove_dump_fifos(flight_env.get("TORCH_NCCL_DEBUG_INFO_PIPE_FILE",
                                             os.environ.get("TORCH_NCCL_DEBUG_INFO_PIPE_FILE")),
                              args.world_size)
        if flight_dir:
            shutil.rmtree(flight_dir, ignore_errors=True)
        if ring_dir:
            remove_shm_rings(os.path.join(ring_dir, "segments"))
            shutil.rmtree(ring_dir, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--diverged-rank", type=int, default=1)
    parser.add_argument("--scenario", choices=SCENARIOS, default="store-wait",
                        help="how the job hangs (default: store-wait)")
    parser.add_argument("--timeout", type=int, default=1800, help="process-group timeout, seconds")
    parser.add_argument("--rank-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--driver", action="store_true",
                        help="run compiled-dag's driver (vLLM's EngineCore process, no rank; "
                             "the launcher starts it, node.sh on node 0 of the virtual cluster)")
    # shm-broadcast-skip: the launcher re-executed under unshare (value: the mount namespace it
    # left, so that the tmpfs never goes on the host's /dev/shm).
    parser.add_argument("--full-shm-from-ns", help=argparse.SUPPRESS)
    # shm-ring-stall: the file in the launcher's temporary directory where the writer records
    # its ring's segment, for the launcher to remove.
    parser.add_argument("--shm-ring-record", help=argparse.SUPPRESS)
    parser.add_argument("--title", help="retitle the rank with setproctitle (e.g. VLLM::Worker_TP2)")
    parser.add_argument("--helper", action="store_true", help="start a helper child process")
    args = parser.parse_args()
    if args.rank_worker:
        run_rank(args, parser)
    elif args.driver:
        run_driver(args, parser)
    else:
        error = scenario_error(args.scenario, args.world_size, args.diverged_rank)
        if not error and args.scenario == "symmetric-memory":
            error = ("--scenario symmetric-memory needs ranks on two or more nodes, the launcher "
                     "starts one: run it on the virtual cluster "
                     "(tools/testbed/cluster.sh --scenario symmetric-memory)")
        if not error and args.scenario == "shm-broadcast-skip" and not args.full_shm_from_ns:
            error = full_shm_error()
        if error:
            parser.error(error)
        if args.scenario == "shm-broadcast-skip":
            namespace = os.readlink("/proc/self/ns/mnt")
            if not args.full_shm_from_ns:
                # Same pid, same process group: the ranks stay this launcher's children.
                unshare = shutil.which("unshare")
                os.execv(unshare, [unshare, "--mount", "--propagation", "private", "--",
                                   sys.executable, os.path.abspath(__file__), *sys.argv[1:],
                                   "--full-shm-from-ns", namespace])
            if args.full_shm_from_ns == namespace:
                parser.error("--full-shm-from-ns: still in that mount namespace")
            error = fill_dev_shm()
            if error:
                parser.error(error)
        launch(args)


if __name__ == "__main__":
    main()
