"""The process of one stand-in actor: builds the instance, then serves its methods one call at
a time (Ray's default for an actor) over a Unix socket, until killed.

Usage (by ray._create_actor): python3 -m ray._actor_host SPEC_FILE
"""

import importlib
import importlib.util
import json
import os
import pickle
import socket
import sys
import traceback

import ray


def _load_class(spec):
    if spec["module_file"]:
        # A class of the driver's script (__main__): load that file as a module. Ray pickles
        # such classes by value; the stand-in re-reads the same source.
        module_spec = importlib.util.spec_from_file_location("standin_actor_main",
                                                             spec["module_file"])
        module = importlib.util.module_from_spec(module_spec)
        sys.modules["standin_actor_main"] = module
        module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(spec["module"])
    target = module
    for part in spec["qualname"].split("."):
        target = getattr(target, part)
    return target


def _set(record, **changes):
    with open(record) as f:
        entry = json.load(f)
    entry.update(changes)
    tmp = f"{record}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(entry, f, indent=1)
    os.replace(tmp, record)
    return entry


def main(spec_file):
    with open(spec_file, "rb") as f:
        spec = pickle.load(f)
    record = spec["record"]
    _set(record, pid=os.getpid())
    try:
        instance = _load_class(spec)(*spec["args"], **spec["kwargs"])
    except BaseException as e:
        _set(record, state="DEAD", error="the actor's constructor raised: " +
             "".join(traceback.format_exception_only(type(e), e)).strip())
        return 1
    with open(record) as f:
        path = json.load(f)["socket"]
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(16)
    _set(record, state="ALIVE")
    print(f"actor {spec['qualname']} alive (pid {os.getpid()})", flush=True)
    while True:
        conn, _ = server.accept()
        with conn:
            try:
                method, args, kwargs = ray._receive(conn)
            except (EOFError, OSError):
                continue
            try:
                result = ("ok", getattr(instance, method)(*args, **kwargs))
            except BaseException as e:
                result = ("err", "".join(traceback.format_exception_only(type(e), e)).strip())
            try:
                ray._send(conn, result)
            except OSError:
                pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
