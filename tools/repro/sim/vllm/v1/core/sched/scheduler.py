"""Simulated vllm.v1.core.sched.scheduler: the engine's request scheduler."""
import time

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

    def update_from_output(self, scheduler_output, model_runner_output):
        """Turns the model's sampled tokens into each request's output (client index ->
        EngineCoreOutputs) and frees the requests that finished. Requests that are plain ids
        (the scenarios without a front end) make no output."""
        from vllm.v1.engine import EngineCoreOutput, EngineCoreOutputs
        outputs = {}
        still_running = []
        for request in self.running:
            if not hasattr(request, "max_tokens"):
                still_running.append(request)
                continue
            request.num_output_tokens = getattr(request, "num_output_tokens", 0) + 1
            done = request.num_output_tokens >= request.max_tokens
            out = outputs.setdefault(request.client_index,
                                     EngineCoreOutputs(timestamp=time.monotonic()))
            out.outputs.append(EngineCoreOutput(request.request_id, [request.num_output_tokens],
                                                "length" if done else None))
            if not done:
                still_running.append(request)
        self.running = still_running
        return outputs
