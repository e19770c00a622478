"""Simulated vllm.v1.engine.core: the engine core and its busy loop (process title
VLLM::EngineCore; data parallel: one engine per DP rank, VLLM::EngineCore_DP<d>, the DP engines
joined by a stateless DP group outside torch.distributed's registry; they run "waves" together,
idle ones stepping dummy batches)."""
import os
import queue
import threading

from vllm.logger import init_logger
from vllm.v1.engine import EngineCoreRequestType

logger = init_logger(__name__)


class EngineCore:
    """The inner loop of vLLM's engine: the scheduler and the model executor."""

    def __init__(self, model_executor, scheduler):
        """The engine with its executor (here its one in-process worker, or the Ray executor
        of a compiled graph) and scheduler."""
        self.model_executor = model_executor
        self.scheduler = scheduler
        self.batch_queue = None

    def add_request(self, request, request_wave=0):
        """Adds a request to the scheduler (here a request id)."""
        self.scheduler.add_request(request)

    def step(self):
        """Schedules, executes and makes the outputs; (outputs, whether the model ran). With the
        Ray executor, execute_model waits for the compiled graph's output."""
        if not self.scheduler.has_requests():
            return {}, False
        scheduler_output = self.scheduler.schedule()
        model_output = self.model_executor.execute_model(scheduler_output)
        engine_core_outputs = self.scheduler.update_from_output(scheduler_output, model_output)
        return engine_core_outputs, scheduler_output.total_num_scheduled_tokens > 0

    def execute_dummy_batch(self):
        """Runs a dummy batch on every worker (the executor's collective_rpc of
        execute_dummy_batch; here the engine's one worker directly)."""
        self.model_executor.execute_dummy_batch()


class EngineCoreProc(EngineCore):
    """The engine core in its own process: requests come in on a ZMQ socket (an input thread
    puts them on input_queue), outputs go out through output_queue."""

    def __init__(self, model_executor, scheduler, engine_index=0):
        """The engine with its input and output queues (the real one also starts the socket
        threads and the handshake with the front end)."""
        super().__init__(model_executor, scheduler)
        self.engine_index = engine_index
        self.input_queue = queue.Queue()
        self.output_queue = queue.Queue()
        self.engines_running = False
        self.step_fn = self.step

    @staticmethod
    def run_engine_core(vllm_config, input_address, output_address, dp_rank=0, local_dp_rank=0):
        """The engine core process's entry point (a multiprocessing target started by the
        front end's client): titles the process VLLM::EngineCore, builds the engine (its
        MultiprocExecutor starts the workers), starts the socket threads, runs the busy loop.
        It connects to the client's ipc:// input and output endpoints first (vLLM's startup
        handshake). Simulation: the ZMQ sockets are unix stream sockets at those paths
        (vllm.utils.make_zmq_socket), vllm_config a dict (the parallel config and the
        scenario's stall)."""
        import setproctitle
        from vllm.utils import make_zmq_socket
        setproctitle.setproctitle("VLLM::EngineCore")
        input_conn = make_zmq_socket(input_address, bind=False)
        output_conn = make_zmq_socket(output_address, bind=False)
        from vllm.v1.core.sched.scheduler import Scheduler
        from vllm.v1.executor.multiproc_executor import MultiprocExecutor
        executor = MultiprocExecutor(vllm_config)
        engine_core = EngineCoreProc(executor, Scheduler(), engine_index=dp_rank)
        engine_core.start_socket_threads(input_conn, output_conn)
        print(f"engine core pid {os.getpid()} ready", flush=True)
        engine_core.run_busy_loop()

    def start_socket_threads(self, input_conn, output_conn):
        """The threads that move requests from the input socket to input_queue and outputs from
        output_queue to the output socket, so that the busy loop never blocks on a socket."""
        threading.Thread(target=self.process_input_sockets, args=(input_conn,), daemon=True,
                         name="EngineCoreInputSocket").start()
        threading.Thread(target=self.process_output_sockets, args=(output_conn,), daemon=True,
                         name="EngineCoreOutputSocket").start()

    def process_input_sockets(self, input_conn):
        """Input socket IO thread: each message (request type, request) onto input_queue."""
        while True:
            request_type, request = input_conn.recv()
            self.input_queue.put_nowait((request_type, request))

    def process_output_sockets(self, output_conn):
        """Output socket IO thread: each (client index, EngineCoreOutputs) off output_queue to
        the client."""
        while True:
            client_index, outputs = self.output_queue.get()
            output_conn.send(outputs)

    def run_busy_loop(self):
        """The engine core's busy loop: handle the input queue (blocks while idle), step,
        forever (DPEngineCoreProc has its own)."""
        while True:
            self._process_input_queue()
            self._process_engine_step()

    def _process_input_queue(self):
        """Handles the client requests; blocks on input_queue while the engine has nothing to
        do (no engines running, no requests, no batch in flight)."""
        waited = False
        while (not self.engines_running and not self.scheduler.has_requests()
               and not self.batch_queue):
            if self.input_queue.empty():
                logger.debug("EngineCore waiting for work.")
                waited = True
            req = self.input_queue.get()
            self._handle_client_request(*req)
        if waited:
            logger.debug("EngineCore loop active.")
        while not self.input_queue.empty():
            req = self.input_queue.get_nowait()
            self._handle_client_request(*req)

    def _process_engine_step(self):
        """Steps the engine core and puts the outputs on output_queue; whether the model ran."""
        outputs, model_executed = self.step_fn()
        for output in outputs.items() if outputs else ():
            self.output_queue.put_nowait(output)
        return model_executed

    def _handle_client_request(self, request_type, request):
        """Dispatches one client request (add, abort, utility call)."""
        if request_type == EngineCoreRequestType.ADD:
            self.add_request(request)
        elif request_type == EngineCoreRequestType.ABORT:
            self.scheduler.waiting = [r for r in self.scheduler.waiting if r not in request]


class DPEngineCoreProc(EngineCoreProc):
    """The engine core of one data-parallel rank (title VLLM::EngineCore_DP<d>; no torch world
    of its own, no RANK in its environment). The DP engines step in lockstep while a wave of
    requests runs anywhere: an engine without requests steps dummy batches so that its peers'
    collectives (the DP batch coordination, MoE all-to-all) complete, and every 32 steps the
    engines agree on whether the wave goes on with an all-reduce on their stateless DP group
    (ParallelConfig.has_unfinished_dp), which torch.distributed's registry does not hold."""

    def __init__(self, model_executor, scheduler, parallel_config):
        """The engine of DP rank parallel_config.data_parallel_rank: joins the engines' DP
        group first (_init_data_parallel), then sets up as EngineCoreProc."""
        self._init_data_parallel(parallel_config)
        super().__init__(model_executor, scheduler, engine_index=self.dp_rank)
        self.current_wave = 0
        self.step_counter = 0
        # Simulation only: the steps between two DP all-reduces (vLLM: 32, fixed), and a
        # callback before each wait on other engines ("dp_sync": the DP all-reduce,
        # "dummy_batch": a dummy batch, whose DP batch coordination waits for every engine).
        self._simulate_finish_sync_interval = 32
        self._simulate_before_wait = None

    def _init_data_parallel(self, parallel_config):
        """The DP rank and size, and the DP group: parallel_config.stateless_init_dp_group()
        (a gloo group on a TCPStore at the DP master address, one port per group)."""
        self.dp_rank = parallel_config.data_parallel_rank
        self.dp_size = parallel_config.data_parallel_size
        self.dp_group = parallel_config.stateless_init_dp_group()
        logger.debug("DP rank %d of %d joined the stateless DP group", self.dp_rank,
                     self.dp_size)

    @staticmethod
    def run_engine_core(vllm_config, dp_rank=0, requests=(), start_wave=None):
        """The DP engine core process's entry point: titles the process
        VLLM::EngineCore_DP<dp_rank>, starts the executor (its workers), joins the DP group and
        runs the busy loop. Simulation: no sockets to the front end and the DP coordinator; the
        front end's requests (plain ids) and the coordinator's START_DP_WAVE (start_wave: the
        wave number) are put on the input queue directly."""
        import setproctitle
        from vllm.v1.core.sched.scheduler import Scheduler
        from vllm.v1.executor.multiproc_executor import MultiprocExecutor
        from vllm.v1.engine import EngineCoreRequestType
        setproctitle.setproctitle(f"VLLM::EngineCore_DP{dp_rank}")
        executor = MultiprocExecutor(vllm_config)
        engine_core = DPEngineCoreProc(executor, Scheduler(), vllm_config["parallel_config"])
        for request in requests:
            engine_core.input_queue.put_nowait((EngineCoreRequestType.ADD, request))
        if start_wave is not None:
            engine_core.input_queue.put_nowait((EngineCoreRequestType.START_DP_WAVE,
                                                (start_wave, -1)))
        return engine_core

    def _handle_client_request(self, request_type, request):
        """START_DP_WAVE (from the DP coordinator: a wave started on another engine) makes an
        idle engine join the wave; everything else as EngineCoreProc."""
        if request_type == EngineCoreRequestType.START_DP_WAVE:
            new_wave, exclude_eng_index = request
            if exclude_eng_index != self.engine_index and new_wave >= self.current_wave:
                self.current_wave = new_wave
                if not self.engines_running:
                    logger.debug("EngineCore starting idle loop for wave %d.", new_wave)
                    self.engines_running = True
        else:
            super()._handle_client_request(request_type, request)

    def _has_global_unfinished_reqs(self, local_unfinished):
        """Whether any DP engine has unfinished requests: only every 32nd step an all-reduce
        on the DP group (ParallelConfig.has_unfinished_dp); in between the wave goes on."""
        from vllm.config import ParallelConfig
        self.step_counter += 1
        if self.step_counter % self._simulate_finish_sync_interval != 0:
            return True
        if self._simulate_before_wait is not None:
            self._simulate_before_wait("dp_sync")
        return ParallelConfig.has_unfinished_dp(self.dp_group, local_unfinished)

    def run_busy_loop(self):
        """The busy loop of a DP engine core: handle the input queue (blocks while idle), step;
        an engine in a running wave without requests of its own runs a dummy batch; every
        engine agrees on the end of the wave (_has_global_unfinished_reqs), then the next wave."""
        while True:
            self._process_input_queue()
            executed = self._process_engine_step()
            local_unfinished_reqs = self.scheduler.has_unfinished_requests()
            if not executed:
                if not local_unfinished_reqs and not self.engines_running:
                    continue
                if self._simulate_before_wait is not None:
                    self._simulate_before_wait("dummy_batch")
                self.execute_dummy_batch()
            self.engines_running = self._has_global_unfinished_reqs(local_unfinished_reqs)
            if not self.engines_running:
                logger.debug("Wave %d finished, pausing engine loop.", self.current_wave)
                self.current_wave += 1
                self.step_counter = 0
