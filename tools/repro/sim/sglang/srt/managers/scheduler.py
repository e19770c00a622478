"""Simulated sglang.srt.managers.scheduler: one scheduler process per TP rank
(sglang::scheduler_TP<r>). TP rank 0 receives the tokenized requests and broadcasts them to the
other ranks of its TP group (broadcast_pyobj, gloo, across nodes); every rank runs the same
batches, each forward all-reducing in every layer; TP rank 0 sends each step's tokens to the
detokenizer.

Simulation: the scheduler idles 10 ms when it has nothing to run (SGLang polls without
sleeping); the hierarchical cache is always on (its layer loads are where the stall happens);
torch and the model modules are imported where first used, so that of a node's processes only
the schedulers load torch (SGLang's all do, at start; the testbed's start-up time); every
request gets one token per step and never finishes (max_new_tokens 2^20). At the first decode
step from step --simulate-stall-step on, the layer loads of rank --simulate-stuck-rank stop at
layer --simulate-stall-layer (it waits in LayerDoneCounter.wait_until; "rank R pid P stuck")
and the other ranks announce ("rank R pid P waiting") before that layer, whose all-reduce never
completes.
"""
import dataclasses
import logging
import os
import time
from typing import List, Optional

import setproctitle

from sglang.srt.managers.cache_controller import HiCacheController
from sglang.srt.managers.io_struct import BatchTokenIDOut, TokenizedGenerateReqInput
from sglang.srt.utils import (NOBLOCK, ZMQError, announce, broadcast_pyobj, configure_logger,
                              get_zmq_socket, kill_itself_when_parent_died)

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class Req:
    """A request the scheduler runs."""

    rid: str
    origin_input_ids: List[int]
    max_new_tokens: int
    output_ids: List[int] = dataclasses.field(default_factory=list)
    finished_reason: Optional[str] = None


@dataclasses.dataclass
class ModelWorkerBatch:
    """What the model worker needs of a batch."""

    forward_mode: object  # ForwardMode (forward_batch_info.py)
    input_ids: List[int]
    seq_lens: List[int]
    hicache_consumer_index: int = -1
    simulate_on_layer: Optional[object] = None


@dataclasses.dataclass
class ScheduleBatch:
    """The requests of one forward."""

    reqs: List[Req]
    forward_mode: object  # ForwardMode (forward_batch_info.py)

    def get_model_worker_batch(self):
        """The model worker's view: each request's last token (decode) or first (extend)."""
        return ModelWorkerBatch(
            forward_mode=self.forward_mode,
            input_ids=[(r.output_ids or r.origin_input_ids)[-1] for r in self.reqs],
            seq_lens=[len(r.origin_input_ids) + len(r.output_ids) for r in self.reqs])


class Scheduler:
    """Schedules the requests of one TP rank and runs its forwards."""

    def __init__(self, server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank):
        self.server_args = server_args
        self.tp_rank = tp_rank
        self.tp_size = server_args.tp_size
        if tp_rank == 0 and port_args.tokenizer_to_scheduler is not None:
            self.recv_from_tokenizer = get_zmq_socket(port_args.tokenizer_to_scheduler[0])
            self.send_to_detokenizer = get_zmq_socket(port_args.scheduler_to_detokenizer[1])
        else:
            self.recv_from_tokenizer = None
            self.send_to_detokenizer = None
        from sglang.srt.managers.tp_worker import TpModelWorker
        self.tp_worker = TpModelWorker(server_args, gpu_id, tp_rank, moe_ep_rank, pp_rank,
                                       dp_rank, port_args.nccl_port)
        self.tp_group = self.tp_worker.get_tp_group()
        self.tp_cpu_group = self.tp_group.cpu_group
        self.cache_controller = HiCacheController(self.tp_worker.model_runner.token_to_kv_pool)
        self.waiting_queue = []
        self.running_reqs = []
        self.forward_ct = 0
        self._simulate_stalled = False

    def event_loop_normal(self):
        """The scheduler's loop: receive, schedule, run, send the results."""
        while True:
            recv_reqs = self.recv_requests()
            self.process_input_requests(recv_reqs)
            batch = self.get_next_batch_to_run()
            self.cur_batch = batch
            if batch:
                result = self.run_batch(batch)
                self.process_batch_result(batch, result)
            else:
                self.self_check_during_idle()
            self.last_batch = batch

    def recv_requests(self):
        """TP rank 0 takes what the tokenizer sent (without blocking); the TP group's ranks get
        it from rank 0."""
        if self.recv_from_tokenizer is not None:
            recv_reqs = []
            while True:
                try:
                    recv_reqs.append(self.recv_from_tokenizer.recv_pyobj(NOBLOCK))
                except ZMQError:
                    break
        else:
            recv_reqs = None
        if self.tp_size != 1:
            recv_reqs = broadcast_pyobj(recv_reqs, self.tp_group.rank, self.tp_cpu_group,
                                        src=self.tp_group.ranks[0])
        return recv_reqs

    def process_input_requests(self, recv_reqs):
        """New requests join the waiting queue."""
        for recv_req in recv_reqs:
            if isinstance(recv_req, TokenizedGenerateReqInput):
                self.handle_generate_request(recv_req)

    def handle_generate_request(self, recv_req):
        """One request: waits for its prefill."""
        self.waiting_queue.append(
            Req(recv_req.rid, list(recv_req.input_ids), recv_req.max_new_tokens))

    def get_next_batch_to_run(self):
        """The waiting requests' prefill, else a decode step of the running ones."""
        from sglang.srt.model_executor.forward_batch_info import ForwardMode
        if self.waiting_queue:
            reqs, self.waiting_queue = self.waiting_queue, []
            self.running_reqs.extend(reqs)
            return ScheduleBatch(reqs, ForwardMode.EXTEND)
        if self.running_reqs:
            return ScheduleBatch(list(self.running_reqs), ForwardMode.DECODE)
        return None

    def run_batch(self, batch):
        """The batch's forward on this rank (with its hierarchical cache loads)."""
        self.forward_ct += 1
        model_worker_batch = batch.get_model_worker_batch()
        self._simulate_stall(model_worker_batch)
        model_worker_batch.hicache_consumer_index = self.cache_controller.start_loading()
        self.cache_controller.layer_done_counter.set_consumer(
            model_worker_batch.hicache_consumer_index)
        _, next_token_ids = self.tp_worker.forward_batch_generation(model_worker_batch)
        return next_token_ids

    def process_batch_result(self, batch, next_token_ids):
        """Appends the tokens; TP rank 0 sends them to the detokenizer."""
        for req, token in zip(batch.reqs, next_token_ids):
            req.output_ids.append(token)
            if len(req.output_ids) >= req.max_new_tokens:
                req.finished_reason = "length"
        self.running_reqs = [r for r in self.running_reqs if r.finished_reason is None]
        if self.send_to_detokenizer is not None:
            self.send_to_detokenizer.send_pyobj(BatchTokenIDOut(
                [r.rid for r in batch.reqs], list(next_token_ids),
                [r.finished_reason for r in batch.reqs]))

    def self_check_during_idle(self):
        """Nothing to run (simulation: a 10 ms pause instead of polling flat out)."""
        time.sleep(0.01)

    def _simulate_stall(self, model_worker_batch):
        """Simulation only: the scenario's stall, at the first decode step from step
        --simulate-stall-step on (every rank runs the same batches)."""
        args = self.server_args
        if self.forward_ct < args.simulate_stall_step or self._simulate_stalled or \
                not model_worker_batch.forward_mode.is_decode():
            return
        self._simulate_stalled = True
        rank = self.tp_group.rank
        if rank == args.simulate_stuck_rank:
            self.cache_controller._simulate_stall_from_layer = args.simulate_stall_layer
            self.cache_controller._simulate_on_stall = (
                lambda: announce(f"rank {rank} pid {os.getpid()} stuck"))
            return

        def on_layer(layer):
            if layer == args.simulate_stall_layer:
                announce(f"rank {rank} pid {os.getpid()} waiting")

        model_worker_batch.simulate_on_layer = on_layer


def run_scheduler_process(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank,
                          dp_rank, pipe_writer):
    """The scheduler process: titled sglang::scheduler[_DP<d>][_TP<t>][_PP<p>], tells the
    launcher it is ready, runs its event loop."""
    prefix = ""
    if dp_rank is not None:
        prefix += f" DP{dp_rank}"
    if server_args.tp_size > 1:
        prefix += f" TP{tp_rank}"
    if server_args.pp_size > 1:
        prefix += f" PP{pp_rank}"
    kill_itself_when_parent_died()
    setproctitle.setproctitle(f"sglang::scheduler{prefix.replace(' ', '_')}")
    configure_logger(server_args, prefix=prefix)
    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank,
                          dp_rank)
    pipe_writer.send({"status": "ready", "max_total_num_tokens": 16384,
                      "max_req_input_len": 4096})
    announce(f"rank {tp_rank} pid {os.getpid()} ready")
    scheduler.event_loop_normal()
