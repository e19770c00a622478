"""Stand-in for the part of Ray's API that tools/deploy/ray/hangscope_ray_agents.py uses.

The "cluster" is a directory named by $RAY_STANDIN_CLUSTER: nodes.json (what ray.nodes()
returns) and actors/ (one JSON record per actor, with the node its scheduling strategy named).
Every actor is a real local process (ray/_actor_host.py) serving its methods over a Unix
socket; it outlives the driver, as a detached actor does, until ray.kill. See ../README.md.
"""

import concurrent.futures
import json
import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid

from . import exceptions, util  # noqa: F401  (ray.exceptions, ray.util)
from .util.scheduling_strategies import NodeAffinitySchedulingStrategy

__version__ = "0.0.0-standin"

# Actor options Ray accepts (a subset of Ray's list); anything else is a typo, refused like Ray.
_ACTOR_OPTIONS = {
    "name", "namespace", "lifetime", "num_cpus", "num_gpus", "resources", "memory",
    "max_restarts", "max_task_retries", "max_concurrency", "max_pending_calls",
    "scheduling_strategy", "runtime_env", "get_if_exists", "accelerator_type",
    "label_selector", "placement_group", "placement_group_bundle_index", "_metadata",
}

_state = {"cluster": None, "namespace": None}
_children = {}  # actor id -> Popen of the actor hosts this driver started (reaped on kill)
_owned = []  # non-detached actors of this driver: killed when it exits
_lock = threading.Lock()


def _require_init():
    if _state["cluster"] is None:
        raise exceptions.RaySystemError(
            "Ray has not been started yet. You can start Ray with 'ray.init()'.")


def is_initialized():
    return _state["cluster"] is not None


def init(address=None, *, namespace=None, **kwargs):
    """Connects to the stand-in cluster of $RAY_STANDIN_CLUSTER (address "auto" or its
    recorded address)."""
    cluster = os.environ.get("RAY_STANDIN_CLUSTER", "")
    nodes_file = os.path.join(cluster, "nodes.json")
    if not cluster or not os.path.isfile(nodes_file):
        raise ConnectionError(
            "Could not find any running Ray instance. Please specify the one to connect to "
            "by setting `--address` flag or `RAY_ADDRESS` environment variable.")
    recorded = _read_json(os.path.join(cluster, "address"), default="127.0.0.1:6379")
    if address not in (None, "auto", recorded):
        raise ConnectionError(f"stand-in cluster is at {recorded}, not {address}")
    os.makedirs(os.path.join(cluster, "actors"), exist_ok=True)
    _state["cluster"] = cluster
    _state["namespace"] = namespace or f"anonymous-{uuid.uuid4().hex[:8]}"
    return {"address": recorded, "namespace": _state["namespace"]}


def shutdown():
    for handle in list(_owned):
        try:
            kill(handle)
        except Exception:
            pass
    _owned.clear()
    _state["cluster"] = None
    _state["namespace"] = None


def nodes():
    """Ray's node table: a list of dicts with NodeID, Alive, NodeManagerAddress, ..."""
    _require_init()
    return [dict(n) for n in _read_json(os.path.join(_state["cluster"], "nodes.json"))]


def remote(*args, **options):
    """@ray.remote / ray.remote(cls) / ray.remote(**options)(cls): actors only."""
    if len(args) == 1 and not options and callable(args[0]):
        return _make_remote(args[0], {})
    if args:
        raise TypeError("ray.remote takes a class, or keyword options")
    return lambda target: _make_remote(target, options)


def _make_remote(target, options):
    if not isinstance(target, type):
        raise NotImplementedError("the Ray stand-in implements actors (classes) only")
    return ActorClass(target, _check_options(options))


def _check_options(options):
    unknown = sorted(set(options) - _ACTOR_OPTIONS)
    if unknown:
        raise ValueError(f"Invalid option keyword {unknown[0]} for actors.")
    if options.get("lifetime") not in (None, "detached", "non_detached"):
        raise ValueError("actor `lifetime` argument must be one of 'detached', "
                         "'non_detached' and 'None'.")
    strategy = options.get("scheduling_strategy")
    if strategy is not None and not isinstance(strategy, (str, NodeAffinitySchedulingStrategy)):
        raise ValueError(f"invalid scheduling_strategy {strategy!r}")
    return dict(options)


class ActorClass:
    def __init__(self, cls, options):
        self._cls = cls
        self._options = options

    def __call__(self, *args, **kwargs):
        raise TypeError("Actors cannot be instantiated directly. "
                        f"Instead of '{self._cls.__name__}()', use "
                        f"'{self._cls.__name__}.remote()'.")

    def options(self, **options):
        return ActorClass(self._cls, {**self._options, **_check_options(options)})

    def remote(self, *args, **kwargs):
        _require_init()
        return _create_actor(self._cls, self._options, args, kwargs)


class ObjectRef:
    def __init__(self, future):
        self._future = future


class _Method:
    def __init__(self, actor_id, name):
        self._actor_id, self._name = actor_id, name

    def remote(self, *args, **kwargs):
        future = concurrent.futures.Future()

        def run():
            try:
                future.set_result(_call(self._actor_id, self._name, args, kwargs))
            except BaseException as e:  # delivered by ray.get
                future.set_exception(e)

        threading.Thread(target=run, daemon=True).start()
        return ObjectRef(future)


class ActorHandle:
    def __init__(self, actor_id):
        self._actor_id = actor_id

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Method(self._actor_id, name)

    def __repr__(self):
        return f"Actor({self._actor_id})"


def get(refs, *, timeout=None):
    single = isinstance(refs, ObjectRef)
    items = [refs] if single else list(refs)
    deadline = None if timeout is None else time.monotonic() + timeout
    values = []
    for ref in items:
        if not isinstance(ref, ObjectRef):
            raise TypeError(f"ray.get takes ObjectRefs, got {type(ref).__name__}")
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            values.append(ref._future.result(timeout=remaining))
        except concurrent.futures.TimeoutError:
            raise exceptions.GetTimeoutError(
                f"Get timed out: some object(s) not ready after {timeout} s.") from None
    return values[0] if single else values


def get_actor(name, namespace=None):
    _require_init()
    namespace = namespace or _state["namespace"]
    for entry in _live_actors():
        if entry.get("name") == name and entry["namespace"] == namespace:
            return ActorHandle(entry["actor_id"])
    raise ValueError(f"Failed to look up actor with name '{name}'. This could because 1. You "
                     "are trying to look up a named actor you didn't create. 2. The named actor "
                     "died. 3. You did not use a namespace matching the namespace of the actor.")


def kill(actor, *, no_restart=True):
    """Force-kills the actor's process (SIGKILL, as Ray does), like ray.kill."""
    _require_init()
    if not isinstance(actor, ActorHandle):
        raise ValueError(f"ray.kill() only supported for actors. For tasks, try ray.cancel(). "
                         f"Got: {type(actor).__name__}.")
    entry = _read_json(_record_path(actor._actor_id), default=None)
    if entry is None:
        return
    pid = entry.get("pid")
    if pid and _process_alive(pid):
        os.kill(pid, signal.SIGKILL)
    child = _children.pop(actor._actor_id, None)
    if child is not None:
        if child.poll() is None:
            child.kill()
        child.wait()
    if pid:
        for _ in range(100):
            if not _process_alive(pid):
                break
            time.sleep(0.02)
    _update(actor._actor_id, state="DEAD", death_cause="ray.kill")


# --- registry and actor processes ----------------------------------------------------------

def _read_json(path, default=...):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        if default is ...:
            raise
        return default


def _write_json(path, value):
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    with open(tmp, "w") as f:
        json.dump(value, f, indent=1)
    os.replace(tmp, path)


def _actors_dir():
    return os.path.join(_state["cluster"], "actors")


def _record_path(actor_id):
    return os.path.join(_actors_dir(), f"{actor_id}.json")


def _update(actor_id, **changes):
    with _lock:
        entry = _read_json(_record_path(actor_id), default=None)
        if entry is not None:
            entry.update(changes)
            _write_json(_record_path(actor_id), entry)


def _process_alive(pid):
    """Alive and not a zombie (a killed host this driver has not reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            is_host = b"ray._actor_host" in f.read()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != "Z" and is_host


def _live_actors():
    out = []
    for file in sorted(os.listdir(_actors_dir())):
        if not file.endswith(".json"):
            continue
        entry = _read_json(os.path.join(_actors_dir(), file), default=None)
        if entry is None or entry["state"] == "DEAD":
            continue
        if entry["pid"] and not _process_alive(entry["pid"]):
            _update(entry["actor_id"], state="DEAD", death_cause="the actor's process died")
            continue
        out.append(entry)
    return out


def _create_actor(cls, options, args, kwargs):
    namespace = options.get("namespace") or _state["namespace"]
    name = options.get("name")
    if name:
        for entry in _live_actors():
            if entry.get("name") == name and entry["namespace"] == namespace:
                if options.get("get_if_exists"):
                    return ActorHandle(entry["actor_id"])
                raise ValueError(f"The name {name} (namespace={namespace}) is already taken.")
    strategy = options.get("scheduling_strategy")
    node_id, soft = None, None
    if isinstance(strategy, NodeAffinitySchedulingStrategy):
        node_id, soft = strategy.node_id, strategy.soft
    actor_id = uuid.uuid4().hex[:32]
    module = cls.__module__
    module_file = None
    if module == "__main__":
        module_file = os.path.abspath(sys.modules["__main__"].__file__)
    entry = {
        "actor_id": actor_id, "name": name, "namespace": namespace,
        "class_name": cls.__qualname__, "lifetime": options.get("lifetime") or "non_detached",
        "num_cpus": options.get("num_cpus"), "max_restarts": options.get("max_restarts"),
        "node_id": node_id, "soft": soft, "state": "PENDING_CREATION", "pid": None,
        "socket": os.path.join(_actors_dir(), f"{actor_id}.sock"), "error": None,
    }
    node = None
    if node_id is not None:
        node = next((n for n in nodes() if n["NodeID"] == node_id), None)
    if node_id is not None and (node is None or not node.get("Alive")) and not soft:
        entry.update(state="DEAD", error=f"node {node_id} is not alive: the actor is "
                     "unschedulable (NodeAffinitySchedulingStrategy soft=False)")
        _write_json(_record_path(actor_id), entry)
        return ActorHandle(actor_id)
    entry["node_ip"] = node["NodeManagerAddress"] if node else "127.0.0.1"
    _write_json(_record_path(actor_id), entry)
    spec = os.path.join(_actors_dir(), f"{actor_id}.spec")
    with open(spec, "wb") as f:
        pickle.dump({"record": _record_path(actor_id), "module": module,
                     "module_file": module_file, "qualname": cls.__qualname__,
                     "args": args, "kwargs": kwargs}, f)
    env = dict(os.environ)
    standin_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [standin_root, env.get("PYTHONPATH")]))
    env["RAY_STANDIN_NODE_ID"] = node_id or ""
    log = open(os.path.join(_actors_dir(), f"{actor_id}.log"), "ab")
    child = subprocess.Popen([sys.executable, "-m", "ray._actor_host", spec],
                             stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                             start_new_session=True)
    log.close()
    _children[actor_id] = child  # the host records its pid itself
    handle = ActorHandle(actor_id)
    if entry["lifetime"] != "detached":
        _owned.append(handle)
    return handle


def _call(actor_id, method, args, kwargs):
    """Runs METHOD on the actor once its constructor has finished (Ray's ordering)."""
    while True:
        entry = _read_json(_record_path(actor_id), default=None)
        if entry is None or entry["state"] == "DEAD":
            why = (entry or {}).get("error") or (entry or {}).get("death_cause") or "unknown"
            raise exceptions.RayActorError(f"The actor died: {why}")
        if entry["state"] == "ALIVE":
            break
        child = _children.get(actor_id)
        started_and_gone = entry["pid"] and not _process_alive(entry["pid"])
        if started_and_gone or (child is not None and child.poll() is not None):
            time.sleep(0.1)  # the host may just have written DEAD with the reason
            entry = _read_json(_record_path(actor_id), default={})
            if entry.get("state") != "ALIVE":
                why = entry.get("error") or "its process exited during creation"
                raise exceptions.RayActorError(f"The actor died: {why}")
            break
        time.sleep(0.05)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(entry["socket"])
            _send(s, (method, args, kwargs))
            status, value = _receive(s)
    except (OSError, EOFError) as e:
        raise exceptions.RayActorError(f"The actor died: {e}") from None
    if status == "ok":
        return value
    raise exceptions.RayTaskError(value)


def _send(sock, obj):
    data = pickle.dumps(obj)
    sock.sendall(struct.pack("!Q", len(data)) + data)


def _receive(sock):
    def exactly(n):
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise EOFError("connection closed")
            buf += chunk
        return buf

    (length,) = struct.unpack("!Q", exactly(8))
    return pickle.loads(exactly(length))
