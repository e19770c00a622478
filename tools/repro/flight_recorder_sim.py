"""A small simulated PyTorch flight recorder for real gloo ranks (the torch here, 1.13, has none).

What the real one does (recent PyTorch, ProcessGroupNCCL with TORCH_NCCL_TRACE_BUFFER_SIZE /
TORCH_FR_BUFFER_SIZE > 0; torch/csrc/distributed/c10d/FlightRecorder.cpp):
  - every collective a process group enqueues is recorded in a per-process ring buffer: record
    id, process group (id, description), collective sequence number (counting from 1 per
    group), profiling name ("nccl:all_reduce"), input/output sizes and dtypes, the Python and
    C++ frames that issued it, times, and a state (scheduled, started, completed) that the
    watchdog updates from the collective's CUDA events;
  - the group keeps counters (pg_status): the last collective enqueued, started and completed;
  - ProcessGroupNCCL's DumpPipe unlinks and mkfifo's ${TORCH_NCCL_DEBUG_INFO_PIPE_FILE}${rank}.pipe
    and its heartbeat-monitor thread reads it; when anything was written into it, the thread
    writes a dump, the c10 Dict {version, comm_lib_version, pg_config, pg_status, entries}
    pickled by torch::jit::Pickler, to ${TORCH_NCCL_DEBUG_INFO_TEMP_FILE}${rank}
    (DebugInfoWriter). It writes nothing before it is asked (or before a watchdog timeout).

This module does the same for gloo all-reduces: FlightRecorder.all_reduce wraps
torch.distributed.all_reduce on the world group and records it (state "started" when entered,
"completed" when it returned), and start_dump_thread starts the dump thread. The dump has the
layout of tools/fixtures/make_flight_recorder_dumps.py (entry(), dump()) and is written by its
TorchPickler, which emits torch's Pickler opcodes; that script is imported from its path, not
copied. Shortcuts: one process group (the world, pg "0" / "default_pg"), collectives only, no
C++ frames, and the dump is written atomically (a temporary file in the same directory, then
rename(2)) where torch writes the file in place.
"""
import atexit
import collections
import importlib.util
import os
import sys
import tempfile
import threading
import time
import traceback

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures",
                        "make_flight_recorder_dumps.py")
# The ring buffer's size (torch's TORCH_NCCL_TRACE_BUFFER_SIZE; recent releases default to 2000).
BUFFER_SIZE = 2000
# The Python frames kept per entry (innermost first, as torch symbolizes them).
MAX_FRAMES = 16


def _load_fixtures():
    """tools/fixtures/make_flight_recorder_dumps.py, imported from its path (no __pycache__)."""
    spec = importlib.util.spec_from_file_location("make_flight_recorder_dumps", FIXTURES)
    module = importlib.util.module_from_spec(spec)
    dont_write = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = dont_write
    return module


fixtures = _load_fixtures()


def torch_dtype_name(tensor):
    """The dtype as the flight recorder writes it, c10's ScalarType name ("Float", "BFloat16")."""
    name = tensor.type()  # torch.FloatTensor, torch.BFloat16Tensor, ...
    return name.rsplit(".", 1)[-1][:-len("Tensor")]


class FlightRecorder:
    """One rank's ring buffer of collectives on the world group (pg "0", "default_pg") and the
    group's counters, like FlightRecorder and ProcessGroupNCCL's pgStatus_."""

    def __init__(self, rank, world_size, timeout_ms, capacity=BUFFER_SIZE):
        self.rank = rank
        self.world_size = world_size
        self.timeout_ms = timeout_ms
        self.lock = threading.Lock()
        self.records = collections.deque(maxlen=capacity)
        self.next_record_id = 0  # FlightRecorder::id_, from 0
        self.collective_seq = 0  # ProcessGroupNCCL::seqCollective_, the first collective is 1
        self.last_enqueued = -1
        self.last_started = -1
        self.last_completed = -1

    def record(self, op, tensor, frames):
        """A collective enqueued (and, on gloo's synchronous CPU path, started): its entry."""
        with self.lock:
            self.collective_seq += 1
            rec = {"record_id": self.next_record_id, "seq": self.collective_seq, "op": op,
                   "sizes": (tuple(tensor.size()),), "dtype": torch_dtype_name(tensor),
                   "frames": frames, "created_ns": time.time_ns(), "completed_ns": None}
            self.next_record_id += 1
            self.records.append(rec)
            self.last_enqueued = self.last_started = rec["seq"]
            return rec

    def complete(self, rec):
        """The collective returned: the watchdog would find its end event done."""
        with self.lock:
            rec["completed_ns"] = time.time_ns()
            self.last_completed = rec["seq"]

    def all_reduce(self, tensor):
        """torch.distributed.all_reduce on the world group, recorded as "nccl:all_reduce"."""
        import torch.distributed as dist
        frames = [{"name": f.name, "filename": f.filename, "line": f.lineno}
                  for f in reversed(traceback.extract_stack(sys._getframe(1), MAX_FRAMES))]
        rec = self.record("nccl:all_reduce", tensor, frames)
        dist.all_reduce(tensor)
        self.complete(rec)
        return tensor

    def dump_dict(self):
        """The dump, FlightRecorder::dump's dict: the fixtures' layout (dump(), entry()) with
        this rank's entries, times and counters."""
        with self.lock:
            entries = []
            for rec in self.records:
                done = rec["completed_ns"] is not None
                e = fixtures.entry(rec["record_id"], rec["seq"], op=rec["op"], sizes=rec["sizes"],
                                   dtype=rec["dtype"], state="completed" if done else "started")
                e.update({
                    "frames": rec["frames"],
                    "time_created_ns": rec["created_ns"],
                    "duration_ms": ((rec["completed_ns"] - rec["created_ns"]) / 1e6
                                    if done else None),
                    "time_discovered_started_ns": rec["created_ns"],
                    "time_discovered_completed_ns": rec["completed_ns"],
                    "timeout_ms": self.timeout_ms,
                })
                entries.append(e)
            doc = fixtures.dump(entries, world=self.world_size)
            doc["pg_status"]["0"].update({
                "last_enqueued_collective": self.last_enqueued,
                "last_started_collective": self.last_started,
                "last_completed_collective": self.last_completed,
            })
        return doc

    def dump_bytes(self):
        """The dump pickled as torch::jit::Pickler writes it."""
        return fixtures.TorchPickler().dumps(self.dump_dict())


def write_atomically(path, data):
    """Write a temporary file next to path, then rename(2) it over path: a reader never sees a
    partial dump."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".",
                               prefix=os.path.basename(path) + ".", suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.rename(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def dump_thread_main(recorder, pipe, dump_path, ready):
    """The dump thread (ProcessGroupNCCL's DumpPipe + heartbeat monitor): makes the fifo, then
    writes a dump every time something was written into it. The fifo is opened O_RDWR (Linux:
    never blocks; fifo(7)): the thread holds a write end too, so read(2) blocks until data comes
    instead of returning EOF when a writer leaves, and the fifo always has a reader (a writer's
    O_NONBLOCK open never fails with ENXIO). Torch instead polls an O_RDONLY|O_NONBLOCK
    descriptor from its monitor loop."""
    prefix = f"[PG ID 0 PG GUID 0(default_pg) Rank {recorder.rank}] "
    try:
        try:
            os.unlink(pipe)
        except FileNotFoundError:
            pass
        os.mkfifo(pipe, 0o666)
        fifo_stat = os.stat(pipe)
        atexit.register(remove_fifo, pipe, fifo_stat)
        fd = os.open(pipe, os.O_RDWR)
    except OSError as e:
        os.write(2, f"{prefix}flight recorder: cannot make the dump fifo {pipe}: {e}\n".encode())
        ready.set()
        return
    ready.set()
    while True:
        data = os.read(fd, 128)
        if not data:
            continue
        try:
            write_atomically(dump_path, recorder.dump_bytes())
            os.write(2, f"{prefix}ProcessGroupNCCL dumping nccl trace to {dump_path}\n".encode())
        except OSError as e:
            os.write(2, f"{prefix}flight recorder: cannot write {dump_path}: {e}\n".encode())


def remove_fifo(pipe, fifo_stat):
    """At exit: remove the fifo if it is still the one this rank made."""
    try:
        st = os.stat(pipe)
        if (st.st_dev, st.st_ino) == (fifo_stat.st_dev, fifo_stat.st_ino):
            os.unlink(pipe)
    except OSError:
        pass


def start_dump_thread(recorder):
    """Start the rank's dump thread (a daemon) on ${TORCH_NCCL_DEBUG_INFO_PIPE_FILE}${rank}.pipe,
    dumping to ${TORCH_NCCL_DEBUG_INFO_TEMP_FILE}${rank}; returns once the fifo is open, so a
    request right after it is served. Both variables must be set."""
    pipe = os.environ["TORCH_NCCL_DEBUG_INFO_PIPE_FILE"] + f"{recorder.rank}.pipe"
    dump_path = os.environ["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] + f"{recorder.rank}"
    ready = threading.Event()
    thread = threading.Thread(target=dump_thread_main, args=(recorder, pipe, dump_path, ready),
                              name="pg0_heartbeat_monitor", daemon=True)
    thread.start()
    ready.wait()
    return thread
