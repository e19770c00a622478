"""Simulated vllm.distributed.device_communicators.shm_broadcast: the shared-memory message queue.

ShmRingBuffer is vLLM's ring buffer, with its exact layout, in a real
multiprocessing.shared_memory segment (/dev/shm/psm_<random>); MessageQueue writes and reads it
with vLLM's flag protocol. The simulation has no ZMQ sockets: no remote readers, no overflow of
an object larger than a block.
"""
import atexit
import os
import pickle
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing import shared_memory
from typing import List, Optional, Tuple
from unittest.mock import patch

import torch
import torch.distributed as dist

from vllm.distributed.parallel_state import in_the_same_node_as
from vllm.logger import init_logger

logger = init_logger(__name__)

# How often a writer or reader waiting for a ring-buffer block logs (seconds).
VLLM_RINGBUFFER_WARNING_INTERVAL = int(os.environ.get("VLLM_RINGBUFFER_WARNING_INTERVAL", "60"))

# We prefer os.sched_yield (tighter polling loops); before Python 3.11.1 / 3.10.8 it does not
# release the GIL, so vLLM falls back to time.sleep(0) there.
USE_SCHED_YIELD = ((sys.version_info[:3] >= (3, 11, 1))
                   or (sys.version_info[:2] == (3, 10) and sys.version_info[2] >= 8))


def sched_yield():
    """Gives the processor to another thread: os.sched_yield, or time.sleep(0)."""
    if USE_SCHED_YIELD:
        os.sched_yield()
    else:
        time.sleep(0)


def _simulate_ring_buffer_wait_warning():
    """Simulation only: the warning MessageQueue.acquire_write / acquire_read log every
    VLLM_RINGBUFFER_WARNING_INTERVAL seconds while no ring-buffer block becomes ready (the
    other side is hung or busy), logged once here."""
    logger.warning("No available shared memory broadcast block found in %d seconds. This "
                   "typically happens when some processes are hanging or doing some "
                   "time-consuming work (e.g. compilation, weight/kv cache quantization).",
                   VLLM_RINGBUFFER_WARNING_INTERVAL)


class SpinTimer:
    """A reader's polling: busy (sched_yield) until busy_loop_s seconds passed without a block
    read, then time.sleep(wait_sleep_s) between checks (less power when vLLM idles)."""

    def __init__(self, busy_loop_s=10.0, wait_sleep_s=0.1):
        self.last_activity = time.monotonic()
        self.busy_loop_s = busy_loop_s
        self.wait_sleep_s = wait_sleep_s

    def record_activity(self):
        """A block was read: spin busily again."""
        self.last_activity = time.monotonic()

    def spin(self):
        """One pause between two checks of the block."""
        if time.monotonic() >= self.last_activity + self.busy_loop_s:
            time.sleep(self.wait_sleep_s)
        else:
            sched_yield()


class ShmRingBuffer:
    """vLLM's shared-memory ring buffer: one writer, n_reader readers on the writer's node.

    Layout (one SharedMemory segment of (max_chunk_bytes + 1 + n_reader) * max_chunks bytes):
    max_chunks data chunks of max_chunk_bytes (chunk i at i * max_chunk_bytes), then max_chunks
    metadata records of 1 + n_reader bytes (record i at max_chunks * max_chunk_bytes +
    i * (1 + n_reader)): byte 0 the written flag, byte 1 + j reader j's read flag. A block can
    be written when not written (0???) or read by every reader (1111), read by reader j when
    written and not read by j.
    """

    def __init__(self, n_reader, max_chunk_bytes, max_chunks, name=None):
        """name None: creates the segment (the writer) and zero-fills the metadata; else opens
        the writer's segment by name (a reader on the same node) and keeps it mapped."""
        self.n_reader = n_reader
        self.metadata_size = 1 + n_reader
        self.max_chunk_bytes = max_chunk_bytes
        self.max_chunks = max_chunks
        self.total_bytes_of_buffer = (self.max_chunk_bytes + self.metadata_size) * self.max_chunks
        self.data_offset = 0
        self.metadata_offset = self.max_chunk_bytes * self.max_chunks
        self._released = False

        if name is None:
            # we are creating a buffer
            self.is_creator = True
            # Simulation: no resource tracker process next to the writer (vLLM's creator
            # registers the segment with it); the writer removes the segment itself when it
            # exits, the launcher when the ranks were killed.
            with patch("multiprocessing.resource_tracker.register",
                       lambda *args, **kwargs: None):
                self.shared_memory = shared_memory.SharedMemory(
                    create=True, size=self.total_bytes_of_buffer)
            # initialize the metadata section to 0
            with self.shared_memory.buf[self.metadata_offset:] as metadata_buffer:
                torch.frombuffer(metadata_buffer, dtype=torch.uint8).fill_(0)
            # Simulation: __del__ may not run at interpreter exit; a normal exit still unlinks.
            atexit.register(self._release)
        else:
            # we are opening an existing buffer
            self.is_creator = False
            # Python tracks a segment it did not create as if it did; vLLM patches it out.
            with patch("multiprocessing.resource_tracker.register",
                       lambda *args, **kwargs: None):
                try:
                    self.shared_memory = shared_memory.SharedMemory(name=name)
                    assert self.shared_memory.size >= self.total_bytes_of_buffer
                except FileNotFoundError:
                    # deserialized on another node: this object is not used
                    pass

    def handle(self):
        """What a reader needs to open the segment: (n_reader, max_chunk_bytes, max_chunks,
        name)."""
        return (self.n_reader, self.max_chunk_bytes, self.max_chunks, self.shared_memory.name)

    def __reduce__(self):
        return (self.__class__, self.handle())

    def _release(self):
        """Unmaps the segment; the creator also removes it from /dev/shm (once)."""
        if self._released or not hasattr(self, "shared_memory"):
            return
        self._released = True
        try:
            self.shared_memory.close()
        except BufferError:
            pass  # a block still borrowed (the process is exiting in the middle of a wait)
        if self.is_creator:
            with patch("multiprocessing.resource_tracker.unregister",
                       lambda *args, **kwargs: None):
                try:
                    self.shared_memory.unlink()
                except FileNotFoundError:
                    pass

    def __del__(self):
        self._release()

    @contextmanager
    def get_data(self, current_idx):
        """The data chunk of block current_idx (a memoryview, released on exit)."""
        start = self.data_offset + current_idx * self.max_chunk_bytes
        end = start + self.max_chunk_bytes
        with self.shared_memory.buf[start:end] as buf:
            yield buf

    @contextmanager
    def get_metadata(self, current_idx):
        """The metadata record of block current_idx: written flag, then the readers' flags."""
        start = self.metadata_offset + current_idx * self.metadata_size
        end = start + self.metadata_size
        with self.shared_memory.buf[start:end] as buf:
            yield buf


@dataclass
class Handle:
    """What the writer hands its readers: the ring's handle and which ranks read it."""

    local_reader_ranks: List[int] = field(default_factory=list)

    buffer_handle: Optional[Tuple[int, int, int, str]] = None
    local_subscribe_addr: Optional[str] = None
    remote_subscribe_addr: Optional[str] = None
    remote_addr_ipv6: bool = False


class MessageQueue:
    """A ring buffer in shared memory (readers on the writer's node) plus a socket for the rest
    (not simulated)."""

    def __init__(self, n_reader, n_local_reader, local_reader_ranks=None,
                 max_chunk_bytes=1024 * 1024 * 10, max_chunks=10, connect_ip=None):
        """The writer's side: creates the ring buffer for the local readers."""
        if local_reader_ranks is None:
            local_reader_ranks = list(range(n_local_reader))
        else:
            assert len(local_reader_ranks) == n_local_reader
        self.n_reader = n_reader
        self.n_local_reader = n_local_reader
        self.n_remote_reader = n_reader - n_local_reader
        assert self.n_remote_reader == 0, "simulation: no remote readers (no sockets)"
        self.max_chunk_bytes = max_chunk_bytes
        self.max_chunks = max_chunks
        if n_local_reader > 0:
            self.buffer = ShmRingBuffer(n_local_reader, max_chunk_bytes, max_chunks)
            self.current_idx = 0
        else:
            self.buffer = None
            self.current_idx = -1
        self._is_writer = True
        self._is_local_reader = False
        self.local_reader_rank = -1
        self._is_remote_reader = False
        self._read_spin_timer = None
        self._simulate_on_wait = None
        self.handle = Handle(local_reader_ranks=local_reader_ranks,
                             buffer_handle=self.buffer.handle() if self.buffer else None)
        logger.info("vLLM message queue communication handle: %s", self.handle)

    def export_handle(self):
        """The handle the readers open the queue with (create_from_handle)."""
        return self.handle

    @staticmethod
    def create_from_handle(handle, rank):
        """A reader's side: opens the writer's ring buffer by name (rank must be one of the
        handle's local_reader_ranks; its index there is its reader number)."""
        self = MessageQueue.__new__(MessageQueue)
        self.handle = handle
        self._is_writer = False
        assert rank in handle.local_reader_ranks, "simulation: no remote readers (no sockets)"
        assert handle.buffer_handle is not None
        self.buffer = ShmRingBuffer(*handle.buffer_handle)
        self.current_idx = 0
        self.local_reader_rank = handle.local_reader_ranks.index(rank)
        self._is_local_reader = True
        self._is_remote_reader = False
        self._read_spin_timer = SpinTimer()
        self._simulate_on_wait = None
        return self

    def _simulate_waiting(self):
        """Simulation only: a scenario's callback (_simulate_on_wait), called once when
        acquire_write / acquire_read first finds its block not ready."""
        if self._simulate_on_wait is not None:
            callback, self._simulate_on_wait = self._simulate_on_wait, None
            callback()

    @contextmanager
    def acquire_write(self, timeout=None):
        """The writer's next block (current_idx), once it is not written or read by every
        reader; yields its data chunk, then resets the read flags and sets the written flag."""
        assert self._is_writer, "Only writers can acquire write"
        start_time = time.monotonic()
        waiting = False
        while True:
            with self.buffer.get_metadata(self.current_idx) as metadata_buffer:
                read_count = sum(metadata_buffer[1:])
                written_flag = metadata_buffer[0]
                if written_flag and read_count != self.buffer.n_reader:
                    # this block is written and not read by all readers: wait
                    if not waiting:
                        waiting = True
                        self._simulate_waiting()
                    sched_yield()
                    if timeout is not None and time.monotonic() - start_time > timeout:
                        raise TimeoutError
                    continue
                # found a block that is either (1) not written or (2) read by all readers
                metadata_buffer[0] = 0
                with self.buffer.get_data(self.current_idx) as buf:
                    yield buf
                # first the read flags to 0, then the written flag to 1 (readers must never
                # see a written block with stale read flags)
                for i in range(1, self.buffer.n_reader + 1):
                    metadata_buffer[i] = 0
                metadata_buffer[0] = 1
                self.current_idx = (self.current_idx + 1) % self.buffer.max_chunks
                break

    @contextmanager
    def acquire_read(self, timeout=None):
        """This reader's next block (current_idx), once it is written and not read by this
        reader; yields its data chunk, then sets this reader's flag."""
        assert self._is_local_reader, "Only readers can acquire read"
        start_time = time.monotonic()
        waiting = False
        while True:
            with self.buffer.get_metadata(self.current_idx) as metadata_buffer:
                read_flag = metadata_buffer[self.local_reader_rank + 1]
                written_flag = metadata_buffer[0]
                if not written_flag or read_flag:
                    # this block is either (1) not written or (2) already read by this reader
                    if not waiting:
                        waiting = True
                        self._simulate_waiting()
                    self._read_spin_timer.spin()
                    if timeout is not None and time.monotonic() - start_time > timeout:
                        raise TimeoutError
                    continue
                with self.buffer.get_data(self.current_idx) as buf:
                    yield buf
                metadata_buffer[self.local_reader_rank + 1] = 1
                self.current_idx = (self.current_idx + 1) % self.buffer.max_chunks
                self._read_spin_timer.record_activity()
                break

    def enqueue(self, obj, timeout=None):
        """Writes an object to the queue: pickled into the next block (first byte 0: inline)."""
        assert self._is_writer, "Only writers can enqueue"
        serialized_obj = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        if self.n_local_reader > 0:
            if len(serialized_obj) >= self.buffer.max_chunk_bytes:
                raise ValueError("simulation: no overflow socket for an object of "
                                 f"{len(serialized_obj)} bytes")
            with self.acquire_write(timeout) as buf:
                buf[0] = 0  # not overflow
                buf[1:len(serialized_obj) + 1] = serialized_obj

    def dequeue(self, timeout=None):
        """Reads the next object from the queue."""
        if not self._is_local_reader:
            raise RuntimeError("Only readers can dequeue")
        with self.acquire_read(timeout) as buf:
            overflow = buf[0] == 1
            assert not overflow, "simulation: no overflow socket"
            # the pickle carries its own length
            obj = pickle.loads(buf[1:])
        return obj

    def broadcast_object(self, obj=None):
        """The writer enqueues obj, a reader dequeues it."""
        if self._is_writer:
            self.enqueue(obj)
            return obj
        return self.dequeue()

    @staticmethod
    def create_from_process_group(pg, max_chunk_bytes, max_chunks, writer_rank=0):
        """Builds the queue for a group: finds which ranks share the writer's node
        (in_the_same_node_as), then the writer creates the queue and broadcasts its handle.
        Simulation: only the in_the_same_node_as probe; the queue keeps only the sizes (no ring
        buffer, no handle broadcast: no scenario sends through a group's queue)."""
        group_rank = dist.get_rank(group=pg)
        group_world_size = dist.get_world_size(group=pg)
        status = in_the_same_node_as(pg, source_rank=writer_rank)
        n_local_reader = sum(status) - 1
        queue = MessageQueue.__new__(MessageQueue)
        queue.n_reader = group_world_size - 1
        queue.n_local_reader = n_local_reader
        queue.max_chunk_bytes = max_chunk_bytes
        queue.max_chunks = max_chunks
        queue.buffer = None
        queue.is_writer = group_rank == writer_rank
        return queue
