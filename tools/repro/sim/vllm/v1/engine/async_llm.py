"""Simulated vllm.v1.engine.async_llm: AsyncLLM, the API server's engine client.

generate() adds the request (to the output processor and, through AsyncMPClient, to the engine
core process) and yields what its RequestOutputCollector receives; one background task,
output_handler, pulls the engine core's outputs and pushes them into the collectors.
"""
import asyncio

from vllm.logger import init_logger
from vllm.v1.engine import EngineCoreRequest
from vllm.v1.engine.core_client import AsyncMPClient
from vllm.v1.engine.output_processor import OutputProcessor, RequestOutputCollector

logger = init_logger(__name__)


class AsyncLLM:
    """An asynchronous wrapper for the vLLM engine."""

    def __init__(self, vllm_config):
        """Starts the engine core (in a background process) and, on a running loop, the output
        handler."""
        self.vllm_config = vllm_config
        self.output_processor = OutputProcessor()
        self.engine_core = AsyncMPClient(vllm_config)
        self.output_handler = None

    async def add_request(self, request_id, prompt, params):
        """Adds a request; its collector."""
        self._run_output_handler()
        queue = RequestOutputCollector(None, request_id)
        request = EngineCoreRequest(request_id, list(prompt), max_tokens=params["max_tokens"])
        self.output_processor.add_request(request, queue)
        await self.engine_core.add_request_async(request)
        return queue

    async def generate(self, prompt, sampling_params, request_id):
        """Main function called by the API server to kick off a request; yields its outputs
        until it finished."""
        q = await self.add_request(request_id, prompt, sampling_params)
        finished = False
        while not finished:
            # Note: drain queue without await if possible.
            out = q.get_nowait() or await q.get()
            finished = out.finished
            yield out

    def _run_output_handler(self):
        """Background loop: pulls from EngineCore and pushes to the requests' collectors."""
        if self.output_handler is not None:
            return
        engine_core = self.engine_core
        output_processor = self.output_processor

        async def output_handler():
            while True:
                # 1) Pull EngineCoreOutputs from the EngineCore.
                outputs = await engine_core.get_output_async()
                # 2) Process EngineCoreOutputs.
                output_processor.process_outputs(outputs.outputs)

        self.output_handler = asyncio.create_task(output_handler())
