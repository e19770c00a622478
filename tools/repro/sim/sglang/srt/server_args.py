"""Simulated sglang.srt.server_args: the server's arguments (ServerArgs, SGLang's flag names)
and the inter-process channels (PortArgs).

Simulation: PortArgs holds multiprocessing pipes where SGLang names ZMQ ipc:// endpoints
(tokenizer -> scheduler, scheduler -> detokenizer, detokenizer -> tokenizer); the
--simulate-* flags carry the scenario's stall (tools/repro/sglang_serving.py).
"""
import argparse
import dataclasses
import multiprocessing
from typing import Optional


@dataclasses.dataclass
class ServerArgs:
    """The arguments of `python -m sglang.launch_server` this simulation reads."""

    model_path: str
    tp_size: int = 1
    pp_size: int = 1
    nnodes: int = 1
    node_rank: int = 0
    dist_init_addr: Optional[str] = None
    host: str = "127.0.0.1"
    port: int = 30000
    base_gpu_id: int = 0
    log_level: str = "info"
    enable_hierarchical_cache: bool = False
    simulate_requests: int = 23
    simulate_max_new_tokens: int = 1 << 20
    simulate_stuck_rank: int = -1
    simulate_stall_step: int = 3
    simulate_stall_layer: int = 1

    @staticmethod
    def add_cli_args(parser):
        """SGLang's spelling of the flags (with its aliases --tp and --pp)."""
        parser.add_argument("--model-path", "--model", dest="model_path", required=True)
        parser.add_argument("--tensor-parallel-size", "--tp-size", "--tp", dest="tp_size",
                            type=int, default=1)
        parser.add_argument("--pipeline-parallel-size", "--pp-size", "--pp", dest="pp_size",
                            type=int, default=1)
        parser.add_argument("--nnodes", type=int, default=1)
        parser.add_argument("--node-rank", dest="node_rank", type=int, default=0)
        parser.add_argument("--dist-init-addr", "--nccl-init-addr", dest="dist_init_addr")
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=30000)
        parser.add_argument("--base-gpu-id", dest="base_gpu_id", type=int, default=0)
        parser.add_argument("--log-level", dest="log_level", default="info")
        parser.add_argument("--enable-hierarchical-cache", dest="enable_hierarchical_cache",
                            action="store_true")
        parser.add_argument("--simulate-requests", type=int, default=23)
        parser.add_argument("--simulate-max-new-tokens", type=int, default=1 << 20)
        parser.add_argument("--simulate-stuck-rank", type=int, default=-1)
        parser.add_argument("--simulate-stall-step", type=int, default=3)
        parser.add_argument("--simulate-stall-layer", type=int, default=1)

    def check_server_args(self):
        """The checks of a multi-node TP launch."""
        assert self.tp_size % self.nnodes == 0, "tp_size must be divisible by number of nodes"
        assert 0 <= self.node_rank < self.nnodes
        assert self.nnodes == 1 or self.dist_init_addr, "--dist-init-addr is needed for nnodes > 1"


def prepare_server_args(argv):
    """Parses the command line into a ServerArgs."""
    parser = argparse.ArgumentParser(prog="python -m sglang.launch_server")
    ServerArgs.add_cli_args(parser)
    return ServerArgs(**vars(parser.parse_args(argv)))


@dataclasses.dataclass
class PortArgs:
    """The channels between the processes of one node: each pipe end goes to the process that
    uses it (SGLang: ZMQ ipc names, and nccl_port for the default init address)."""

    tokenizer_to_scheduler: Optional[tuple] = None
    scheduler_to_detokenizer: Optional[tuple] = None
    detokenizer_to_tokenizer: Optional[tuple] = None
    nccl_port: int = 0

    @staticmethod
    def init_new(server_args):
        """The node's channels: none on a node that runs no tokenizer (node_rank >= 1)."""
        if server_args.node_rank >= 1:
            return PortArgs()
        context = multiprocessing.get_context("spawn")
        return PortArgs(tokenizer_to_scheduler=context.Pipe(duplex=False),
                        scheduler_to_detokenizer=context.Pipe(duplex=False),
                        detokenizer_to_tokenizer=context.Pipe(duplex=False))
