"""Simulated trl.scripts.vllm_serve: `trl vllm-serve`, a vLLM server for a trainer.

The main process serves HTTP and starts one `llm_worker` process per data-parallel rank, each
holding a vLLM engine whose worker carries the WeightSyncWorkerExtension; it forwards the
trainer's requests to every llm_worker over a pipe ("call": wait for the answer;
"fire_and_forget": do not). The workers of all DP ranks are one torch world of their own (the
rollout job); with the trainer's client they form the weight-update group (a StatelessProcessGroup
on the client's group_port; worker r is rank r, the client the last rank).

Simulation: http.server instead of FastAPI and uvicorn; the engine runs in the llm_worker
process (as with VLLM_ENABLE_V1_MULTIPROCESSING=0 and one worker per DP rank, TP = 1): its
collective_rpc calls the worker directly; the llm_worker's LLM is the worker itself (no
scheduler or generation).
"""
import json
import multiprocessing
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch


class WeightSyncWorkerExtension:
    """Mixed into vLLM's worker class (worker_extension_cls): the worker side of the weight
    sync. init_communicator joins the group; update_named_param receives one weight from the
    client's broadcast and loads it."""

    pynccl_comm = None  # the communicator on the weight-update group
    client_rank = None  # the client's rank in it: the last
    # Simulation only: called with the weight's name when an update starts.
    _simulate_before_update = None

    def init_communicator(self, host, port, world_size):
        """Joins the weight-update group at host:port as this worker's rank in its own torch
        world (get_world_group().rank); the client is rank world_size - 1."""
        from vllm.distributed.device_communicators.pynccl import PyNcclCommunicator
        from vllm.distributed.parallel_state import get_world_group
        from vllm.distributed.utils import StatelessProcessGroup
        if self.pynccl_comm is not None:
            raise RuntimeError("Weight update group already initialized. "
                               "Call close_communicator first.")
        rank = get_world_group().rank
        pg = StatelessProcessGroup.create(host=host, port=port, rank=rank, world_size=world_size)
        self.pynccl_comm = PyNcclCommunicator(pg, device=torch.device("cpu"))
        self.client_rank = world_size - 1

    def update_named_param(self, name, dtype, shape):
        """Receives the client's broadcast of weight `name` (its dtype and shape from the
        request), waits in the group's barrier, then loads it into the model."""
        if self.pynccl_comm is None:
            raise RuntimeError("Communicator not initialized. Call `/init_communicator` first.")
        if self._simulate_before_update is not None:
            self._simulate_before_update(name)
        weight = torch.empty(shape, dtype=dtype)
        self.pynccl_comm.broadcast(weight, src=self.client_rank)
        self.pynccl_comm.group.barrier(timeout=3600.0)
        self.model_runner.model.load_weights(weights=[(name, weight)])

    def close_communicator(self):
        """Leaves the weight-update group."""
        self.pynccl_comm = None
        self.client_rank = None


def llm_worker(script_args, data_parallel_rank, master_port, connection):
    """One data-parallel rank of the server: builds the vLLM worker (the rollout job's rank
    data_parallel_rank, its torch world over 127.0.0.1:master_port) with the extension, then
    runs the commands that arrive on connection (collective_rpc of an extension method)."""
    from vllm.config import ParallelConfig
    from vllm.model_executor.models.qwen2 import Qwen2ForCausalLM
    from vllm.v1.worker.gpu_worker import Worker
    # vLLM's WorkerWrapperBase appends the extension to the worker class's bases.
    worker_class = type("Worker", (Worker, WeightSyncWorkerExtension), {})
    dp_size = script_args["data_parallel_size"]
    parallel_config = ParallelConfig(data_parallel_size=dp_size,
                                     data_parallel_rank=data_parallel_rank,
                                     disable_custom_all_reduce=True)
    worker = worker_class(rank=data_parallel_rank, local_rank=data_parallel_rank,
                          parallel_config=parallel_config,
                          distributed_init_method=f"tcp://127.0.0.1:{master_port}")
    worker.init_device(backend="gloo")
    worker.model_runner.model = Qwen2ForCausalLM()
    on_ready = script_args.get("on_worker_ready")
    if on_ready:
        on_ready(worker)
    connection.send({"status": "ready"})
    while True:
        command = connection.recv()
        if command["type"] == "shutdown":
            break
        if command["method"] == "collective_rpc":
            method = command["kwargs"]["method"]
            result = getattr(worker, method)(*command["kwargs"].get("args", ()))
        else:
            result = None
        if command["type"] == "call":
            connection.send(result)


def chunk_list(items, n):
    """items split into n nearly equal parts."""
    k, r = divmod(len(items), n)
    return [items[i * k + min(i, r):(i + 1) * k + min(i + 1, r)] for i in range(n)]


def main(script_args):
    """Starts the DP ranks' llm_worker processes, waits for each to be ready, then serves
    HTTP on script_args["host"]:script_args["port"] forever."""
    context = multiprocessing.get_context("spawn")
    dp_size = script_args["data_parallel_size"]
    master_port = script_args["master_port"]
    connections = []
    processes = []
    for data_parallel_rank in range(dp_size):
        parent_connection, child_connection = context.Pipe()
        process = context.Process(target=llm_worker, args=(script_args, data_parallel_rank,
                                                           master_port, child_connection))
        process.start()
        connections.append(parent_connection)
        processes.append(process)
    for connection in connections:
        connection.recv()
    lock = threading.Lock()

    def fire_and_forget(method, args):
        """collective_rpc(method, args) on every DP rank without waiting."""
        with lock:
            for connection in connections:
                connection.send({"type": "fire_and_forget", "method": "collective_rpc",
                                 "kwargs": {"method": method, "args": args}})

    class Handler(BaseHTTPRequestHandler):
        """The server's routes: /health/, /get_world_size/, /init_communicator/,
        /update_named_param/, /reset_prefix_cache/, /close_communicator/."""

        def log_message(self, format, *args):
            """No access log."""

        def _reply(self, payload):
            """200 with payload as JSON."""
            body = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            """/health/ and /get_world_size/ (the DP ranks' workers, TP = 1)."""
            if self.path == "/health/":
                self._reply({"status": "ok"})
            elif self.path == "/get_world_size/":
                self._reply({"world_size": dp_size})
            else:
                self.send_error(404)

        def do_POST(self):
            """The weight-sync routes: each forwarded to every DP rank, not waited for."""
            length = int(self.headers.get("Content-Length") or 0)
            request = json.loads(self.rfile.read(length) or b"{}")
            if self.path == "/init_communicator/":
                fire_and_forget("init_communicator",
                                (request["host"], request["port"], request["world_size"]))
            elif self.path == "/update_named_param/":
                dtype = getattr(torch, request["dtype"].split(".")[-1])
                fire_and_forget("update_named_param",
                                (request["name"], dtype, tuple(request["shape"])))
            elif self.path in ("/reset_prefix_cache/", "/close_communicator/"):
                if self.path == "/close_communicator/":
                    fire_and_forget("close_communicator", ())
            else:
                self.send_error(404)
                return
            self._reply({"message": "Request received"})

    server = ThreadingHTTPServer((script_args["host"], script_args["port"]), Handler)
    os.write(1, f"vllm serve pid {os.getpid()} serving HTTP on port {script_args['port']}\n"
             .encode())
    server.serve_forever()
