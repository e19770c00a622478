"""Simulated vllm.distributed.device_communicators.shm_broadcast: the shared-memory message queue."""
import os

import torch.distributed as dist

from vllm.distributed.parallel_state import in_the_same_node_as
from vllm.logger import init_logger

logger = init_logger(__name__)

# How often a writer or reader waiting for a ring-buffer block logs (seconds).
VLLM_RINGBUFFER_WARNING_INTERVAL = int(os.environ.get("VLLM_RINGBUFFER_WARNING_INTERVAL", "60"))


def _simulate_ring_buffer_wait_warning():
    """Simulation only: the warning MessageQueue.acquire_write / acquire_read log every
    VLLM_RINGBUFFER_WARNING_INTERVAL seconds while no ring-buffer block becomes ready (the
    other side is hung or busy), logged once here."""
    logger.warning("No available shared memory broadcast block found in %d seconds. This "
                   "typically happens when some processes are hanging or doing some "
                   "time-consuming work (e.g. compilation, weight/kv cache quantization).",
                   VLLM_RINGBUFFER_WARNING_INTERVAL)


class MessageQueue:
    """A ring buffer in shared memory (readers on the writer's node) plus a socket for the rest."""

    def __init__(self, n_reader, n_local_reader, max_chunk_bytes, max_chunks):
        """Creates the writer's ring buffer (the simulation keeps only the sizes)."""
        self.n_reader = n_reader
        self.n_local_reader = n_local_reader
        self.max_chunk_bytes = max_chunk_bytes
        self.max_chunks = max_chunks

    @staticmethod
    def create_from_process_group(pg, max_chunk_bytes, max_chunks, writer_rank=0):
        """Builds the queue for a group: finds which ranks share the writer's node
        (in_the_same_node_as), then the writer creates the queue and broadcasts its handle."""
        group_rank = dist.get_rank(group=pg)
        group_world_size = dist.get_world_size(group=pg)
        status = in_the_same_node_as(pg, source_rank=writer_rank)
        n_local_reader = sum(status) - 1
        queue = MessageQueue(group_world_size - 1, n_local_reader, max_chunk_bytes, max_chunks)
        queue.is_writer = group_rank == writer_rank
        return queue
