"""Simulated vllm.v1.engine.coordinator: the data-parallel coordinator.

With data parallelism the front end starts one coordinator process (title
VLLM::DPCoordinator) next to the DP engine cores. It collects the engines' request counts,
publishes them to the API servers for load balancing and tells idle engines to start a wave
(START_DP_WAVE). It is no member of the engines' DP group and issues no collective: its loop
polls its sockets.
"""
import os
import select
import socket

from vllm.logger import init_logger

logger = init_logger(__name__)


class DPCoordinator:
    """The front end's handle of the coordinator process."""

    def __init__(self, parallel_config, host="0.0.0.0", port=0):
        """Starts the coordinator process (multiprocessing 'spawn', name VLLM_DP_Coordinator),
        its engine-facing socket on host:port."""
        import multiprocessing
        context = multiprocessing.get_context("spawn")
        self.proc = context.Process(target=DPCoordinatorProc.run_coordinator,
                                    name="VLLM_DP_Coordinator",
                                    kwargs=dict(engine_count=parallel_config.data_parallel_size,
                                                host=host, port=port),
                                    daemon=True)
        self.proc.start()


class DPCoordinatorProc:
    """The coordinator's loop: engine request counts in, stats and wave starts out."""

    def __init__(self, engine_count, min_stats_update_interval_ms=100):
        """Request counts per engine (waiting, running), and the stats publishing interval."""
        self.engines = [[0, 0] for _ in range(engine_count)]
        self.stats_update_interval_ms = min_stats_update_interval_ms
        self.current_wave = 0
        self.engines_running = False

    @staticmethod
    def run_coordinator(engine_count, host="0.0.0.0", port=0):
        """The process's entry point: titles it VLLM::DPCoordinator and runs
        process_input_socket."""
        import setproctitle
        setproctitle.setproctitle("VLLM::DPCoordinator")
        coordinator = DPCoordinatorProc(engine_count)
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen()
        os.write(1, f"coordinator pid {os.getpid()}\n".encode())
        coordinator.process_input_socket(listener)

    def process_input_socket(self, listener):
        """Polls the engines' socket with the stats interval as timeout; publishes the request
        counts when it expires. Simulation: a plain TCP listener stands for the ZMQ sockets;
        engines that connect send nothing."""
        peers = []
        while True:
            readable, _, _ = select.select([listener, *peers], [], [],
                                           self.stats_update_interval_ms / 1000)
            for sock in readable:
                if sock is listener:
                    peers.append(listener.accept()[0])
                elif not sock.recv(4096):
                    peers.remove(sock)
                    sock.close()
            if not readable:
                self._publish_stats()

    def _publish_stats(self):
        """Sends the engines' request counts to the front ends (here nobody listens)."""
        return list(self.engines)
