"""Simulated vllm.v1.worker.gpu_worker: the worker around a GPUModelRunner."""
from vllm.distributed.parallel_state import (ensure_model_parallel_initialized, get_pp_group,
                                             get_tp_group, init_distributed_environment,
                                             set_custom_all_reduce)
from vllm.logger import init_logger

logger = init_logger(__name__)


def _pp_group_or_none():
    """The PP GroupCoordinator, None before initialize_model_parallel (simulation: some
    scenarios build no model-parallel groups)."""
    from vllm.distributed import parallel_state
    return parallel_state._PP


class Worker:
    """A GPU worker: one rank of the engine's model (its device, its GPUModelRunner)."""

    def __init__(self, model_runner=None, rank=0, local_rank=0, compile_sizes=(),
                 parallel_config=None, distributed_init_method="env://"):
        """A worker for this rank with its model runner (the real one builds it from the vLLM
        config in init_device; here given, or built by init_device); compile_sizes: the batch
        sizes compiled ahead of serving; rank: the global rank (across DP, a simulation
        shortcut: vLLM's init_distributed_environment adds dp_rank * world_size)."""
        self.model_runner = model_runner
        self.rank = rank
        self.local_rank = local_rank
        self.compile_sizes = list(compile_sizes)
        self.parallel_config = parallel_config
        self.distributed_init_method = distributed_init_method

    def init_device(self, backend="gloo"):
        """Sets the rank's device up (here none), initialises torch.distributed and the
        model-parallel groups (init_worker_distributed_environment), then builds the model
        runner for this rank's TP shard."""
        init_worker_distributed_environment(self.parallel_config, self.rank,
                                            self.distributed_init_method, self.local_rank,
                                            backend)
        if self.model_runner is None:
            from vllm.v1.worker.gpu_model_runner import GPUModelRunner
            self.model_runner = GPUModelRunner(
                tp_size=self.parallel_config.tensor_parallel_size,
                tp_rank=get_tp_group().rank_in_group, parallel_config=self.parallel_config)

    def compile_or_warm_up_model(self):
        """Warms the model up before serving: one _dummy_run per compile size (largest first;
        the first forward of the torch.compile'd model compiles it or loads it from vLLM's
        compile cache), the kernel warm-up, CUDA-graph capture, the sampler's warm-up."""
        for size in sorted(self.compile_sizes, reverse=True):
            logger.info("Compile and warming up model for size %d", size)
            self.model_runner._dummy_run(size, skip_eplb=True)

    def execute_dummy_batch(self):
        """Runs a one-token dummy batch (a DP rank with no requests while its peers step)."""
        self.model_runner._dummy_run(1, uniform_decode=True)

    def execute_model(self, scheduler_output):
        """Runs one step of the model for the scheduler's batch. With pipeline parallelism a
        stage after the first receives the previous stage's intermediate tensors first
        (recv_tensor_dict on the PP group) and a stage before the last sends its own to the
        next stage (send_tensor_dict) instead of returning an output."""
        pp_group = _pp_group_or_none()
        pipelined = pp_group is not None and pp_group.world_size > 1
        intermediate_tensors = None
        forward_pass = scheduler_output.total_num_scheduled_tokens > 0
        if pipelined and forward_pass and not pp_group.is_first_rank:
            intermediate_tensors = pp_group.recv_tensor_dict(all_gather_group=get_tp_group())
        output = self.model_runner.execute_model(scheduler_output, intermediate_tensors)
        if not pipelined or pp_group.is_last_rank:
            return output
        pp_group.send_tensor_dict(output, all_gather_group=get_tp_group())
        return None


def init_worker_distributed_environment(parallel_config, rank, distributed_init_method=None,
                                        local_rank=-1, backend="nccl"):
    """Initializes the distributed environment: the custom all-reduce switch, torch.distributed
    and the world group (init_distributed_environment), then the model-parallel groups
    (ensure_model_parallel_initialized). Simulation: the world spans every DP replica and rank
    is already global (the real init_distributed_environment derives both from the DP rank)."""
    set_custom_all_reduce(not parallel_config.disable_custom_all_reduce)
    init_distributed_environment(parallel_config.world_size_across_dp, rank,
                                 distributed_init_method, local_rank, backend)
    ensure_model_parallel_initialized(parallel_config.tensor_parallel_size,
                                      parallel_config.pipeline_parallel_size, backend,
                                      data_parallel_size=parallel_config.data_parallel_size)
