"""Simulated vllm.v1.engine: the engine core's request types."""
import dataclasses
import enum


class EngineCoreRequestType(enum.Enum):
    """What a message on the engine core's input socket asks for (the first frame's byte)."""

    ADD = b"\x00"
    ABORT = b"\x01"
    START_DP_WAVE = b"\x02"
    UTILITY = b"\x03"
    EXECUTOR_FAILED = b"\x04"


@dataclasses.dataclass
class EngineCoreRequest:
    """A request as the front end sends it to the engine core (msgspec-encoded in vLLM; pickled
    over a pipe here): its id, prompt tokens and sampling budget."""

    request_id: str
    prompt_token_ids: list = dataclasses.field(default_factory=list)
    max_tokens: int = 16
    client_index: int = 0


@dataclasses.dataclass
class EngineCoreOutput:
    """One request's new tokens in one step, and whether it finished."""

    request_id: str
    new_token_ids: list
    finish_reason: str = None

    @property
    def finished(self):
        """Whether the request finished in this step."""
        return self.finish_reason is not None


@dataclasses.dataclass
class EngineCoreOutputs:
    """What the engine core sends its front end after a step: the outputs of every request of
    that client that made progress."""

    engine_index: int = 0
    outputs: list = dataclasses.field(default_factory=list)
    timestamp: float = 0.0
