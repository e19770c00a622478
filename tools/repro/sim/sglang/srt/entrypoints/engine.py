"""Simulated sglang.srt.entrypoints.engine: _launch_subprocesses starts this node's schedulers
(one process per TP rank of the node), and on node 0 the detokenizer process and the
TokenizerManager in the calling process. A node with node_rank >= 1 runs no tokenizer: it
waits for its schedulers to be ready, then serves /health (launch_dummy_health_check_server)
until they end."""
import logging
import multiprocessing as mp
import os

from sglang.srt.managers.detokenizer_manager import run_detokenizer_process
from sglang.srt.managers.scheduler import run_scheduler_process
from sglang.srt.managers.tokenizer_manager import TokenizerManager
from sglang.srt.server_args import PortArgs
from sglang.srt.utils import configure_logger, launch_dummy_health_check_server

logger = logging.getLogger(__name__)


def _set_envs_and_config(server_args):
    """Process-wide settings: spawned children (as SGLang forces)."""
    os.environ["NCCL_CUMEM_ENABLE"] = "0"
    mp.set_start_method("spawn", force=True)


def _launch_subprocesses(server_args, port_args=None):
    """Launches the schedulers of this node, and on node 0 the detokenizer and the
    TokenizerManager; returns (tokenizer_manager, template_manager, scheduler_info)."""
    configure_logger(server_args)
    _set_envs_and_config(server_args)
    server_args.check_server_args()
    if port_args is None:
        port_args = PortArgs.init_new(server_args)

    scheduler_procs = []
    scheduler_pipe_readers = []
    nnodes_per_tp_group = max(server_args.nnodes // server_args.pp_size, 1)
    tp_size_per_node = server_args.tp_size // nnodes_per_tp_group
    tp_rank_range = range(tp_size_per_node * (server_args.node_rank % nnodes_per_tp_group),
                          tp_size_per_node * (server_args.node_rank % nnodes_per_tp_group + 1))
    pp_rank = 0
    for tp_rank in tp_rank_range:
        reader, writer = mp.Pipe(duplex=False)
        gpu_id = server_args.base_gpu_id + tp_rank % tp_size_per_node
        proc = mp.Process(target=run_scheduler_process,
                          args=(server_args, port_args, gpu_id, tp_rank, 0, pp_rank, None,
                                writer))
        proc.start()
        scheduler_procs.append(proc)
        scheduler_pipe_readers.append(reader)

    if server_args.node_rank >= 1:
        # In multi-node cases, non-zero rank nodes do not need to run tokenizer or
        # detokenizer, so they can just wait here.
        for reader in scheduler_pipe_readers:
            data = reader.recv()
            assert data["status"] == "ready"
        launch_dummy_health_check_server(server_args.host, server_args.port)
        for proc in scheduler_procs:
            proc.join()
            logger.error("Scheduler or DataParallelController %d terminated with %s",
                         proc.pid, proc.exitcode)
        return None, None, None

    detoken_proc = mp.Process(target=run_detokenizer_process, args=(server_args, port_args))
    detoken_proc.start()
    tokenizer_manager = TokenizerManager(server_args, port_args)
    scheduler_infos = []
    for reader in scheduler_pipe_readers:
        data = reader.recv()
        assert data["status"] == "ready", f"Initialization failed: {data}"
        scheduler_infos.append(data)
    return tokenizer_manager, None, scheduler_infos[0]
