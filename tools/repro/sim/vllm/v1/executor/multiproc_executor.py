"""Simulated vllm.v1.executor.multiproc_executor: the engine core's executor over one worker
process per rank (VllmWorker-<rank>, titled VLLM::Worker_TP<t>). The engine broadcasts each RPC
(method, args, kwargs, output rank) on the shared-memory MessageQueue `rpc_broadcast_mq` that
every worker reads; each worker answers on its own `worker_response_mq`, which the engine reads.
Real gloo ranks: the workers build vLLM's groups and all-reduce in every forward.

Simulation: the workers' ready handshake is a multiprocessing pipe carrying the response
queue's handle (as vLLM's ready pipe does) and `wait_until_ready` does not exist (no ZMQ
sockets, the rings are local); the scenario's stall comes in vllm_config["stuck_rank"] and
vllm_config["stall_step"] (see tools/repro/serving_chain.py).
"""
import functools
import multiprocessing
import os
import time
from dataclasses import dataclass
from enum import Enum, auto
from typing import Optional

from vllm.distributed.device_communicators.shm_broadcast import Handle, MessageQueue
from vllm.logger import init_logger

logger = init_logger(__name__)


def announce(line):
    """Simulation only: one line on stdout for the test harness ("rank R pid P ...")."""
    os.write(1, (line + "\n").encode())


class MultiprocExecutor:
    """The executor of one engine core: starts the workers and sends them RPCs over the
    broadcast ring."""

    def __init__(self, vllm_config):
        """vLLM's Executor.__init__ -> _init_executor."""
        self.vllm_config = vllm_config
        self.parallel_config = vllm_config["parallel_config"]
        self._init_executor()

    def _init_executor(self):
        """Creates the broadcast MessageQueue (every rank a local reader), starts one worker
        process per rank and waits for each to answer with its response queue's handle."""
        self.world_size = self.parallel_config.world_size
        self.rpc_broadcast_mq = MessageQueue(self.world_size, self.world_size)
        scheduler_output_handle = self.rpc_broadcast_mq.export_handle()
        unready_workers = []
        for rank in range(self.world_size):
            unready_workers.append(WorkerProc.make_worker_process(
                vllm_config=self.vllm_config, local_rank=rank, rank=rank,
                distributed_init_method=self.vllm_config["distributed_init_method"],
                input_shm_handle=scheduler_output_handle))
        self.workers = WorkerProc.wait_for_ready(unready_workers)
        self.output_rank = self._get_output_rank()
        self._steps = 0

    def execute_model(self, scheduler_output):
        """One model step on every worker; the output comes from one worker (output_rank)."""
        self._steps += 1
        if self._steps == self.vllm_config.get("announce_wait_step",
                                               self.vllm_config["stall_step"] + 1):
            # Simulation only: the step that never returns; announce when its wait starts
            # (vllm_config["wait_announcement"]: the line, {pid} the engine's pid).
            line = self.vllm_config.get("wait_announcement", "engine core pid {pid} waiting")
            self.workers[self.output_rank].worker_response_mq._simulate_on_wait = (
                lambda: announce(line.format(pid=os.getpid())))
        (output,) = self.collective_rpc("execute_model", args=(scheduler_output,),
                                        unique_reply_rank=self.output_rank)
        return output

    def execute_dummy_batch(self):
        """A dummy batch on every worker (a DP engine in a wave without requests of its own);
        waits for every worker's answer."""
        self.collective_rpc("execute_dummy_batch")

    def collective_rpc(self, method, timeout=None, args=(), kwargs=None, non_block=False,
                       unique_reply_rank=None):
        """Broadcasts (method, args, kwargs, reply rank) to every worker, then reads the
        answer of each worker that replies, in rank order (get_response)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        kwargs = kwargs or {}
        self.rpc_broadcast_mq.enqueue((method, args, kwargs, unique_reply_rank))
        workers = ((self.workers[unique_reply_rank],)
                   if unique_reply_rank is not None else self.workers)
        responses = []

        def get_response(w, dequeue_timeout=None, cancel_event=None):
            status, result = w.worker_response_mq.dequeue(timeout=dequeue_timeout)
            if status != WorkerProc.ResponseStatus.SUCCESS:
                raise RuntimeError(f"Worker failed with error '{result}', please check the"
                                   " stack trace above for the root cause")
            return result

        for w in workers:
            dequeue_timeout = None if deadline is None else deadline - time.monotonic()
            responses.append(get_response(w, dequeue_timeout))
        return responses

    def _get_output_rank(self):
        """The worker whose output the engine takes: TP rank 0 of the last PP stage."""
        return self.world_size - self.parallel_config.tensor_parallel_size


@dataclass
class UnreadyWorkerProcHandle:
    """A worker process before it answered READY."""

    proc: multiprocessing.process.BaseProcess
    rank: int
    ready_pipe: object


@dataclass
class WorkerProcHandle:
    """A ready worker: its process, its rank and the queue it answers on."""

    proc: multiprocessing.process.BaseProcess
    rank: int
    worker_response_mq: MessageQueue
    death_writer: Optional[object] = None


class WorkerProc:
    """Wrapper that runs one Worker in a separate process."""

    READY_STR = "READY"

    class ResponseStatus(Enum):
        SUCCESS = auto()
        FAILURE = auto()

    def __init__(self, vllm_config, local_rank, rank, distributed_init_method,
                 input_shm_handle):
        """Builds the worker (torch.distributed and vLLM's groups), titles the process, opens
        the broadcast queue and creates this worker's response queue."""
        from vllm.v1.worker.gpu_worker import Worker
        self.rank = rank
        self.vllm_config = vllm_config
        parallel_config = vllm_config["parallel_config"]
        # The rank in the world across every DP replica (vLLM's init_distributed_environment
        # adds dp_rank * world_size; the simulated Worker takes it global).
        global_rank = parallel_config.data_parallel_rank * parallel_config.world_size + rank
        self.worker = Worker(rank=global_rank, local_rank=local_rank,
                             parallel_config=parallel_config,
                             distributed_init_method=distributed_init_method)
        self.worker.init_device(backend="gloo")
        import setproctitle
        tp_size = parallel_config.tensor_parallel_size
        title = "VLLM::Worker"
        if parallel_config.data_parallel_size > 1:
            title += f"_DP{parallel_config.data_parallel_rank}"
        if tp_size > 1:
            title += f"_TP{rank % tp_size}"
        setproctitle.setproctitle(title)
        self.rpc_broadcast_mq = MessageQueue.create_from_handle(input_shm_handle, rank)
        self.worker_response_mq = MessageQueue(1, 1)
        self._steps = 0

    @staticmethod
    def make_worker_process(vllm_config, local_rank, rank, distributed_init_method,
                            input_shm_handle):
        """Starts the worker's process (multiprocessing 'spawn', name VllmWorker-<rank>)."""
        context = multiprocessing.get_context("spawn")
        reader, writer = context.Pipe(duplex=False)
        proc = context.Process(target=WorkerProc.worker_main, name=f"VllmWorker-{rank}",
                               kwargs=dict(vllm_config=vllm_config, local_rank=local_rank,
                                           rank=rank,
                                           distributed_init_method=distributed_init_method,
                                           input_shm_handle=input_shm_handle,
                                           ready_pipe=(reader, writer)),
                               daemon=True)
        proc.start()
        writer.close()
        return UnreadyWorkerProcHandle(proc, rank, reader)

    @staticmethod
    def wait_for_ready(unready_proc_handles):
        """Waits for each worker's READY with its response queue's handle; opens that queue
        (the engine is its only reader)."""
        ready = [None] * len(unready_proc_handles)
        for handle in unready_proc_handles:
            response = handle.ready_pipe.recv()
            if response["status"] != WorkerProc.READY_STR:
                raise RuntimeError("WorkerProc initialization failed")
            ready[handle.rank] = WorkerProcHandle(
                handle.proc, handle.rank, MessageQueue.create_from_handle(response["handle"], 0))
            handle.ready_pipe.close()
        return ready

    @staticmethod
    def worker_main(*args, **kwargs):
        """The worker process: build the worker, send READY, run the busy loop."""
        reader, ready_writer = kwargs.pop("ready_pipe")
        reader.close()
        worker = WorkerProc(*args, **kwargs)
        ready_writer.send({"status": WorkerProc.READY_STR,
                           "handle": worker.worker_response_mq.export_handle()})
        ready_writer.close()
        announce(f"rank {worker.worker.rank} pid {os.getpid()} ready")
        worker.worker_busy_loop()

    def worker_busy_loop(self):
        """Main busy loop for Multiprocessing Workers: each RPC from the broadcast queue, the
        answer on the response queue when this worker is the one replying."""
        while True:
            method, args, kwargs, output_rank = self.rpc_broadcast_mq.dequeue()
            self._simulate_before_call(method)
            func = getattr(self.worker, method)
            output = func(*args, **kwargs)
            if output_rank is None or self.rank == output_rank:
                self.worker_response_mq.enqueue((WorkerProc.ResponseStatus.SUCCESS, output))

    def _simulate_before_call(self, method):
        """Simulation only: the scenario's stall. At step stall_step the stuck rank's KV
        connector never finishes saving (after the forward: its peers complete that step's
        all-reduce); at the next step the other ranks announce and wait for it in the forward's
        all-reduce."""
        template = self.vllm_config.get("announce_rpc", {}).pop(method, None)
        if template:
            # Simulation only: announce the first call of this RPC ({rank}: the global rank).
            announce(template.format(rank=self.worker.rank, pid=os.getpid()))
        if method != "execute_model":
            return
        self._steps += 1
        runner = self.worker.model_runner
        if self.vllm_config.get("step_seconds"):
            # A busy server's forward: the GPU's time per step.
            runner._simulate_after_forward = functools.partial(time.sleep,
                                                               self.vllm_config["step_seconds"])
        if self._steps == self.vllm_config["stall_step"] and \
                self.rank == self.vllm_config["stuck_rank"]:
            from vllm.distributed.kv_transfer.kv_connector.v1.shared_storage_connector import \
                SharedStorageConnector
            connector = SharedStorageConnector(self.rank)
            connector._simulate_on_stall = lambda: announce(
                f"rank {self.worker.rank} pid {os.getpid()} stuck")
            runner._simulate_after_forward = connector.wait_for_save
        elif self._steps == self.vllm_config["stall_step"] + 1:
            announce(f"rank {self.worker.rank} pid {os.getpid()} waiting")
