"""Simulated vllm.v1.engine: the engine core's request types."""
import enum


class EngineCoreRequestType(enum.Enum):
    """What a message on the engine core's input socket asks for (the first frame's byte)."""

    ADD = b"\x00"
    ABORT = b"\x01"
    START_DP_WAVE = b"\x02"
    UTILITY = b"\x03"
    EXECUTOR_FAILED = b"\x04"
