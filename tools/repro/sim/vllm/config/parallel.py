"""Simulated vllm.config.parallel: the parallel layout of one engine."""
import dataclasses

import torch
import torch.distributed


@dataclasses.dataclass
class ParallelConfig:
    """Tensor / pipeline / data parallel sizes and this worker's ranks (the real one also holds
    the executor backend, expert parallelism, DP addresses, ...)."""

    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    data_parallel_rank: int = 0
    # Where the data-parallel engine cores meet: DP rank 0's host and the first of the ports
    # their stateless groups use (get_next_dp_init_port hands them out in order).
    data_parallel_master_ip: str = "127.0.0.1"
    data_parallel_master_port: int = 29550
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

    def get_next_dp_init_port(self):
        """The port of the next stateless DP group: data_parallel_master_port, then one more
        for each group made (every DP rank makes its groups in the same order)."""
        answer = self.data_parallel_master_port
        self.data_parallel_master_port += 1
        return answer

    def stateless_init_dp_group(self):
        """The engine cores' DP group: a gloo ProcessGroup of data_parallel_size ranks on a
        TCPStore at data_parallel_master_ip and the next DP port, outside torch.distributed's
        registry (the engine core process has no torch world; gloo since it may have no GPU).
        The real one retries on another port when the port is taken (EADDRINUSE)."""
        from vllm.distributed.utils import stateless_init_torch_distributed_process_group
        return stateless_init_torch_distributed_process_group(
            self.data_parallel_master_ip, self.get_next_dp_init_port(), self.data_parallel_rank,
            self.data_parallel_size, backend="gloo")

    @staticmethod
    def has_unfinished_dp(dp_group, has_unfinished):
        """Whether any DP rank has unfinished requests: an all_reduce(MAX) of this rank's flag
        on the DP group (an OR over the ranks)."""
        tensor = torch.tensor([has_unfinished], dtype=torch.int32, device="cpu")
        torch.distributed.all_reduce(tensor, op=torch.distributed.ReduceOp.MAX, group=dp_group)
        return bool(tensor.item())
