"""Simulated sglang.srt.managers.detokenizer_manager: the detokenizer process
(sglang::detokenizer) turns the schedulers' token ids into text for the tokenizer manager."""
import logging

import setproctitle

from sglang.srt.managers.io_struct import BatchStrOut, BatchTokenIDOut
from sglang.srt.utils import configure_logger, get_zmq_socket, kill_itself_when_parent_died

logger = logging.getLogger(__name__)


class DetokenizerManager:
    """Receives BatchTokenIDOut from TP rank 0's scheduler, sends BatchStrOut on."""

    def __init__(self, server_args, port_args):
        self.recv_from_scheduler = get_zmq_socket(port_args.scheduler_to_detokenizer[0])
        self.send_to_tokenizer = get_zmq_socket(port_args.detokenizer_to_tokenizer[1])

    def event_loop(self):
        """The detokenizer's loop: one scheduler output at a time."""
        while True:
            recv_obj = self.recv_from_scheduler.recv_pyobj()
            output = self._request_dispatcher(recv_obj)
            if output is not None:
                self.send_to_tokenizer.send_pyobj(output)

    def _request_dispatcher(self, recv_obj):
        """By message type."""
        if isinstance(recv_obj, BatchTokenIDOut):
            return self.handle_batch_token_id_out(recv_obj)
        return None

    def handle_batch_token_id_out(self, recv_obj):
        """The step's tokens as text (no tokenizer: one word per token)."""
        return BatchStrOut(list(recv_obj.rids), [f" t{token}" for token in recv_obj.output_ids],
                           list(recv_obj.finished_reasons))


def run_detokenizer_process(server_args, port_args):
    """The detokenizer process."""
    kill_itself_when_parent_died()
    setproctitle.setproctitle("sglang::detokenizer")
    configure_logger(server_args)
    manager = DetokenizerManager(server_args, port_args)
    manager.event_loop()
