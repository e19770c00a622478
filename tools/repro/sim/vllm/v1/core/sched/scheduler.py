"""Simulated vllm.v1.core.sched.scheduler: the engine's request scheduler."""
from vllm.v1.core.sched.output import SchedulerOutput


class Scheduler:
    """Decides which requests run in each step (waiting and running queues, KV-cache blocks)."""

    def __init__(self):
        """Empty queues."""
        self.waiting = []
        self.running = []

    def add_request(self, request):
        """Queues a new request (waiting until scheduled)."""
        self.waiting.append(request)

    def has_unfinished_requests(self):
        """Whether any request is waiting or running."""
        return bool(self.waiting or self.running)

    def has_requests(self):
        """Whether any request is unfinished, or finished but not yet freed."""
        return self.has_unfinished_requests()

    def schedule(self):
        """Picks the next step's batch under the token and KV-cache budgets (here every
        waiting request starts running, one token each)."""
        self.running.extend(self.waiting)
        self.waiting = []
        return SchedulerOutput(total_num_scheduled_tokens=len(self.running))
