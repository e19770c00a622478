"""Simulated vllm.config.parallel: the parallel layout of one engine."""
import dataclasses


@dataclasses.dataclass
class ParallelConfig:
    """Tensor / pipeline / data parallel sizes and this worker's ranks (the real one also holds
    the executor backend, expert parallelism, DP addresses, ...)."""

    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    data_parallel_rank: int = 0
    # This worker's rank inside its DP replica (the real one: set by the worker).
    rank: int = 0
    # The DP batch coordination on the CPU (gloo) group instead of NCCL (the real default is
    # False unless async scheduling; the simulation has no NCCL).
    disable_nccl_for_dp_synchronization: bool = True
    # Whether the TP groups may not use the custom all-reduce (--disable-custom-all-reduce).
    disable_custom_all_reduce: bool = False

    @property
    def world_size(self):
        """The ranks of one DP replica: PP x TP."""
        return self.pipeline_parallel_size * self.tensor_parallel_size

    @property
    def world_size_across_dp(self):
        """The ranks of every DP replica: DP x PP x TP."""
        return self.world_size * self.data_parallel_size
