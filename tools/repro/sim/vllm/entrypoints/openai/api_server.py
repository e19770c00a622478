"""Simulated vllm.entrypoints.openai.api_server: the OpenAI-compatible server (python -m
vllm.entrypoints.openai.api_server) over AsyncLLM, whose engine core runs in a child process
(VLLM::EngineCore) with one worker process per rank (VLLM::Worker_TP<t>).

Simulation (tools/repro/serving_chain.py starts it): no HTTP listener and no uvicorn; the
route handler create_chat_completion runs for --simulate-requests in-flight requests as tasks on
the server's asyncio loop (asyncio.run; vLLM runs uvloop.run), each asking for --simulate-max-tokens
tokens; the worker --simulate-stuck-rank stalls in its step --simulate-stall-step
(multiproc_executor.py), so every request stays pending.
"""
import argparse
import asyncio
import os
import socket

from vllm.config import ParallelConfig
from vllm.entrypoints.openai.serving_chat import OpenAIServingChat
from vllm.logger import init_logger
from vllm.v1.engine.async_llm import AsyncLLM

logger = init_logger("vllm.entrypoints.openai.api_server")

_state = {}


async def create_chat_completion(request, raw_request=None):
    """POST /v1/chat/completions."""
    handler = _state["openai_serving_chat"]
    return await handler.create_chat_completion(request, raw_request)


def _distributed_init_method():
    """vLLM's get_distributed_init_method(get_loopback_ip(), get_open_port())."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{s.getsockname()[1]}"


async def run_server(args):
    """Builds the engine client and the handlers, then serves until shut down."""
    vllm_config = {
        "parallel_config": ParallelConfig(tensor_parallel_size=args.tensor_parallel_size,
                                          disable_custom_all_reduce=True),
        "distributed_init_method": _distributed_init_method(),
        "stuck_rank": args.simulate_stuck_rank,
        "stall_step": args.simulate_stall_step,
    }
    engine_client = AsyncLLM(vllm_config)
    _state["openai_serving_chat"] = OpenAIServingChat(engine_client, args.model)
    logger.info("Starting vLLM API server 0 on http://0.0.0.0:%d", args.port)
    requests = [asyncio.create_task(create_chat_completion(
        {"model": args.model, "max_tokens": args.simulate_max_tokens,
         "messages": [{"role": "user", "content": f"request {i}"}]}))
        for i in range(args.simulate_requests)]
    await asyncio.sleep(0)
    os.write(1, f"api server pid {os.getpid()}: {len(requests)} requests in flight\n".encode())
    shutdown = asyncio.Event()
    await shutdown.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="meta-llama/Llama-3.1-8B-Instruct")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--tensor-parallel-size", type=int, default=4)
    parser.add_argument("--simulate-requests", type=int, default=37)
    parser.add_argument("--simulate-max-tokens", type=int, default=1 << 20)
    parser.add_argument("--simulate-stuck-rank", type=int, default=3)
    parser.add_argument("--simulate-stall-step", type=int, default=2)
    args = parser.parse_args()
    asyncio.run(run_server(args))


if __name__ == "__main__":
    main()
