"""Simulated sglang.srt.entrypoints.http_server: the HTTP server over the TokenizerManager
(node 0 of a multi-node deployment; the other nodes return from nothing: their
_launch_subprocesses serves /health until the schedulers end).

Simulation: no FastAPI and no uvicorn; the /generate handler generate_request runs for
--simulate-requests in-flight requests as tasks on the server's own asyncio loop (each asking
for --simulate-max-new-tokens tokens), as uvicorn would run one per connection.
"""
import asyncio
import dataclasses
import logging
import os

from sglang.srt.entrypoints.engine import _launch_subprocesses
from sglang.srt.managers.io_struct import GenerateReqInput

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class _GlobalState:
    tokenizer_manager: object
    template_manager: object
    scheduler_info: dict


_global_state = None


def set_global_state(global_state):
    """The server's state, read by the handlers."""
    global _global_state
    _global_state = global_state


async def generate_request(obj, request=None):
    """POST /generate: the request's first (non-streaming: only) output."""
    try:
        ret = await _global_state.tokenizer_manager.generate_request(obj, request).__anext__()
        return ret
    except ValueError as e:
        logger.error("[http_server] Error: %s", e)
        return {"error": {"message": str(e)}}


async def _serve_simulated_requests(server_args):
    """Simulation: the server's loop with the in-flight requests, until shut down."""
    requests = [asyncio.create_task(generate_request(GenerateReqInput(
        text=f"request {i}", sampling_params={"max_new_tokens": server_args.simulate_max_new_tokens,
                                              "temperature": 0})))
        for i in range(server_args.simulate_requests)]
    tokenizer_manager = _global_state.tokenizer_manager
    while len(tokenizer_manager.rid_to_state) < len(requests):
        await asyncio.sleep(0.01)
    os.write(1, f"api server pid {os.getpid()}: {len(requests)} requests in flight\n".encode())
    await asyncio.Event().wait()


def launch_server(server_args, pipe_finish_writer=None, launch_callback=None):
    """Launches the subprocesses, then serves HTTP on node 0 (uvicorn.run in SGLang)."""
    tokenizer_manager, template_manager, scheduler_info = _launch_subprocesses(
        server_args=server_args)
    set_global_state(_GlobalState(tokenizer_manager, template_manager, scheduler_info))
    logger.info("The server is fired up and ready to roll!")
    asyncio.run(_serve_simulated_requests(server_args))
