"""Simulated sglang.srt.managers.io_struct: the messages between the tokenizer manager, the
schedulers and the detokenizer manager."""
import dataclasses
from typing import List, Optional


@dataclasses.dataclass
class GenerateReqInput:
    """A /generate request as the HTTP server receives it."""

    text: str
    sampling_params: dict
    rid: Optional[str] = None
    stream: bool = False


@dataclasses.dataclass
class TokenizedGenerateReqInput:
    """A request on its way to the scheduler."""

    rid: str
    input_ids: List[int]
    max_new_tokens: int


@dataclasses.dataclass
class BatchTokenIDOut:
    """One step's new tokens of the running requests (scheduler -> detokenizer)."""

    rids: List[str]
    output_ids: List[int]
    finished_reasons: List[Optional[str]]


@dataclasses.dataclass
class BatchStrOut:
    """The same step as text (detokenizer -> tokenizer manager)."""

    rids: List[str]
    output_strs: List[str]
    finished_reasons: List[Optional[str]]
