#!/usr/bin/python3
"""Jobs whose process groups live outside torch.distributed's registry, hung at one culprit.

vLLM data-parallel engine cores on their stateless DP group, vLLM's StatelessProcessGroup, an
RL weight sync between a trainer job and a rollout job, and a torch subgroup that only user
code holds: each written the way the frameworks do it (the simulated vLLM and TRL of
tools/repro/sim, real module paths and function names) and hung as ``--scenario`` says. One
launcher per node (tools/testbed/node.sh with ``--job "group_job.py ..."``) starts that node's
processes; node 0's address is ``--master-addr``.

Scenarios (``--scenario``; the culprit ``--culprit``, random per test run):
  dp-step-hang    4 DP engine cores (DPEngineCoreProc, 2 per node, VLLM::EngineCore_DP<d>, no
                  RANK), each with one multiproc worker (TP = 1; the workers of all engines one
                  torch world with vLLM's DP and EP groups), a request each, the DP coordinator
                  on node 0. At step 32 the culprit engine's worker never finishes its KV save
                  (after the step's collectives): that engine's executor waits for its reply,
                  the three others wait in ParallelConfig.has_unfinished_dp's all_reduce on the
                  stateless DP group. --culprit: the DP rank.
  dp-idle         the same deployment without requests: every engine waits in its input queue.
                  Healthy.
  dp-busy         the same with a request on every engine, stepping forever (10 ms of forward
                  per step) with the DP all_reduce every step. Healthy.
  dp-ep-dummy-desync  the same deployment (the workers' DP and EP groups): every engine but the
                  culprit got the coordinator's START_DP_WAVE and, without requests, runs a
                  dummy batch whose coordinate_batch_across_dp all-reduce (the workers' DP
                  group) waits for the culprit's worker; the culprit engine idles in its input
                  queue (vllm#28224). --culprit: the DP rank.
  spg-broadcast   4 processes (2 per node) in a StatelessProcessGroup (TCPStore on node 0):
                  broadcasts from every rank in turn, then the culprit, the next source, is
                  stuck before it broadcasts (prepare_update, a lock); the others wait in
                  broadcast_obj on broadcast_from/<culprit>/<n>.
  spg-send-recv   the same group passing objects around a ring (send_obj to rank + 1, recv_obj
                  from rank - 1): the culprit stops sending (produce_activation, sleeping);
                  rank culprit + 1 waits in recv_obj(src=culprit), the others in recv_obj
                  behind it.
  spg-barrier     the same group: a broadcast from --peer, then the group's barrier; the
                  culprit, a receiver, is stuck after receiving (apply_update, a lock) and the
                  others wait in the barrier.
  rl-trainer-stuck  TRL's GRPO-style weight sync: node 0 runs `trl vllm-serve` (the HTTP server
                  and 2 data-parallel llm_worker processes, vLLM workers in their own torch
                  world over 127.0.0.1), node 1 the trainer (torchrun-style, 2 ranks, its torch
                  world over 127.0.0.1); the weight-sync StatelessProcessGroup (TCPStore on node
                  0, port 51216) has the workers as ranks 0 and 1 and trainer rank 0's process
                  (VLLMClient) as rank 2. At step 2 trainer rank 0 asks the server to update a
                  weight and then hangs saving a checkpoint before it broadcasts: both workers
                  wait in update_named_param's broadcast_obj, trainer rank 1 in the trainer's
                  barrier.
  rl-rollout-stuck  the same jobs; rollout worker --culprit never finishes loading the previous
                  weight (load_weights, a lock), so it never enters update_named_param for the
                  next one: the trainer's rank 0 and the other worker wait in the group's
                  barrier, trainer rank 1 in the trainer's barrier.
  user-subgroup   torchrun-style, 4 ranks (2 per node): after init_process_group the job builds
                  its data-parallel subgroups [0, 2] and [1, 3] with new_group and keeps its own
                  in a module-level global (Megatron style, no vLLM); at step 2
                  the culprit is stuck loading its batch (sleeping); its subgroup peer waits in
                  the subgroup's all_reduce, the other pair in the world barrier.

Every process announces itself once on stdout, one write(2) per line, right before its final
wait (pids as the node's PID namespace sees them):
  engine dp <d> pid <p> <waiting|diverged|idle|busy> [group dp grank <d>]
  rank <r> pid <p> <waiting|stuck> [group <label> grank <k>]     (torch ranks, vLLM workers)
  spg rank <r> pid <p> <waiting|diverged> group spg grank <r>
  trainer rank <r> pid <p> <waiting|diverged> group <weight-sync|trainer-world> grank <k>
  rollout rank <r> pid <p> <waiting|diverged> group weight-sync grank <r>
  coordinator pid <p>
`group <label> grank <k>` says which group the process waits on (labels: the scenario's own
names, the same on every member) and its rank there. Each launcher relays its processes' output
and prints ``group job ready on node<i>`` once all of its node's processes announced, which
tools/testbed/cluster.sh waits for. Every process dies with its launcher (PR_SET_PDEATHSIG).
"""
import argparse
import ctypes
import datetime
import functools
import itertools
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SIM_DIR = os.path.join(HERE, "sim")
SCENARIOS = ("dp-step-hang", "dp-idle", "dp-busy", "dp-ep-dummy-desync", "spg-broadcast",
             "spg-send-recv", "spg-barrier", "rl-trainer-stuck", "rl-rollout-stuck",
             "user-subgroup")
DP_SCENARIOS = SCENARIOS[:4]
SPG_SCENARIOS = ("spg-broadcast", "spg-send-recv", "spg-barrier")
RL_SCENARIOS = ("rl-trainer-stuck", "rl-rollout-stuck")
# Ports on node 0 (the master address) or, for the RL jobs' own worlds, on 127.0.0.1.
DP_MASTER_PORT = 29550         # ParallelConfig.data_parallel_master_port
DP_COORDINATOR_PORT = 29560    # the DP coordinator's engine socket
WORKER_WORLD_PORT = 29600      # the DP engines' workers: one torch world
SPG_PORT = 29530               # the StatelessProcessGroup's TCPStore
VLLM_SERVER_PORT = 8000        # trl vllm-serve's HTTP port
WEIGHT_SYNC_PORT = 51216       # TRL's group_port (VLLMClient's default)
ROLLOUT_WORLD_PORT = 29610     # the rollout workers' torch world (127.0.0.1, node 0)
TRAINER_WORLD_PORT = 29500     # the trainer's torch world (127.0.0.1, node 1)
DP_SIZE = 4
ENGINES_PER_NODE = 2
# dp-step-hang: the step whose DP all_reduce never completes (the 32nd: vLLM's interval).
DP_STALL_STEP = 32
# RL: the weight-update index (step * parameters + parameter) where the hang starts.
RL_PARAMS = 4
RL_STALL_STEP = 2
RL_STALL_UPDATE = RL_STALL_STEP * RL_PARAMS + 1
SPG_SIZE = 4
STALL_ROUND = 3
# A final announcement (the lines cluster.sh's readiness counts through the launcher).
FINAL_LINE = re.compile(r"^((engine dp|rank|spg rank|trainer rank|rollout rank) \d+ pid \d+ "
                        r"(waiting|diverged|stuck|idle|busy)\b|coordinator pid \d+)")


def die_with_parent():
    """PR_SET_PDEATHSIG(SIGKILL): the process dies with its parent."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)


def announce(line):
    """One line on stdout in one write(2) (lines of several processes never interleave)."""
    os.write(1, (line + "\n").encode())


def use_simulated_frameworks():
    """The simulated vLLM and TRL first on sys.path (and on the children's PYTHONPATH)."""
    if SIM_DIR not in sys.path:
        sys.path.insert(0, SIM_DIR)
    os.environ["PYTHONPATH"] = SIM_DIR + os.pathsep + os.environ.get("PYTHONPATH", "")


_stall = threading.Event()


def wait_forever_on_lock(reason):
    """A wait that never ends: a threading.Event nobody sets (a lock, as a device sync or a
    filesystem lock would be)."""
    _stall.wait()
    raise AssertionError(reason)


# ---------------------------------------------------------------------------------------------
# vLLM data parallelism: DP engine cores on the stateless DP group.


def dp_vllm_config(args, dp_rank):
    """The engine's config: its ParallelConfig (TP = 1, DP = 4, the DP master on node 0), the
    workers' init method, and the scenario's stall and announcements."""
    from vllm.config import ParallelConfig
    parallel_config = ParallelConfig(
        data_parallel_size=DP_SIZE, data_parallel_rank=dp_rank,
        data_parallel_master_ip=args.master_addr, data_parallel_master_port=DP_MASTER_PORT,
        disable_custom_all_reduce=True)
    culprit = args.scenario == "dp-step-hang" and dp_rank == args.culprit
    config = {"parallel_config": parallel_config,
              "distributed_init_method": f"tcp://{args.master_addr}:{WORKER_WORLD_PORT}",
              "stuck_rank": 0 if culprit else -1,
              "stall_step": DP_STALL_STEP if culprit else 1 << 30}
    if culprit:
        config["announce_wait_step"] = DP_STALL_STEP
        config["wait_announcement"] = (f"engine dp {dp_rank} pid {{pid}} diverged group dp "
                                       f"grank {dp_rank}")
    if args.scenario == "dp-busy":
        config["step_seconds"] = 0.01
    if args.scenario == "dp-ep-dummy-desync" and dp_rank != args.culprit:
        config["announce_rpc"] = {
            "execute_dummy_batch": "rank {rank} pid {pid} waiting group worker-dp grank {rank}"}
    return config


def dp_engine_main(args, dp_rank):
    """One DP engine core process (started like vLLM's CoreEngineProcManager starts them):
    builds the engine (its workers, the stateless DP group), queues the scenario's requests or
    the coordinator's wave start, announces, and runs the busy loop."""
    die_with_parent()
    use_simulated_frameworks()
    from vllm.v1.engine.core import DPEngineCoreProc
    scenario = args.scenario
    requests = [f"req-dp{dp_rank}-0"] if scenario in ("dp-step-hang", "dp-busy") else []
    start_wave = 0 if scenario == "dp-ep-dummy-desync" and dp_rank != args.culprit else None
    engine = DPEngineCoreProc.run_engine_core(dp_vllm_config(args, dp_rank), dp_rank=dp_rank,
                                              requests=requests, start_wave=start_wave)
    pid = os.getpid()
    member = f"group dp grank {dp_rank}"
    if scenario == "dp-busy":
        engine._simulate_finish_sync_interval = 1
    said = []

    def before_wait(what):
        """Announces the engine's first wait on the other engines."""
        if said:
            return
        if scenario == "dp-step-hang" and what == "dp_sync":
            announce(f"engine dp {dp_rank} pid {pid} waiting {member}")
        elif scenario == "dp-busy" and what == "dp_sync":
            announce(f"engine dp {dp_rank} pid {pid} busy {member}")
        elif scenario == "dp-ep-dummy-desync" and what == "dummy_batch":
            announce(f"engine dp {dp_rank} pid {pid} waiting")
        else:
            return
        said.append(what)

    engine._simulate_before_wait = before_wait
    if scenario == "dp-idle":
        announce(f"engine dp {dp_rank} pid {pid} idle {member}")
    elif scenario == "dp-ep-dummy-desync" and dp_rank == args.culprit:
        # The coordinator's START_DP_WAVE never reached this engine: it idles.
        announce(f"engine dp {dp_rank} pid {pid} diverged")
    engine.run_busy_loop()


def launch_dp(args):
    """This node's DP engine cores (DP ranks 2i, 2i + 1) and, on node 0, the DP coordinator
    (started by the front end, as vLLM's API server does). Returns the processes and the
    number of announcements they make."""
    use_simulated_frameworks()
    from vllm.config import ParallelConfig
    from vllm.v1.engine.coordinator import DPCoordinator
    context = multiprocessing.get_context("spawn")
    processes = []
    expected = 0
    if args.node_index == 0:
        coordinator = DPCoordinator(ParallelConfig(data_parallel_size=DP_SIZE),
                                    port=DP_COORDINATOR_PORT)
        processes.append(coordinator.proc)
        expected += 1
    for local in range(ENGINES_PER_NODE):
        dp_rank = args.node_index * ENGINES_PER_NODE + local
        process = context.Process(target=dp_engine_main, args=(args, dp_rank),
                                  name=f"EngineCore_DP{dp_rank}")
        process.start()
        processes.append(process)
        expected += 1
        if args.scenario == "dp-step-hang" and dp_rank == args.culprit:
            expected += 1  # its worker: "rank R pid P stuck"
        if args.scenario == "dp-ep-dummy-desync" and dp_rank != args.culprit:
            expected += 1  # its worker, waiting in the dummy batch's DP all-reduce
    return processes, expected


# ---------------------------------------------------------------------------------------------
# vLLM's StatelessProcessGroup between plain processes.


def prepare_update(round_index):
    """spg-broadcast: the source builds the object it broadcasts (here it waits for a lock
    that is never released)."""
    wait_forever_on_lock("prepare_update")


def produce_activation(round_index):
    """spg-send-recv: the next object to pass on; the culprit's never comes (it sleeps)."""
    while True:
        time.sleep(0.5)


def apply_update(update):
    """spg-barrier: applies what was received; the culprit waits for a lock forever."""
    wait_forever_on_lock("apply_update")


def spg_member_main(args, rank):
    """One member of the StatelessProcessGroup (rank of SPG_SIZE, the store on node 0)."""
    die_with_parent()
    use_simulated_frameworks()
    from vllm.distributed.utils import StatelessProcessGroup
    group = StatelessProcessGroup.create(host=args.master_addr, port=SPG_PORT, rank=rank,
                                         world_size=SPG_SIZE)
    pid = os.getpid()
    member = f"group spg grank {rank}"
    culprit = rank == args.culprit
    state = "diverged" if culprit else "waiting"
    if args.scenario == "spg-broadcast":
        for round_index in itertools.count():
            src = round_index % SPG_SIZE if round_index < STALL_ROUND else args.culprit
            if round_index == STALL_ROUND:
                announce(f"spg rank {rank} pid {pid} {state} {member}")
                if culprit:
                    prepare_update(round_index)
            payload = {"round": round_index} if rank == src else None
            group.broadcast_obj(payload, src=src)
    elif args.scenario == "spg-send-recv":
        prev_rank, next_rank = (rank - 1) % SPG_SIZE, (rank + 1) % SPG_SIZE
        for round_index in itertools.count():
            if round_index == STALL_ROUND:
                announce(f"spg rank {rank} pid {pid} {state} {member}")
                if culprit:
                    produce_activation(round_index)
            group.send_obj({"round": round_index, "from": rank}, dst=next_rank)
            group.recv_obj(src=prev_rank)
    else:
        for round_index in itertools.count():
            update = group.broadcast_obj({"round": round_index} if rank == args.peer else None,
                                         src=args.peer)
            if round_index == STALL_ROUND:
                announce(f"spg rank {rank} pid {pid} {state} {member}")
                if culprit:
                    apply_update(update)
            group.barrier(timeout=3600.0)


def launch_spg(args):
    """This node's two members of the group (plain processes of the user's script)."""
    processes = []
    for local in range(SPG_SIZE // args.nodes):
        rank = args.node_index * (SPG_SIZE // args.nodes) + local
        processes.append(subprocess.Popen(child_command(args, "spg-member", rank)))
    return processes, len(processes)


# ---------------------------------------------------------------------------------------------
# RL weight sync: a trainer job and a rollout job joined by TRL's weight-update group.


def rollout_worker_ready(worker):
    """Runs in each rollout worker once built (trl vllm-serve's llm_worker): counts its weight
    updates, announces at the scenario's update and, for rl-rollout-stuck's culprit, stalls
    the load of the weight before it."""
    scenario, culprit = os.environ["GROUP_JOB_SCENARIO"], int(os.environ["GROUP_JOB_CULPRIT"])
    rank = worker.rank
    updates = itertools.count()
    member = f"group weight-sync grank {rank}"

    def before_update(name):
        index = next(updates)
        if scenario == "rl-rollout-stuck" and rank == culprit:
            if index == RL_STALL_UPDATE - 1:
                announce(f"rollout rank {rank} pid {os.getpid()} diverged {member}")
                worker.model_runner.model._simulate_stall_on = name
        elif index == RL_STALL_UPDATE:
            announce(f"rollout rank {rank} pid {os.getpid()} waiting {member}")

    worker._simulate_before_update = before_update


def vllm_serve_main(args):
    """`trl vllm-serve --data-parallel-size 2` on node 0 (the rollout job)."""
    die_with_parent()
    use_simulated_frameworks()
    from trl.scripts import vllm_serve
    os.environ["GROUP_JOB_SCENARIO"] = args.scenario
    os.environ["GROUP_JOB_CULPRIT"] = str(args.culprit)
    vllm_serve.main({"host": "0.0.0.0", "port": VLLM_SERVER_PORT, "data_parallel_size": 2,
                     "master_port": ROLLOUT_WORLD_PORT, "on_worker_ready": rollout_worker_ready})


class TinyPolicy:
    """The trainer's model: the four parameters the server's Qwen2ForCausalLM has."""

    def __init__(self):
        """Zero tensors of the server model's names and shapes."""
        import torch
        from vllm.model_executor.models.qwen2 import Qwen2ForCausalLM
        self.params = {name: torch.zeros_like(p) for name, p in
                       Qwen2ForCausalLM().params_dict.items()}

    def named_parameters(self):
        """(name, tensor) pairs, as torch.nn.Module.named_parameters."""
        return self.params.items()


def save_checkpoint(step):
    """rl-trainer-stuck: rank 0 saves a checkpoint (the trainer's _save_checkpoint, writing its
    shards); the write never finishes."""
    while True:
        write_checkpoint_shard(step)


def write_checkpoint_shard(step):
    """Writes one shard to the (stalled) filesystem: slowly."""
    time.sleep(1.0)


def trainer_rank_main(args):
    """One trainer rank (torchrun's variables in its environment): a GRPO-style loop. Each step
    averages the gradients (all_reduce on the trainer's world); rank 0's process then sends
    every weight to the vLLM server (VLLMClient.update_named_param) and resets its prefix
    cache; every rank ends the step in the trainer's barrier (accelerate's
    wait_for_everyone)."""
    die_with_parent()
    use_simulated_frameworks()
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="env://",
                            timeout=datetime.timedelta(seconds=1800))
    rank = dist.get_rank()
    pid = os.getpid()
    model = TinyPolicy()
    client = None
    if rank == 0:
        from trl.extras.vllm_client import VLLMClient
        client = VLLMClient(host=args.master_addr, server_port=VLLM_SERVER_PORT,
                            group_port=WEIGHT_SYNC_PORT, connection_timeout=300.0)
    updates = itertools.count()
    for step in itertools.count():
        gradient = torch.ones(4)
        dist.all_reduce(gradient)
        if client is not None:
            for name, param in model.named_parameters():
                index = next(updates)
                if index == RL_STALL_UPDATE:
                    if args.scenario == "rl-trainer-stuck":
                        announce(f"trainer rank 0 pid {pid} diverged group weight-sync grank 2")
                        client._simulate_before_broadcast = functools.partial(
                            save_checkpoint, step)
                    else:
                        announce(f"trainer rank 0 pid {pid} waiting group weight-sync grank 2")
                client.update_named_param(name, param.data + step)
            client.reset_prefix_cache()
        elif step == RL_STALL_STEP:
            announce(f"trainer rank {rank} pid {pid} waiting group trainer-world grank {rank}")
        dist.barrier()


def launch_rl(args):
    """Node 0: the rollout job (trl vllm-serve, its two workers); node 1: the trainer job
    (torchrun's agent stand-in: two ranks with torchrun's variables, MASTER_ADDR 127.0.0.1)."""
    if args.node_index == 0:
        return [subprocess.Popen(child_command(args, "vllm-serve", 0))], 2
    processes = []
    for local_rank in range(2):
        env = dict(os.environ, RANK=str(local_rank), LOCAL_RANK=str(local_rank), WORLD_SIZE="2",
                   LOCAL_WORLD_SIZE="2", GROUP_RANK="0", ROLE_RANK=str(local_rank),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(TRAINER_WORLD_PORT),
                   TORCHELASTIC_RUN_ID="grpo-trainer", OMP_NUM_THREADS="1")
        processes.append(subprocess.Popen(child_command(args, "trainer-rank", local_rank),
                                          env=env))
    return processes, 2


# ---------------------------------------------------------------------------------------------
# A torch subgroup made after init and held only by user code.

# The job's data-parallel subgroup, kept as Megatron's parallel_state keeps its groups.
_DATA_PARALLEL_GROUP = None


def load_next_batch(step):
    """user-subgroup: the culprit's data loader never delivers (it sleeps)."""
    while True:
        time.sleep(0.5)


def subgroup_rank_main(args):
    """One rank (torchrun's variables): init_process_group, the data-parallel subgroups
    [0, 2] and [1, 3] (new_group each), then steps: the gradient all_reduce on the rank's
    subgroup and a world barrier."""
    global _DATA_PARALLEL_GROUP
    die_with_parent()
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="env://",
                            timeout=datetime.timedelta(seconds=1800))
    rank = dist.get_rank()
    # Every rank makes every subgroup, in the same order, and keeps its own (torch 1.13's
    # new_subgroups_by_enumeration does the same but insists on CUDA).
    for ranks in ([0, 2], [1, 3]):
        group = dist.new_group(ranks)
        if rank in ranks:
            _DATA_PARALLEL_GROUP = group
    group_rank = dist.get_rank(_DATA_PARALLEL_GROUP)
    pid = os.getpid()
    peer = rank ^ 2
    for step in itertools.count():
        if step == RL_STALL_STEP:
            if rank == args.culprit:
                announce(f"rank {rank} pid {pid} diverged group subgroup grank {group_rank}")
                load_next_batch(step)
            elif peer == args.culprit:
                announce(f"rank {rank} pid {pid} waiting group subgroup grank {group_rank}")
            else:
                announce(f"rank {rank} pid {pid} waiting group world grank {rank}")
        gradient = torch.ones(4)
        dist.all_reduce(gradient, group=_DATA_PARALLEL_GROUP)
        dist.barrier()


def launch_subgroup(args):
    """torchrun's agent stand-in: this node's two ranks (world 4, MASTER_ADDR node 0)."""
    processes = []
    for local_rank in range(2):
        rank = args.node_index * 2 + local_rank
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(local_rank), WORLD_SIZE="4",
                   LOCAL_WORLD_SIZE="2", GROUP_RANK=str(args.node_index), ROLE_RANK=str(rank),
                   MASTER_ADDR=args.master_addr, MASTER_PORT=str(args.master_port),
                   TORCHELASTIC_RUN_ID="subgroup-job", OMP_NUM_THREADS="1")
        processes.append(subprocess.Popen(child_command(args, "subgroup-rank", rank), env=env))
    return processes, 2


# ---------------------------------------------------------------------------------------------
# The launcher.


def child_command(args, role, index):
    """The command line of a process this launcher starts (this script, --role ROLE)."""
    return [sys.executable, os.path.abspath(__file__), "--role", role, "--index", str(index),
            "--scenario", args.scenario, "--culprit", str(args.culprit), "--peer",
            str(args.peer), "--nodes", str(args.nodes), "--node-index", str(args.node_index),
            "--master-addr", args.master_addr, "--master-port", str(args.master_port)]


def relay_output(node_index, expected):
    """Routes this process's stdout, and so every descendant's, through a pipe that a thread
    copies to the real stdout, counting the final announcements; prints
    "group job ready on node<i>" once there are `expected` of them."""
    read_end, write_end = os.pipe()
    real_stdout = os.dup(1)
    os.dup2(write_end, 1)
    os.close(write_end)
    counter = {"n": 0}

    def pump():
        with os.fdopen(read_end, "rb") as lines:
            for line in lines:
                os.write(real_stdout, line)
                if FINAL_LINE.match(line.decode(errors="replace")):
                    counter["n"] += 1
                if counter["n"] >= expected[0] and not counter.get("ready"):
                    counter["ready"] = True
                    os.write(real_stdout, f"group job ready on node{node_index}\n".encode())

    threading.Thread(target=pump, daemon=True, name="relay").start()


def main():
    """The node's launcher (default), or one of its processes (--role)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenario", choices=SCENARIOS, required=True)
    parser.add_argument("--culprit", type=int, default=0,
                        help="the diverged DP rank, group rank or rank (see the scenarios)")
    parser.add_argument("--peer", type=int, default=0, help="spg-barrier: the source rank")
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--node-index", type=int, default=0)
    parser.add_argument("--ranks-per-node", type=int, default=2, help="ignored (node.sh)")
    parser.add_argument("--master-addr", default="127.0.0.1")
    parser.add_argument("--master-port", type=int, default=29500)
    parser.add_argument("--role", help=argparse.SUPPRESS)
    parser.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.nodes != 2:
        parser.error("--nodes: the group jobs run on 2 nodes")
    limits = {"dp-step-hang": DP_SIZE, "dp-ep-dummy-desync": DP_SIZE, "spg-broadcast": SPG_SIZE,
              "spg-send-recv": SPG_SIZE, "spg-barrier": SPG_SIZE, "rl-rollout-stuck": 2,
              "user-subgroup": 4}
    if args.scenario in limits and not 0 <= args.culprit < limits[args.scenario]:
        parser.error(f"--culprit must be 0..{limits[args.scenario] - 1} for {args.scenario}")
    if args.scenario == "spg-barrier" and (args.peer == args.culprit
                                           or not 0 <= args.peer < SPG_SIZE):
        parser.error("--peer: the source, a group rank other than the culprit")
    if args.role == "spg-member":
        spg_member_main(args, args.index)
    elif args.role == "vllm-serve":
        vllm_serve_main(args)
    elif args.role == "trainer-rank":
        trainer_rank_main(args)
    elif args.role == "subgroup-rank":
        subgroup_rank_main(args)
    if args.role:
        return
    die_with_parent()
    expected = [1 << 30]
    relay_output(args.node_index, expected)
    if args.scenario in DP_SCENARIOS:
        processes, count = launch_dp(args)
    elif args.scenario in SPG_SCENARIOS:
        processes, count = launch_spg(args)
    elif args.scenario in RL_SCENARIOS:
        processes, count = launch_rl(args)
    else:
        processes, count = launch_subgroup(args)
    expected[0] = count
    while True:
        codes = [p.poll() if hasattr(p, "poll") else p.exitcode for p in processes]
        failed = [c for c in codes if c not in (None, 0)]
        if failed:
            # A process died (its traceback is in the log): tell cluster.sh not to wait.
            os.write(2, f"group_job.py: error: a process of the job exited with status "
                        f"{failed[0]}\n".encode())
            return 1
        if all(c is not None for c in codes):
            return 0
        time.sleep(0.5)


if __name__ == "__main__":
    sys.exit(main())
