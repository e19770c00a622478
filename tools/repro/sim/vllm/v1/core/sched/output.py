"""Simulated vllm.v1.core.sched.output: what the scheduler hands the model for one step."""
import dataclasses


@dataclasses.dataclass
class SchedulerOutput:
    """One step's batch: new and cached requests, tokens per request, the total (here only
    the total)."""

    total_num_scheduled_tokens: int = 0
