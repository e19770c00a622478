"""Simulated vllm.distributed.utils: process groups that live outside torch.distributed's
registry.

`StatelessProcessGroup` is vLLM's metadata group over a bare TCPStore (no torch world, no
`init_process_group`): every operation is a store key, so a waiting member waits in a store
`get` of a key that names its peer (`send_to/{dst}/{n}`, `broadcast_from/{src}/{n}`). RL
frameworks join a trainer to vLLM's workers with it (the weight-sync group).

`stateless_init_torch_distributed_process_group` builds a real torch ProcessGroup (gloo here)
on a PrefixStore over a TCPStore without touching torch's default group or its `_pg_map`: vLLM's
data-parallel engine cores all-reduce on such a group (ParallelConfig.stateless_init_dp_group).
"""
import dataclasses
import datetime
import pickle
import time
import uuid
from collections import deque

import torch
import torch.distributed


@dataclasses.dataclass
class StatelessProcessGroup:
    """A group of processes that exchange picklable objects through one TCPStore.

    The counters are the program order: `send_dst_counter[d]` objects sent to d so far,
    `recv_src_counter[s]` received from s, `broadcast_send_counter` broadcasts made by this
    rank, `broadcast_recv_src_counter[s]` broadcasts of s received. Keys this rank wrote are
    deleted after `data_expiration_seconds` (`entries`, oldest first)."""

    rank: int
    world_size: int
    store: torch._C._distributed_c10d.Store
    data_expiration_seconds: int = 3600
    send_dst_counter: dict = dataclasses.field(default_factory=dict)
    recv_src_counter: dict = dataclasses.field(default_factory=dict)
    broadcast_send_counter: int = 0
    broadcast_recv_src_counter: dict = dataclasses.field(default_factory=dict)
    entries: deque = dataclasses.field(default_factory=deque)

    def __post_init__(self):
        """Every peer's counters start at 0."""
        assert 0 <= self.rank < self.world_size
        for peer in range(self.world_size):
            self.send_dst_counter.setdefault(peer, 0)
            self.recv_src_counter.setdefault(peer, 0)
            self.broadcast_recv_src_counter.setdefault(peer, 0)

    def send_obj(self, obj, dst):
        """Sends obj to rank dst: sets `send_to/{dst}/{n}` (never blocks)."""
        self.expire_data()
        key = f"send_to/{dst}/{self.send_dst_counter[dst]}"
        self.store.set(key, pickle.dumps(obj))
        self.send_dst_counter[dst] += 1
        self.entries.append((key, time.time()))

    def expire_data(self):
        """Deletes this rank's keys older than data_expiration_seconds."""
        while self.entries:
            key, written = self.entries[0]
            if time.time() - written <= self.data_expiration_seconds:
                break
            self.store.delete_key(key)
            self.entries.popleft()

    def recv_obj(self, src):
        """Receives the next object rank src sent to this rank: waits in the store's get of
        `send_to/{self.rank}/{n}` until src sets it."""
        key = f"send_to/{self.rank}/{self.recv_src_counter[src]}"
        obj = pickle.loads(self.store.get(key))
        self.recv_src_counter[src] += 1
        return obj

    def broadcast_obj(self, obj, src):
        """Broadcasts obj from rank src: src sets `broadcast_from/{src}/{n}`; every other rank
        waits in the store's get of that key."""
        if self.rank == src:
            self.expire_data()
            key = f"broadcast_from/{src}/{self.broadcast_send_counter}"
            self.store.set(key, pickle.dumps(obj))
            self.broadcast_send_counter += 1
            self.entries.append((key, time.time()))
            return obj
        key = f"broadcast_from/{src}/{self.broadcast_recv_src_counter[src]}"
        received = pickle.loads(self.store.get(key))
        self.broadcast_recv_src_counter[src] += 1
        return received

    def all_gather_obj(self, obj):
        """Every rank's object, in rank order: one broadcast per rank."""
        gathered = []
        for src in range(self.world_size):
            if src == self.rank:
                self.broadcast_obj(obj, src=src)
                gathered.append(obj)
            else:
                gathered.append(self.broadcast_obj(None, src=src))
        return gathered

    def barrier(self, timeout=30.0):
        """Waits until every rank reached the barrier, in vLLM's phases: rank 0 broadcasts a
        fresh barrier id; each rank sets `arrival_{id}_{rank}` and waits for every other
        rank's arrival key (a store get, which blocks while the key is missing); then each
        sets `departure_{id}_{rank}` and rank 0 waits for every departure before it leaves.
        Raises RuntimeError after `timeout` seconds in one phase."""
        if self.rank == 0:
            barrier_id = f"barrier_{uuid.uuid4()}"
            self.broadcast_obj(barrier_id, src=0)
        else:
            barrier_id = self.broadcast_obj(None, src=0)
        self.store.set(f"arrival_{barrier_id}_{self.rank}", b"1")
        self._wait_for_ranks(f"arrival_{barrier_id}", timeout)
        self.store.set(f"departure_{barrier_id}_{self.rank}", b"1")
        if self.rank == 0:
            self._wait_for_ranks(f"departure_{barrier_id}", timeout)

    def _wait_for_ranks(self, prefix, timeout):
        """Waits for the keys `{prefix}_{r}` of every rank r: a get per missing key (a get
        that times out counts as not there yet)."""
        deadline = time.time() + timeout
        missing = [r for r in range(self.world_size) if r != self.rank]
        while missing:
            if time.time() > deadline:
                raise RuntimeError(f"StatelessProcessGroup barrier timed out after {timeout} s "
                                   f"waiting for ranks {missing}")
            try:
                self.store.get(f"{prefix}_{missing[0]}")
                missing.pop(0)
            except RuntimeError:
                time.sleep(0.01)

    @staticmethod
    def create(host, port, rank, world_size, data_expiration_seconds=3600, store_timeout=300):
        """A group of world_size ranks on the TCPStore at host:port, which rank 0 hosts
        (is_master) and every other rank connects to."""
        store = torch.distributed.TCPStore(
            host_name=host, port=port, world_size=world_size, is_master=(rank == 0),
            timeout=datetime.timedelta(seconds=store_timeout))
        return StatelessProcessGroup(rank=rank, world_size=world_size, store=store,
                                     data_expiration_seconds=data_expiration_seconds)


def stateless_init_torch_distributed_process_group(host, port, rank, world_size, backend):
    """A torch ProcessGroup of world_size ranks that torch.distributed does not know: its store
    is `PrefixStore("tcp://{host}:{port}", TCPStore)` from torch.distributed.rendezvous, and the
    group is neither the default group nor in `_pg_map` or `_world`, so every collective on it
    needs it as the `group` argument. Simulation: torch 1.13 has no backend wrapper around the
    ProcessGroup (newer torch: ProcessGroup(prefix_store, rank, world_size) with a gloo backend
    registered), so the gloo ProcessGroup itself is returned; only backend "gloo"."""
    init_method = f"tcp://{host}:{port}"
    backend = torch.distributed.Backend(backend)
    if backend != torch.distributed.Backend.GLOO:
        raise RuntimeError(f"simulated vLLM: backend {backend} not available, only gloo")
    timeout = datetime.timedelta(seconds=1800)
    store, rank, world_size = next(torch.distributed.rendezvous(
        init_method, rank, world_size, timeout=timeout))
    store.set_timeout(timeout)
    prefix_store = torch.distributed.PrefixStore(init_method, store)
    return torch.distributed.ProcessGroupGloo(prefix_store, rank, world_size, timeout)
