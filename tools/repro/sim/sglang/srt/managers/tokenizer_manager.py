"""Simulated sglang.srt.managers.tokenizer_manager: the TokenizerManager in the HTTP server's
process. Each request is tokenized, sent to the scheduler, and its handler waits on the
request's ReqState event (_wait_one_response) for the outputs handle_loop receives from the
detokenizer. generate_request and _wait_one_response are async generators, as in SGLang.

Simulation: no tokenizer (one token per character); pipes instead of ZMQ sockets."""
import asyncio
import dataclasses
import logging
import time
import uuid
from typing import Any, Dict, List

from sglang.srt.managers.io_struct import BatchStrOut, TokenizedGenerateReqInput
from sglang.srt.utils import get_zmq_socket, print_exception_wrapper

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class ReqState:
    """The state of one request: its outputs, whether it finished, and the event its handler
    waits on."""

    out_list: List[Dict[Any, Any]]
    finished: bool
    event: asyncio.Event
    obj: Any
    created_time: float
    text: str = ""


class TokenizerManager:
    """Tokenizes requests, sends them to the scheduler, and collects their outputs."""

    def __init__(self, server_args, port_args):
        self.server_args = server_args
        self.recv_from_detokenizer = get_zmq_socket(port_args.detokenizer_to_tokenizer[0],
                                                    is_async=True)
        self.send_to_scheduler = get_zmq_socket(port_args.tokenizer_to_scheduler[1])
        self.rid_to_state: Dict[str, ReqState] = {}
        self.asyncio_tasks = set()
        self.no_create_loop = False

    def auto_create_handle_loop(self):
        """Starts handle_loop on the running loop, once."""
        if self.no_create_loop:
            return
        self.no_create_loop = True
        loop = asyncio.get_event_loop()
        self.asyncio_tasks.add(loop.create_task(print_exception_wrapper(self.handle_loop)))

    async def generate_request(self, obj, request=None):
        """Yields the request's outputs (one at its end unless it streams)."""
        self.auto_create_handle_loop()
        if obj.rid is None:
            obj.rid = uuid.uuid4().hex
        tokenized_obj = await self._tokenize_one_request(obj)
        state = self._send_one_request(obj, tokenized_obj)
        async for response in self._wait_one_response(obj, state, request):
            yield response

    async def _tokenize_one_request(self, obj):
        """The request's token ids."""
        input_ids = [ord(c) % 32000 for c in obj.text]
        return TokenizedGenerateReqInput(obj.rid, input_ids,
                                         obj.sampling_params.get("max_new_tokens", 128))

    def _send_one_request(self, obj, tokenized_obj):
        """Sends it to the scheduler; its state waits for the outputs."""
        self.send_to_scheduler.send_pyobj(tokenized_obj)
        state = ReqState([], False, asyncio.Event(), obj, time.time())
        self.rid_to_state[obj.rid] = state
        return state

    async def _wait_one_response(self, obj, state, request=None):
        """Waits for the request's outputs (every 4 s it checks whether the client left)."""
        while True:
            try:
                await asyncio.wait_for(state.event.wait(), timeout=4)
            except asyncio.TimeoutError:
                if request is not None and await request.is_disconnected():
                    self.abort_request(obj.rid)
                    raise ValueError(f"Request is disconnected from the client side. rid={obj.rid}")
                continue
            out = state.out_list[-1]
            state.out_list = []
            if state.finished:
                yield out
                break
            state.event.clear()
            if obj.stream:
                yield out

    def abort_request(self, rid):
        """Forgets the request."""
        self.rid_to_state.pop(rid, None)

    async def handle_loop(self):
        """Receives the detokenizer's outputs and wakes the requests' handlers."""
        while True:
            recv_obj = await self.recv_from_detokenizer.recv_pyobj()
            if isinstance(recv_obj, BatchStrOut):
                self._handle_batch_output(recv_obj)

    def _handle_batch_output(self, recv_obj):
        """One step's text of each request in it."""
        for i, rid in enumerate(recv_obj.rids):
            state = self.rid_to_state.get(rid)
            if state is None:
                continue
            state.text += recv_obj.output_strs[i]
            state.finished = recv_obj.finished_reasons[i] is not None
            if state.finished:
                del self.rid_to_state[rid]
            state.out_list.append({"text": state.text,
                                   "meta_info": {"id": rid,
                                                 "finish_reason": recv_obj.finished_reasons[i]}})
            state.event.set()
