"""Simulated trl.extras.vllm_client: the trainer's client of a `trl vllm-serve` server.

The client talks HTTP to the server (generation, weight-update requests) and joins the server's
vLLM workers in a weight-update group: a vLLM StatelessProcessGroup on a TCPStore at the
server's host and group_port, the workers ranks 0..N-1 and the client the last rank, with a
PyNcclCommunicator on it that broadcasts each weight from the client to the workers.
"""
import logging
import time

import requests
import torch

from vllm.distributed.device_communicators.pynccl import PyNcclCommunicator
from vllm.distributed.utils import StatelessProcessGroup

logger = logging.getLogger(__name__)


class VLLMClient:
    """A client of the vLLM server at host:server_port; weight updates go through the group on
    host:group_port."""

    def __init__(self, host="0.0.0.0", server_port=8000, group_port=51216,
                 connection_timeout=0.0):
        """Waits for the server (check_server), then initialises the weight-update group
        (init_communicator)."""
        self.session = requests.Session()
        self.host = host
        self.server_port = server_port
        self.group_port = group_port
        # Simulation only: called between the update request and the weight's broadcast (the
        # scenario's stall of the trainer).
        self._simulate_before_broadcast = None
        self.check_server(connection_timeout)
        self.init_communicator()

    def check_server(self, total_timeout=0.0, retry_interval=2.0):
        """GET /health/ until it answers 200, retrying every retry_interval seconds for at most
        total_timeout seconds."""
        url = f"http://{self.host}:{self.server_port}/health/"
        start_time = time.time()
        while True:
            try:
                response = requests.get(url)
            except requests.exceptions.RequestException as exc:
                if time.time() - start_time >= total_timeout:
                    raise ConnectionError(
                        f"The vLLM server can't be reached at {self.host}:{self.server_port} "
                        f"after {total_timeout} seconds.") from exc
            else:
                if response.status_code == 200:
                    logger.info("Server is up!")
                    return
            time.sleep(retry_interval)

    def init_communicator(self):
        """Asks the server's world size N, tells the server to create the weight-update group
        of N + 1 ranks on group_port (its workers join as ranks 0..N-1), then joins it as rank
        N, the last, with a PyNcclCommunicator on it."""
        url = f"http://{self.host}:{self.server_port}/get_world_size/"
        response = requests.get(url)
        response.raise_for_status()
        vllm_world_size = response.json()["world_size"]
        world_size = vllm_world_size + 1
        self.rank = vllm_world_size  # the client is the last rank
        url = f"http://{self.host}:{self.server_port}/init_communicator/"
        response = self.session.post(url, json={"host": "0.0.0.0", "port": self.group_port,
                                                "world_size": world_size})
        response.raise_for_status()
        pg = StatelessProcessGroup.create(host=self.host, port=self.group_port, rank=self.rank,
                                          world_size=world_size)
        self.pynccl_comm = PyNcclCommunicator(pg, device=0)

    def update_named_param(self, name, weights):
        """Updates one parameter on the server: POST /update_named_param/ (name, dtype, shape;
        the workers start waiting for the weight), then broadcasts the weight from the client's
        rank and waits in the group's barrier."""
        dtype, shape = str(weights.dtype), tuple(weights.shape)
        url = f"http://{self.host}:{self.server_port}/update_named_param/"
        response = self.session.post(url, json={"name": name, "dtype": dtype, "shape": shape})
        response.raise_for_status()
        if self._simulate_before_broadcast is not None:
            self._simulate_before_broadcast()
        self.pynccl_comm.broadcast(weights, src=self.rank)
        self.pynccl_comm.group.barrier(timeout=self._barrier_timeout())

    def update_model_params(self, model):
        """update_named_param for every parameter of model."""
        for name, param in model.named_parameters():
            self.update_named_param(name, param.data)

    def reset_prefix_cache(self):
        """POST /reset_prefix_cache/: the server drops its cached prefixes (old weights')."""
        url = f"http://{self.host}:{self.server_port}/reset_prefix_cache/"
        self.session.post(url).raise_for_status()

    @staticmethod
    def _barrier_timeout():
        """The group barrier's timeout. Simulation: an hour (the real call keeps vLLM's 30 s
        default, after which the barrier raises; a test diagnoses the hang well before)."""
        return 3600.0

