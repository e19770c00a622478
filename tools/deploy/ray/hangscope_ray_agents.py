#!/usr/bin/env python3
"""Start (or stop) one hangscope agent on every alive node of a running Ray cluster.

Each agent is `hangscope collect --listen NODE_IP:PORT --token-file F`, run as a subprocess of
a detached Ray actor pinned to its node (NodeAffinitySchedulingStrategy, soft=False) that
takes no CPU. The agents' addresses are printed one per line, ready for `--hostfile`:

    python3 hangscope_ray_agents.py --token-file /shared/hangscope/token > agents.txt
    hangscope diagnose --hostfile agents.txt --token-file /shared/hangscope/token
    python3 hangscope_ray_agents.py --stop

Running it again reuses the agents that still answer and starts the missing ones (nodes that
joined since). Needs: Ray on this host, connected to the cluster (`ray.init(address="auto")`
or --address), the hangscope binary and the token file at the same paths on every node.
See docs/deploy-ray.md.

Exit: 0 every alive node has an agent (or, with --stop, every agent was stopped), 1 some node
failed (the others are still printed), 2 bad usage.
"""

import argparse
import collections
import shutil
import subprocess
import sys
import threading
import time

NAME_PREFIX = "hangscope-agent-"


def _with_parent_death_signal(argv):
    """argv run so that the agent gets SIGTERM when the actor's worker dies (ray.kill sends
    SIGKILL, which the actor cannot catch): util-linux's setpriv --pdeathsig. Not a Popen
    preexec_fn, which is unsafe in Ray's multi-threaded worker."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return argv
    probe = subprocess.run([setpriv, "--pdeathsig", "TERM", "true"], capture_output=True)
    return [setpriv, "--pdeathsig", "TERM", "--"] + argv if probe.returncode == 0 else argv


def format_address(host, port):
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class HangscopeAgent:
    """The actor: owns one `hangscope collect` subprocess on its node."""

    def __init__(self, hangscope, host, port, token_file, extra_args, startup_timeout=20.0):
        self._listen = format_address(host, port)
        argv = [hangscope, "collect", "--listen", self._listen]
        if token_file:
            argv += ["--token-file", token_file]
        argv += list(extra_args)
        self._address = None
        self._error = None
        self._stderr_tail = collections.deque(maxlen=5)
        ready = threading.Event()
        # stdout: the agent's "listening on HOST:PORT" line. stderr: its log. Both are read
        # here for as long as it runs (a full pipe would block it) and copied to this worker's
        # own stdout/stderr, which Ray keeps in the actor's worker-*.out/.err logs.
        self._proc = subprocess.Popen(
            _with_parent_death_signal(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

        def read_stdout():
            for line in self._proc.stdout:
                line = line.strip()
                if line.startswith("listening on ") and self._address is None:
                    port_text = line.rsplit(":", 1)[-1]
                    self._address = format_address(host, port_text)
                    ready.set()
                print(line, flush=True)
            ready.set()

        def read_stderr():
            for line in self._proc.stderr:
                self._stderr_tail.append(line.strip())
                print(line, end="", file=sys.stderr, flush=True)

        threading.Thread(target=read_stdout, daemon=True).start()
        threading.Thread(target=read_stderr, daemon=True).start()
        ready.wait(startup_timeout)
        if self._address is None:
            try:
                code = self._proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                code = None
            if code is None:
                self._error = f"no 'listening on' line within {startup_timeout:.0f} s"
                self._stop_process()
            else:
                time.sleep(0.1)  # let read_stderr take the last lines
                said = " / ".join(self._stderr_tail) or "no message"
                self._error = f"`hangscope collect --listen {self._listen}` exited {code}: {said}"

    def address(self):
        """HOST:PORT of the agent, or raises why there is none."""
        if self._address is None:
            raise RuntimeError(self._error or "the agent did not start")
        if self._proc.poll() is not None:
            raise RuntimeError(f"the agent on {self._listen} exited {self._proc.returncode}")
        return self._address

    def pid(self):
        return self._proc.pid

    def _stop_process(self):
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        return self._proc.returncode

    def stop(self):
        """Stops the agent (SIGTERM: it shuts down cleanly); returns its exit code."""
        return self._stop_process()


def log(message):
    print(f"hangscope_ray_agents: {message}", file=sys.stderr, flush=True)


def parse_arguments(argv):
    parser = argparse.ArgumentParser(
        description="Start (or --stop) a hangscope agent on every alive Ray node and print "
        "their addresses, one per line (for `hangscope diagnose --hostfile`).",
        epilog="Anything after `--` is passed to `hangscope collect` (e.g. --log GLOB).",
    )
    parser.add_argument("--address", default="auto", help="Ray cluster address (default: auto)")
    parser.add_argument("--namespace", default="hangscope",
                        help="Ray namespace of the agent actors (default: hangscope)")
    parser.add_argument("--hangscope", default="/usr/bin/hangscope",
                        help="hangscope binary on every node (default: /usr/bin/hangscope)")
    parser.add_argument("--port", type=int, default=7447, help="agent port (default: 7447)")
    parser.add_argument("--token-file",
                        help="token file, at this path on every node (required unless --insecure)")
    parser.add_argument("--insecure", action="store_true",
                        help="agents without a token (pass --insecure to hangscope collect)")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds to wait for every agent to listen (default: 60)")
    parser.add_argument("--stop", action="store_true", help="stop the agents started before")
    parser.add_argument("collect_args", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not args.stop and not args.token_file and not args.insecure:
        parser.error("--token-file is required (or --insecure): agents listen on node addresses")
    if not 0 < args.port < 65536:
        parser.error(f"--port {args.port}: expected 1-65535")
    if args.insecure:
        args.collect_args = ["--insecure"] + args.collect_args
    return args


def named_agents(ray, namespace):
    """Names of the agent actors in NAMESPACE (alive or being created)."""
    names = []
    for entry in ray.util.list_named_actors(all_namespaces=True):
        if entry.get("namespace") == namespace and entry.get("name", "").startswith(NAME_PREFIX):
            names.append(entry["name"])
    return sorted(names)


def stop_agents(ray, namespace, timeout):
    failed = 0
    names = named_agents(ray, namespace)
    if not names:
        log(f"no agent actors in namespace {namespace}")
    for name in names:
        try:
            actor = ray.get_actor(name, namespace=namespace)
        except ValueError:
            continue  # gone meanwhile
        try:
            code = ray.get(actor.stop.remote(), timeout=timeout)
            log(f"stopped {name} (agent exit code {code})")
        except Exception as e:  # the actor died with its node, or its agent never started
            log(f"{name}: {type(e).__name__}: {e}; killing the actor")
        try:
            ray.kill(actor, no_restart=True)
        except Exception as e:
            failed += 1
            log(f"{name}: cannot kill the actor: {e}")
    return 1 if failed else 0


def start_agents(ray, nodes, args):
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    agent_class = ray.remote(HangscopeAgent)
    pending = []  # (node, actor, ref)
    for node in nodes:
        node_id, ip = node["NodeID"], node["NodeManagerAddress"]
        name = NAME_PREFIX + node_id
        actor = None
        try:
            actor = ray.get_actor(name, namespace=args.namespace)
        except ValueError:
            pass
        if actor is not None:
            try:  # reuse an agent that still answers
                ray.get(actor.address.remote(), timeout=args.timeout)
            except Exception as e:
                log(f"node {ip}: replacing its agent actor ({type(e).__name__}: {e})")
                try:
                    ray.get(actor.stop.remote(), timeout=15)
                except Exception:
                    pass
                ray.kill(actor, no_restart=True)
                actor = None
        if actor is None:
            actor = agent_class.options(
                name=name,
                namespace=args.namespace,
                lifetime="detached",  # outlives this script, until --stop
                num_cpus=0,  # never takes a CPU from the job
                max_restarts=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=False),
            ).remote(args.hangscope, ip, args.port, args.token_file, args.collect_args)
        pending.append((node, actor, actor.address.remote()))

    addresses, failed = [], 0
    deadline = time.monotonic() + args.timeout
    for node, actor, ref in pending:
        ip = node["NodeManagerAddress"]
        try:
            addresses.append(ray.get(ref, timeout=max(1.0, deadline - time.monotonic())))
        except Exception as e:
            failed += 1
            log(f"node {ip} ({node['NodeID'][:12]}): no agent: {type(e).__name__}: {e}")
            try:
                ray.kill(actor, no_restart=True)
            except Exception:
                pass
    for address in addresses:
        print(address, flush=True)
    log(f"{len(addresses)} of {len(pending)} node(s) have an agent (namespace {args.namespace})")
    return 1 if failed or not addresses else 0


def main(argv):
    args = parse_arguments(argv)
    try:
        import ray
        import ray.util
    except ImportError:
        log("cannot import ray: run this where Ray is installed (the cluster's Python)")
        return 1
    ray.init(address=args.address, namespace=args.namespace, log_to_driver=False)
    try:
        if args.stop:
            return stop_agents(ray, args.namespace, args.timeout)
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        if not nodes:
            log("the cluster has no alive node")
            return 1
        return start_agents(ray, nodes, args)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
