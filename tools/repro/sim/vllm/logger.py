"""Simulated vllm.logger: vLLM's log format, `LEVEL MM-DD HH:MM:SS [file.py:line] message`."""
import os
import sys
import time

# Simulation: the loggers whose lines go to stderr (fd 2); every other logger writes to stdout,
# as vLLM's default handler does. The MessageQueue's ring-buffer warnings are the ones a job's
# stderr shows (gpu-p2p-spin).
_STDERR_LOGGERS = ("vllm.distributed.device_communicators.shm_broadcast",)


class _Logger:
    def __init__(self, name):
        self.name = name
        self.fd = 2 if name in _STDERR_LOGGERS else 1

    def _log(self, level, msg, args):
        caller = sys._getframe(2)
        where = f"{os.path.basename(caller.f_code.co_filename)}:{caller.f_lineno}"
        stamp = time.strftime("%m-%d %H:%M:%S", time.gmtime())
        # One write(2) per line: lines of ranks sharing a log file never interleave.
        os.write(self.fd, f"{level} {stamp} [{where}] {msg % args if args else msg}\n".encode())

    def debug(self, msg, *args):
        """Logs at DEBUG, shown only with VLLM_LOGGING_LEVEL=DEBUG (as in vLLM)."""
        if os.environ.get("VLLM_LOGGING_LEVEL", "INFO").upper() == "DEBUG":
            self._log("DEBUG", msg, args)

    def info(self, msg, *args):
        """Logs at INFO."""
        self._log("INFO", msg, args)

    def warning(self, msg, *args):
        """Logs at WARNING."""
        self._log("WARNING", msg, args)

    def error(self, msg, *args):
        """Logs at ERROR."""
        self._log("ERROR", msg, args)


def init_logger(name):
    """Returns vLLM's logger for a module (the real one configures `logging` once)."""
    return _Logger(name)
