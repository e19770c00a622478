"""Simulated vllm.v1.engine.core_client: the front end's client of the engine core process.

AsyncMPClient starts the engine core (vLLM's CoreEngineProcManager: a multiprocessing 'spawn'
Process running EngineCoreProc.run_engine_core), sends requests on its input socket and reads
its outputs from its output socket in a background task (process_outputs_socket) into an
asyncio.Queue that the output handler awaits (get_output_async). As in vLLM, the client binds
both sockets on ipc:// endpoints and the engine core connects to them. Simulation: no pyzmq:
each is a unix stream socket at the endpoint's path carrying pickled messages
(vllm.utils.make_zmq_socket); the output socket is read when the event loop says it is readable.
"""
import asyncio
import multiprocessing

from vllm.utils import accept_zmq_peer, get_open_zmq_ipc_path, make_zmq_socket
from vllm.v1.engine import EngineCoreRequestType


class AsyncMPClient:
    """Asyncio-compatible client for a multi-proc EngineCore."""

    def __init__(self, vllm_config):
        """Starts the engine core process with its input and output sockets."""
        from vllm.v1.engine.core import EngineCoreProc
        context = multiprocessing.get_context("spawn")
        input_address = get_open_zmq_ipc_path()
        output_address = get_open_zmq_ipc_path()
        input_listener = make_zmq_socket(input_address, bind=True)
        output_listener = make_zmq_socket(output_address, bind=True)
        self.proc = context.Process(target=EngineCoreProc.run_engine_core,
                                    name="EngineCore_DP0",
                                    kwargs=dict(vllm_config=vllm_config,
                                                input_address=input_address,
                                                output_address=output_address))
        self.proc.start()
        self.input_socket = accept_zmq_peer(input_listener)
        self.output_socket = accept_zmq_peer(output_listener)
        self.outputs_queue = asyncio.Queue()
        self.queue_task = None

    def _ensure_output_queue_task(self):
        """Starts process_outputs_socket once, on the running loop."""
        if self.queue_task is None:
            self.queue_task = asyncio.create_task(self.process_outputs_socket(),
                                                  name="EngineCoreOutputQueueTask")

    async def process_outputs_socket(self):
        """Reads the engine core's outputs off its output socket into outputs_queue."""
        loop = asyncio.get_running_loop()
        while True:
            readable = loop.create_future()
            loop.add_reader(self.output_socket.fileno(), readable.set_result, None)
            try:
                await readable
            finally:
                loop.remove_reader(self.output_socket.fileno())
            self.outputs_queue.put_nowait(self.output_socket.recv())

    async def get_output_async(self):
        """The engine core's next EngineCoreOutputs."""
        self._ensure_output_queue_task()
        outputs = await self.outputs_queue.get()
        if isinstance(outputs, Exception):
            raise outputs
        return outputs

    async def add_request_async(self, request):
        """Sends an ADD request to the engine core."""
        self._ensure_output_queue_task()
        self.input_socket.send((EngineCoreRequestType.ADD, request))
