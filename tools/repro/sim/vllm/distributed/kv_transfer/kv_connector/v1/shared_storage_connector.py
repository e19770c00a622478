"""Simulated vllm.distributed.kv_transfer.kv_connector.v1.shared_storage_connector: a KV
connector that saves each request's KV cache to shared storage (a directory) and loads it back
in another instance."""
import threading


class SharedStorageConnector:
    """The worker side of the shared-storage KV connector: saves the layers' KV cache while the
    forward runs, and waits for the saves to finish before the step's output leaves the
    worker."""

    def __init__(self, rank):
        """The connector of one worker (the real one takes the vLLM config and its role)."""
        self.rank = rank
        self._save_done = threading.Event()
        self._simulate_on_stall = None

    def wait_for_save(self):
        """Blocks until every layer's KV cache of this step is on the shared storage.
        Simulation: the storage never acknowledges the write (a hung NFS mount), so the wait
        never ends."""
        if self._simulate_on_stall is not None:
            self._simulate_on_stall()
        self._save_done.wait()
