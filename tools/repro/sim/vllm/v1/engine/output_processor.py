"""Simulated vllm.v1.engine.output_processor: turns the engine core's outputs into each request's
RequestOutput and hands them to the request's collector."""
import asyncio


class RequestOutputCollector:
    """The queue between the output handler and one request's generate(): the latest output
    (merged while nobody reads), and an asyncio.Event the reader awaits."""

    def __init__(self, output_kind, request_id):
        """An empty collector for request_id."""
        self.output_kind = output_kind
        self.request_id = request_id
        self.output = None
        self.ready = asyncio.Event()

    def put(self, output):
        """Non-blocking put: replaces (or merges into) the pending output and wakes the reader."""
        self.output = output
        self.ready.set()

    async def get(self):
        """Get operation blocks on the put event."""
        while (output := self.output) is None:
            await self.ready.wait()
        self.output = None
        self.ready.clear()
        return output

    def get_nowait(self):
        """The pending output, or None."""
        output = self.output
        if output is not None:
            self.output = None
            self.ready.clear()
        return output


class RequestOutput:
    """One request's output so far (the real one: the prompt, the completions' text, tokens)."""

    def __init__(self, request_id, token_ids, finished):
        self.request_id = request_id
        self.token_ids = token_ids
        self.finished = finished


class OutputProcessor:
    """Detokenizes the engine's outputs and routes them to the requests' collectors."""

    def __init__(self):
        """No requests yet."""
        self.request_states = {}

    def add_request(self, request, queue):
        """Registers a request and the collector its outputs go to."""
        self.request_states[request.request_id] = (queue, [])

    def process_outputs(self, engine_core_outputs):
        """Each EngineCoreOutput to its request's collector (a finished request leaves)."""
        for output in engine_core_outputs:
            state = self.request_states.get(output.request_id)
            if state is None:
                continue
            queue, tokens = state
            tokens.extend(output.new_token_ids)
            queue.put(RequestOutput(output.request_id, list(tokens), output.finished))
            if output.finished:
                del self.request_states[output.request_id]
