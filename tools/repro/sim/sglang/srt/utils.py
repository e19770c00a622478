"""Simulated sglang.srt.utils: the helpers on a multi-node server's path (broadcast_pyobj, the
dummy health-check server of the nodes that run no HTTP server, the process helpers).

Simulation: PipeSocket / AsyncPipeSocket stand in for the ZMQ sockets get_zmq_socket returns
(send_pyobj / recv_pyobj over a multiprocessing pipe end); the health-check server is an
asyncio.start_server loop answering 200 (SGLang: FastAPI on uvicorn); torch is imported by
broadcast_pyobj, the only helper that needs it (only the schedulers load torch).
"""
import asyncio
import ctypes
import logging
import os
import pickle
import signal

logger = logging.getLogger(__name__)

NOBLOCK = 1  # zmq.NOBLOCK


class ZMQError(Exception):
    """zmq.ZMQError (zmq.EAGAIN: nothing to receive)."""


def announce(line):
    """Simulation only: one line on stdout for the test harness ("rank R pid P ...")."""
    os.write(1, (line + "\n").encode())


def configure_logger(server_args, prefix=""):
    """SGLang's log format: `[time{prefix}] message`."""
    logging.basicConfig(level=getattr(logging, server_args.log_level.upper()), force=True,
                        format=f"[%(asctime)s{prefix}] %(message)s", datefmt="%Y-%m-%d %H:%M:%S")


def kill_itself_when_parent_died():
    """SIGKILL this process when its parent dies (prctl PR_SET_PDEATHSIG)."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL("libc.so.6").prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class PipeSocket:
    """One end of a PUSH/PULL pair (a multiprocessing pipe end)."""

    def __init__(self, connection):
        self.connection = connection

    def send_pyobj(self, obj):
        """Sends one object."""
        self.connection.send(obj)

    def recv_pyobj(self, flags=0):
        """Receives one object; with NOBLOCK raises ZMQError when none is there."""
        if flags & NOBLOCK and not self.connection.poll():
            raise ZMQError("Resource temporarily unavailable")
        return self.connection.recv()


class AsyncPipeSocket(PipeSocket):
    """The asyncio side of a pipe end (zmq.asyncio): recv_pyobj is awaited on the loop."""

    async def recv_pyobj(self, flags=0):
        """Awaits the next object: a future the loop resolves when the pipe is readable."""
        while not self.connection.poll():
            loop = asyncio.get_running_loop()
            readable = loop.create_future()
            fd = self.connection.fileno()
            loop.add_reader(fd, lambda: readable.done() or readable.set_result(None))
            try:
                await readable
            finally:
                loop.remove_reader(fd)
        return self.connection.recv()


def get_zmq_socket(channel, is_async=False):
    """The socket of one channel end (SGLang: get_zmq_socket(context, type, endpoint, bind))."""
    if channel is None:
        return None
    return (AsyncPipeSocket if is_async else PipeSocket)(channel)


def broadcast_pyobj(data, rank, dist_group=None, src=0, force_cpu_device=True):
    """Broadcasts a Python object from the global rank `src` over `dist_group` (the TP CPU
    group): its pickled size, then its bytes (size 0: an empty list)."""
    import torch
    import torch.distributed as dist
    device = torch.device("cpu")
    if rank == src:
        if len(data) == 0:
            dist.broadcast(torch.tensor([0], dtype=torch.long, device=device), src=src,
                           group=dist_group)
            return data
        payload = pickle.dumps(data)
        size = torch.tensor([len(payload)], dtype=torch.long, device=device)
        dist.broadcast(size, src=src, group=dist_group)
        dist.broadcast(torch.frombuffer(bytearray(payload), dtype=torch.uint8), src=src,
                       group=dist_group)
        return data
    size = torch.tensor([0], dtype=torch.long, device=device)
    dist.broadcast(size, src=src, group=dist_group)
    if size.item() == 0:
        return []
    payload = torch.empty(size.item(), dtype=torch.uint8, device=device)
    dist.broadcast(payload, src=src, group=dist_group)
    return pickle.loads(payload.numpy().tobytes())


async def print_exception_wrapper(func):
    """Runs a long-running coroutine function; an exception ends the server (SIGQUIT to
    itself, as SGLang does)."""
    try:
        await func()
    except Exception:
        logger.exception("TokenizerManager hit an exception")
        os.kill(os.getpid(), signal.SIGQUIT)


def launch_dummy_health_check_server(host, port, enable_metrics=False):
    """The /health endpoint of a node that serves no requests (node_rank >= 1): served on this
    thread's own event loop, forever."""

    async def health(reader, writer):
        await reader.read(4096)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    async def serve():
        server = await asyncio.start_server(health, host, port)
        async with server:
            await server.serve_forever()

    logger.info("Starting dummy health check server at %s:%s", host, port)
    asyncio.run(serve())


def kill_process_tree(parent_pid, include_parent=True):
    """Kills the children of `parent_pid` (and itself when include_parent)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == parent_pid:
            try:
                os.kill(int(entry), signal.SIGKILL)
            except OSError:
                pass
    if include_parent:
        os.kill(parent_pid, signal.SIGKILL)
