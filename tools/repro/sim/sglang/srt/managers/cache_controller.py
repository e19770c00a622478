"""Simulated sglang.srt.managers.cache_controller: the hierarchical cache's (HiCache,
--enable-hierarchical-cache) layer-by-layer loading of KV pages from host memory. The forward
waits, layer by layer, until that layer's load finished (LayerDoneCounter.wait_until).

Simulation: a layer's load is a threading.Event where SGLang records a CUDA event after the
layer's host-to-device copy and synchronizes on it; start_loading completes the loads at once,
except those from HiCacheController._simulate_stall_from_layer on (a copy that never finishes).
"""
import threading


class LayerLoadingEvent:
    """The load events of one loading operation, one per layer."""

    def __init__(self, num_layers):
        self.load_events = [threading.Event() for _ in range(num_layers)]
        self._simulate_on_wait = None  # simulation only: called once when a wait would block

    def complete(self, layer_index):
        """The layer's copy finished."""
        self.load_events[layer_index].set()

    def wait(self, layer_index):
        """Waits for the layer's copy (SGLang: torch.cuda.Event.synchronize)."""
        event = self.load_events[layer_index]
        if not event.is_set() and self._simulate_on_wait is not None:
            self._simulate_on_wait()
            self._simulate_on_wait = None
        event.wait()


class LayerDoneCounter:
    """The loading operations in flight (a ring of three), the forward's consumer index."""

    def __init__(self, num_layers):
        self.num_layers = num_layers
        self.events = [LayerLoadingEvent(num_layers) for _ in range(3)]
        self.producer_index = -1
        self.consumer_index = -1

    def update_producer(self):
        """The next loading operation's slot."""
        self.producer_index = (self.producer_index + 1) % len(self.events)
        self.events[self.producer_index] = LayerLoadingEvent(self.num_layers)
        return self.producer_index

    def set_consumer(self, index):
        """The forward consumes the loads of operation `index`."""
        self.consumer_index = index

    def wait_until(self, threshold):
        """Waits until layer `threshold` of the consumed operation is loaded."""
        if self.consumer_index < 0:
            return
        self.events[self.consumer_index].wait(threshold)


class HiCacheController:
    """Moves KV pages between host and device memory for the hierarchical radix cache."""

    def __init__(self, mem_pool_device):
        self.mem_pool_device = mem_pool_device
        self.layer_done_counter = LayerDoneCounter(mem_pool_device.layer_num)
        mem_pool_device.register_layer_transfer_counter(self.layer_done_counter)
        self._simulate_stall_from_layer = None
        self._simulate_on_stall = None  # simulation only: called when the forward waits

    def start_loading(self):
        """Starts the batch's host-to-device loads, layer by layer; returns the operation's
        index for the forward to consume."""
        producer_id = self.layer_done_counter.update_producer()
        operation = self.layer_done_counter.events[producer_id]
        operation._simulate_on_wait = self._simulate_on_stall
        for layer in range(self.layer_done_counter.num_layers):
            if self._simulate_stall_from_layer is not None and \
                    layer >= self._simulate_stall_from_layer:
                break
            operation.complete(layer)
        return producer_id
