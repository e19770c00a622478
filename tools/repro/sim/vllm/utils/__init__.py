"""Simulated vllm.utils: the ZMQ endpoint helpers the engine client uses.

Simulation: an ipc:// endpoint is a unix stream socket at that path (ZMQ's ipc transport is one),
bound by the client and connected to by the engine core; no pyzmq.
"""
import os
import socket
import tempfile
from multiprocessing.connection import Connection
from uuid import uuid4


def get_open_zmq_ipc_path():
    """A fresh ipc:// endpoint under the RPC base path (VLLM_RPC_BASE_PATH, else the temp dir)."""
    base = os.environ.get("VLLM_RPC_BASE_PATH", tempfile.gettempdir())
    return f"ipc://{base}/{uuid4()}"


def make_zmq_socket(path, bind):
    """A socket on an ipc:// endpoint: bound and listening (bind=True), or connected; the
    connected side as a multiprocessing Connection (pickled messages, as the pipes were)."""
    address = path[len("ipc://"):]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if bind:
        sock.bind(address)
        sock.listen(1)
        return sock
    sock.connect(address)
    return Connection(sock.detach())


def accept_zmq_peer(listening):
    """The connection of the peer that connected to a bound endpoint; the path is removed (the
    accepted socket keeps its name), as vLLM removes its ipc files."""
    conn, _ = listening.accept()
    os.unlink(listening.getsockname())
    listening.close()
    return Connection(conn.detach())
