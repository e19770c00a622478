#!/usr/bin/python3
"""hangscope's benchmarks against the peers on this machine, in one run; writes the results
(with the ratios from this run) to docs/performance.md. Run through tools/bench/run.sh.

  capture   one hung gloo rank and a 64-thread Python process: `hangscope dump` (native +
            Python) against `eu-stack -p` (native only), gdb `thread apply all bt` and gdb
            `thread apply all py-bt` (python3.11-dbg's extension); median wall time.
  pause     the longest stop of a target thread, measured inside the target (a thread that
            timestamps a tight loop, tools/bench/pause_target.c) and as hangscope reports it,
            for 10, 100 and 1,000 threads; Python-only capture (nothing stopped).
  node      8 real gloo ranks captured in one node capture (collect --once and an agent call);
            bytes per rank of the binary snapshot.
  scale     diagnose of synthetic jobs made from that real capture (tools/bench/
            make_scale_snapshots.py): 4,096 ranks on 512 nodes, 32,768 on 4,096 and 131,072 on
            16,384, from JSON files, from binary files, and through replay agents with one
            loopback port (and connection) per simulated node, each sample taken when it is
            due; wall time, peak memory, the fan-out's times and the spread of the nodes'
            sample 0 (issue 36).

Every process the benchmark starts is stopped at the end, also on failure.
"""
import argparse
import json
import os
import platform
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCENARIO = os.path.join(REPO, "tools", "repro", "gloo_barrier_hang.py")
PYTHON = "/usr/bin/python3"

THREADS_PY = """
import threading, time
def idle_worker(i):
    while True:
        time.sleep(1000)
for i in range(63):
    threading.Thread(target=idle_worker, args=(i,), daemon=True).start()
print("ready", flush=True)
time.sleep(100000)
"""


class Processes:
    """Every process started here, killed (with its group) at the end."""

    def __init__(self):
        self.started = []

    def start(self, argv, **kwargs):
        p = subprocess.Popen(argv, start_new_session=True, **kwargs)
        self.started.append(p)
        return p

    def stop_all(self):
        for p in self.started:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for p in self.started:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass


def wall(argv, **kwargs):
    """Runs argv; returns (seconds, the completed process, None)."""
    start = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, **kwargs)
    return time.perf_counter() - start, p, None


LAST_CPU_S = None  # user + system time of the last peak_rss_run


def peak_rss_run(argv, **kwargs):
    """Runs argv under /usr/bin/time to get its own peak RSS (KiB) and wall time (s); its CPU
    time (user + system) is left in LAST_CPU_S."""
    global LAST_CPU_S
    start = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%M %U %S"] + argv, capture_output=True, **kwargs)
    seconds = time.perf_counter() - start
    rss, user, system = p.stderr.decode().strip().splitlines()[-1].split()
    LAST_CPU_S = float(user) + float(system)
    return seconds, p, int(rss)


def median_time(argv, runs, all_times=None):
    """The median wall time of `runs` runs of argv and the last run's result; each run's time
    is appended to `all_times` when given (the spread)."""
    times = []
    last = None
    for _ in range(runs):
        seconds, last, _ = wall(argv)
        times.append(seconds)
    if all_times is not None:
        all_times.extend(times)
    return statistics.median(times), last


def pin_to_one_cpu(pid, cpu=0):
    """Pins every thread of `pid` to one CPU (issue 36's method: the target on one CPU, so a
    capture's cost is not spread by where the target's threads happen to run)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            os.sched_setaffinity(int(tid), {cpu})
        except OSError:
            pass  # a thread that ended meanwhile


def wait_for_lines(proc, pattern, count, timeout):
    """Reads proc's stdout until `count` lines match; returns the matches."""
    found = []
    deadline = time.time() + timeout
    regex = re.compile(pattern)
    while len(found) < count and time.time() < deadline:
        line = proc.stdout.readline().decode(errors="replace")
        if not line:
            break
        m = regex.search(line)
        if m:
            found.append(m)
    if len(found) < count:
        raise RuntimeError(f"only {len(found)} of {count} lines matching {pattern!r}")
    return found


def start_gloo_job(procs, world, diverged):
    job = procs.start([PYTHON, SCENARIO, "--scenario", "store-wait", "--world-size", str(world),
                       "--diverged-rank", str(diverged), "--timeout", "1800"],
                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    matches = wait_for_lines(job, r"^rank (\d+) pid (\d+) (waiting|diverged)", world, 240)
    time.sleep(3)  # announced before the blocking call: let them reach it
    return {int(m.group(1)): int(m.group(2)) for m in matches}


def ticks(pid):
    """utime + stime of a process, in clock ticks (/proc/PID/stat fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def stopped_threads(pids):
    """Threads of `pids` in a stop (state t or T) right now."""
    found = []
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state in ("t", "T"):
                found.append(int(tid))
    return found


# --- watch ------------------------------------------------------------------------------------

def bench_watch(procs, args, results, rhythm, seconds):
    """The agent's own CPU while `hangscope watch` observes a node of 8 real gloo ranks for
    `seconds` (poll 2 s), and the watcher's; the ranks' threads are sampled meanwhile: none may
    ever be in a ptrace stop. `rhythm`: "hung" (store-wait: seven ranks in a barrier) or
    "busy" (an all-reduce every 20 ms on every rank)."""
    if rhythm == "hung":
        ranks = start_gloo_job(procs, 8, 5)
    else:
        env = dict(os.environ, HANGSCOPE_STEP_SECONDS="0.02")
        job = procs.start([PYTHON, SCENARIO, "--scenario", "allreduce-loop", "--world-size", "8"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        matches = wait_for_lines(job, r"^rank (\d+) pid (\d+) progressing", 8, 240)
        ranks = {int(m.group(1)): int(m.group(2)) for m in matches}
    pid_args = []
    for pid in ranks.values():
        pid_args += ["--pid", str(pid)]
    agent = procs.start([HANGSCOPE, "collect", "--listen", "127.0.0.1:0"] + pid_args,
                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    address = wait_for_lines(agent, r"^listening on (\S+)", 1, 30)[0].group(1)
    out = tempfile.mkdtemp(prefix="hangscope-bench-watch-")
    watcher = procs.start([HANGSCOPE, "watch", "--agents", address, "--poll", "2s", "--after",
                           "30m", "--quiet", "-o", out],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(10)  # the first observation describes the processes once: not the steady cost
    agent_before, watch_before, began = ticks(agent.pid), ticks(watcher.pid), time.time()
    stops = 0
    while time.time() - began < seconds:
        stops += len(stopped_threads(ranks.values()))
        time.sleep(0.2)
    elapsed = time.time() - began
    agent_ticks, watch_ticks = ticks(agent.pid) - agent_before, ticks(watcher.pid) - watch_before
    hz = os.sysconf("SC_CLK_TCK")
    os.killpg(watcher.pid, signal.SIGTERM)
    os.killpg(agent.pid, signal.SIGKILL)
    shutil.rmtree(out, ignore_errors=True)
    return {"ranks": len(ranks), "seconds": round(elapsed), "poll_s": 2,
            "agent_core_pct": 100.0 * agent_ticks / hz / elapsed,
            "watch_core_pct": 100.0 * watch_ticks / hz / elapsed,
            "stopped_thread_samples": stops}


def tool_versions():
    def first_line(argv):
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=10)
            return (out.stdout or out.stderr).splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            return "not available"
    return {
        "hangscope": first_line([HANGSCOPE, "--version"]),
        "eu-stack": first_line(["eu-stack", "--version"]),
        "gdb": first_line(["gdb", "--version"]),
        "kernel": platform.release(),
        "cpus": str(os.cpu_count()),
    }


# --- capture ----------------------------------------------------------------------------------

def bench_capture(procs, args, results):
    ranks = start_gloo_job(procs, 2, 1)
    py64 = procs.start([PYTHON, "-c", THREADS_PY], stdout=subprocess.PIPE)
    wait_for_lines(py64, r"^ready", 1, 30)
    targets = {"hung gloo rank": ranks[0], "64-thread Python process": py64.pid}
    rows = {}
    for name, pid in targets.items():
        pin_to_one_cpu(pid)
        threads = len(os.listdir(f"/proc/{pid}/task"))
        row = {"threads": threads, "pinned_cpu": 0, "all": {}}
        # hangscope and eu-stack take turns, run by run: a machine whose speed drifts over a
        # minute (this VM's does, by a third) moves both sides of the ratio alike.
        commands = {"hangscope": [HANGSCOPE, "dump", "--pid", str(pid)],
                    "hangscope_native": [HANGSCOPE, "dump", "--pid", str(pid), "--native-only"]}
        if shutil.which("eu-stack"):
            commands["eu-stack"] = ["eu-stack", "-p", str(pid)]
        last = {}
        for _ in range(args.runs):
            for key, argv in commands.items():
                seconds, last[key], _ = wall(argv)
                row["all"].setdefault(key, []).append(seconds)
        for key in commands:
            row[key] = statistics.median(row["all"][key])
        out = last["hangscope"]
        row["hangscope_ok"] = out.returncode == 0 and b"[py]" in out.stdout
        if shutil.which("gdb"):
            gdb = ["gdb", "-nx", "-p", str(pid), "-batch", "-iex", "set auto-load safe-path /"]
            seconds, out = median_time(gdb + ["-ex", "thread apply all bt"], args.gdb_runs,
                                       row["all"].setdefault("gdb bt", []))
            row["gdb bt"] = seconds
            seconds, out = median_time(
                gdb + ["-iex", "source /usr/share/gdb/auto-load/usr/bin/python3.11-gdb.py",
                       "-ex", "thread apply all py-bt"], args.gdb_runs,
                row["all"].setdefault("gdb py-bt", []))
            row["gdb py-bt"] = seconds
            row["py-bt_ok"] = b"File " in out.stdout
        rows[name] = row
    results["capture"] = rows


# --- pause ------------------------------------------------------------------------------------

def bench_pause(procs, args, results, workdir):
    binary = os.path.join(workdir, "pause_target")
    subprocess.run(["cc", "-O2", "-pthread", "-o", binary,
                    os.path.join(REPO, "tools", "bench", "pause_target.c")], check=True)
    rows = {}
    for threads in (10, 100, 1000):
        target = procs.start([binary, str(threads)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE)
        wait_for_lines(target, r"^ready", 1, 30)

        def ask(command):
            target.stdin.write((command + "\n").encode())
            target.stdin.flush()
            return target.stdout.readline().decode().strip()

        inside, reported, baseline, walls = [], [], [], []
        for _ in range(args.runs):
            ask("reset")
            time.sleep(0.05)
            baseline.append(int(ask("report")))
            ask("reset")
            seconds, out, _ = wall([HANGSCOPE, "dump", "--pid", str(target.pid), "--json"])
            inside.append(int(ask("report")))
            walls.append(seconds)
            reported.append(json.loads(out.stdout)["max_paused_us"])
        rows[threads] = {"inside_median_us": statistics.median(inside),
                         "inside_max_us": max(inside),
                         "reported_median_us": statistics.median(reported),
                         "reported_max_us": max(reported),
                         "baseline_max_us": max(baseline),
                         "wall_s": statistics.median(walls)}
        os.killpg(target.pid, signal.SIGKILL)
    py64 = procs.start([PYTHON, "-c", THREADS_PY], stdout=subprocess.PIPE)
    wait_for_lines(py64, r"^ready", 1, 30)
    _, out, _ = wall([HANGSCOPE, "dump", "--pid", str(py64.pid), "--python-only", "--json"])
    doc = json.loads(out.stdout)
    rows["python-only"] = {"reported_max_us": doc["max_paused_us"],
                           "threads": len(doc["threads"])}
    results["pause"] = rows


# --- node -------------------------------------------------------------------------------------

def bench_node(procs, args, results, workdir):
    ranks = start_gloo_job(procs, 8, 5)
    pid_args = []
    for pid in ranks.values():
        pid_args += ["--pid", str(pid)]
    captures = []
    for i in range(args.runs):
        path = os.path.join(workdir, f"node-{i}.json")
        subprocess.run([HANGSCOPE, "collect", "--once", "-o", path, "--samples", "3",
                        "--interval", "300ms"] + pid_args, check=True, capture_output=True)
        with open(path) as f:
            captures += [int(s["capture_ns"]) / 1e6 for s in json.load(f)["snapshots"]]
    real = os.path.join(workdir, "real8.json")
    subprocess.run([HANGSCOPE, "collect", "--once", "-o", real] + pid_args, check=True,
                   capture_output=True)
    binary = os.path.join(workdir, "real8.pb")
    subprocess.run([HANGSCOPE, "collect", "--once", "-o", binary] + pid_args, check=True,
                   capture_output=True)
    # Through an agent: one Capture call of 3 samples, as diagnose makes it.
    agent = procs.start([HANGSCOPE, "collect", "--listen", "127.0.0.1:0"] + pid_args,
                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    address = wait_for_lines(agent, r"^listening on (\S+)", 1, 30)[0].group(1)
    bundle = os.path.join(workdir, "agent-bundle")
    subprocess.run([HANGSCOPE, "diagnose", "--agents", address, "--samples", "3",
                    "--interval", "300ms", "--quiet", "-o", bundle], capture_output=True)
    agent_captures = []
    for name in os.listdir(os.path.join(bundle, "snapshots")):
        with open(os.path.join(bundle, "snapshots", name)) as f:
            agent_captures += [int(s["capture_ns"]) / 1e6 for s in json.load(f)["snapshots"]]
    os.killpg(agent.pid, signal.SIGKILL)
    results["node"] = {"ranks": len(ranks),
                       "collect_median_ms": statistics.median(captures),
                       "collect_max_ms": max(captures),
                       "agent_median_ms": statistics.median(agent_captures),
                       "bytes_per_rank": os.path.getsize(binary) / len(ranks)}
    return real


# --- scale ------------------------------------------------------------------------------------

# The capture goals (issue 36), per target: hangscope dump at most this fraction of eu-stack's
# time, gdb py-bt at least this many times hangscope's.
CAPTURE_GOALS = {"hung gloo rank": (0.25, 150), "64-thread Python process": (0.25, 100)}
NODE_CAPTURE_GOAL_MS = 100

# The fan-out's goals (issue 36) at 131,072 ranks, and the linear-growth check: the time per rank
# present at the largest size at most this many times its value at the next smaller one.
SCALE_LIMITS = {4096: (2.0, 1 << 30), 32768: (15.0, 1 << 30), 131072: (30.0, 2 << 30)}
LINEAR_FACTOR = 1.3
# The bound on when nodes take sample 0: every node within this of the others (clock offsets
# applied), the head's warning threshold (src/sources/agents.cpp, kLateSample).
SAMPLE_SPREAD_BOUND_MS = 100


def varint(data, i):
    value = shift = 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, i


def proto_fields(data):
    """(field number, value) of one protobuf message: ints for varints, bytes otherwise."""
    i = 0
    while i < len(data):
        key, i = varint(data, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, i = varint(data, i)
        elif wire == 2:
            size, i = varint(data, i)
            value, i = data[i:i + size], i + size
        elif wire == 1:
            value, i = data[i:i + 8], i + 8
        elif wire == 5:
            value, i = data[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {wire}")
        yield field, value


def snapshot_times(path):
    """(sample_index, capture_unix_ns) of every snapshot of a bundle's snapshot file (.pb:
    SnapshotFile, field 1 the snapshots; in each, field 5 capture_unix_ns, field 7 sample_index;
    else protobuf's JSON mapping). Read without protobuf's Python module."""
    if path.endswith(".json"):
        with open(path) as f:
            return [(int(s.get("sample_index", 0)), int(s["capture_unix_ns"]))
                    for s in json.load(f)["snapshots"]]
    with open(path, "rb") as f:
        data = f.read()
    times = []
    for field, snapshot in proto_fields(data):
        if field != 1:
            continue
        at = index = 0
        for inner, value in proto_fields(snapshot):
            if inner == 5:
                at = value - (1 << 64) if value >= 1 << 63 else value
            elif inner == 7:
                index = value
        times.append((index, at))
    return times


def sample_spread(bundle):
    """When each node of an agents' bundle took sample 0: the spread across nodes on the
    coordinator's clock (each node's capture time less its clock offset from nodes.json), and
    raw (the nodes' own clocks: one machine here, so the true spread)."""
    with open(os.path.join(bundle, "nodes.json")) as f:
        nodes = json.load(f)
    corrected, raw = [], []
    for node in nodes:
        if node["status"] != "ok":
            continue
        base = os.path.join(bundle, "snapshots", node["name"])
        path = base + ".pb" if os.path.exists(base + ".pb") else base + ".json"
        first = [at for index, at in snapshot_times(path) if index == 0]
        if first:
            raw.append(first[0])
            corrected.append(first[0] - int(node["clock_offset_ns"]))
    if not raw:
        return None
    return {"nodes": len(raw),
            "spread_ms": (max(corrected) - min(corrected)) / 1e6,
            "raw_spread_ms": (max(raw) - min(raw)) / 1e6,
            "offset_abs_max_ms": max(abs(int(n["clock_offset_ns"])) for n in nodes
                                     if n["status"] == "ok") / 1e6}


def diagnose_files(files, out_dir):
    seconds, p, rss = peak_rss_run([HANGSCOPE, "diagnose", "--quiet", "-o", out_dir] + files)
    with open(os.path.join(out_dir, "report.json")) as f:
        report = json.load(f)
    return seconds, rss, report


def free_port_base(count):
    """A first port of `count` consecutive free loopback ports, all below the kernel's ephemeral
    range (a client is never given one of them as its own port)."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        ephemeral = int(f.read().split()[0])
    import socket
    for base in range(ephemeral - count - 256, 1023, -(count + 97)):
        held = []
        try:
            for port in range(base, base + count):
                s = socket.socket()
                held.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
    raise RuntimeError(f"no {count} free loopback ports below {ephemeral}")


def start_replays(procs, files):
    """`collect --replay` of every file from one port up: as many nodes per process as its
    descriptor limit holds (a listener and a connection each, the hard limit here raised to
    only so far: RLIMIT_NOFILE), the fewest processes. Returns the nodes' addresses and the
    processes."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    per_process = max(1, (hard - 256) // 2)
    base = free_port_base(len(files))
    replays = []
    for first in range(0, len(files), per_process):
        chunk = files[first:first + per_process]
        replays.append(procs.start([HANGSCOPE, "collect", "--listen", f"127.0.0.1:{base + first}",
                                    "--replay"] + chunk,
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL))
    for replay in replays:
        wait_for_lines(replay, r"^listening on", 1, 600)
    return [f"127.0.0.1:{base + i}" for i in range(len(files))], replays


# What diagnose says of its fan-out on stderr (src/sources/agents.cpp).
FANOUT_LINE = re.compile(r"sample 0 set (\d+) ms ahead for (\d+) node\(s\) \(clocks read in (\d+) "
                         r"ms; every request sent in (\d+) ms\)")
LATE_LINE = re.compile(r"(\d+) node\(s\) took sample 0 more than")


def diagnose_agents(procs, files, workdir, tag):
    addresses, replays = start_replays(procs, files)
    hostfile = os.path.join(workdir, f"hosts-{tag}")
    with open(hostfile, "w") as f:
        f.write("\n".join(addresses) + "\n")
    out_dir = os.path.join(workdir, f"b-agents-{tag}")
    # The replays' own CPU meanwhile: on this one machine the stand-ins for 16,384 agents share
    # its cores with diagnose (real agents would work on their own nodes).
    replay_ticks = sum(ticks(r.pid) for r in replays)
    seconds, p, rss = peak_rss_run([HANGSCOPE, "diagnose", "--hostfile", hostfile,
                                    "--samples", "1", "-o", out_dir])
    replay_cpu_s = (sum(ticks(r.pid) for r in replays) - replay_ticks) / os.sysconf("SC_CLK_TCK")
    for replay in replays:
        os.killpg(replay.pid, signal.SIGKILL)
        replay.wait()
    stderr = p.stderr.decode(errors="replace")
    fanout = FANOUT_LINE.search(stderr)
    late = LATE_LINE.search(stderr)
    with open(os.path.join(out_dir, "report.json")) as f:
        report = json.load(f)
    row = {"s": seconds, "rss_kib": rss, "replay_cpu_s": replay_cpu_s, "cpu_s": LAST_CPU_S,
           "ok_nodes": sum(1 for n in report["nodes"] if n["status"] == "ok"),
           "report": report, "spread": sample_spread(out_dir),
           "late_nodes": int(late.group(1)) if late else 0}
    if fanout:
        row.update({"lead_ms": int(fanout.group(1)), "clocks_ms": int(fanout.group(3)),
                    "sent_ms": int(fanout.group(4))})
    shutil.rmtree(out_dir, ignore_errors=True)
    return row


def named(report, diverged):
    return bool(report["verdicts"]) and report["verdicts"][0].get("diverged_ranks") == [diverged]


def median_of(rows, key):
    values = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(values) if values else None


def bench_scale(procs, args, results, workdir, real):
    rows = {}
    for nodes in args.scale_nodes:
        ranks = nodes * 8
        diverged = ranks // 3
        gen = os.path.join(workdir, f"scale-{nodes}")
        subprocess.run([PYTHON, os.path.join(REPO, "tools", "bench", "make_scale_snapshots.py"),
                        real, gen, str(nodes), "8", str(diverged)], check=True)
        files = sorted(os.path.join(gen, n) for n in os.listdir(gen))
        row = {"ranks": ranks, "nodes": nodes, "runs": args.scale_runs}
        json_runs, pb_runs, agent_runs = [], [], []
        pb_files = []
        loads = []
        for run in range(args.scale_runs):
            loads.append(os.getloadavg()[0])  # other work on the machine, as each run began
            out = os.path.join(workdir, f"b-json-{nodes}")
            shutil.rmtree(out, ignore_errors=True)
            seconds, rss, report = diagnose_files(files, out)
            json_runs.append({"s": seconds, "rss_kib": rss, "cpu_s": LAST_CPU_S,
                              "named": named(report, diverged)})
            # The bundle keeps binary copies of the snapshots (beyond 64 nodes): the binary input.
            pb_dir = os.path.join(workdir, f"pb-{nodes}")
            if not pb_files:
                shutil.copytree(os.path.join(out, "snapshots"), pb_dir)
                pb_files = sorted(os.path.join(pb_dir, n) for n in os.listdir(pb_dir))
            shutil.rmtree(out, ignore_errors=True)
            out = os.path.join(workdir, f"b-pb-{nodes}")
            seconds, rss, report = diagnose_files(pb_files, out)
            pb_runs.append({"s": seconds, "rss_kib": rss, "cpu_s": LAST_CPU_S,
                            "named": named(report, diverged)})
            shutil.rmtree(out, ignore_errors=True)
            # Through agents: `collect --replay` serves each node on a port of its own, and
            # diagnose asks every one, one connection each.
            agents = diagnose_agents(procs, pb_files, workdir, f"{nodes}-{run}")
            agents["named"] = named(agents.pop("report"), diverged)
            agent_runs.append(agents)
            print(f"scale {ranks} run {run + 1}: JSON {json_runs[-1]['s']:.1f} s, binary "
                  f"{pb_runs[-1]['s']:.1f} s, agents {agents['s']:.1f} s "
                  f"({agents['ok_nodes']}/{nodes} ok, spread {agents['spread']})", flush=True)
        row["wire_bytes_per_rank"] = sum(os.path.getsize(f) for f in pb_files) / ranks
        row["load_average"] = [round(v, 1) for v in loads]
        for name, runs in (("json", json_runs), ("pb", pb_runs), ("agents", agent_runs)):
            row[f"{name}_s"] = median_of(runs, "s")
            row[f"{name}_s_all"] = [round(r["s"], 2) for r in runs]
            row[f"{name}_cpu_s_all"] = [round(r["cpu_s"], 2) for r in runs]
            row[f"{name}_rss_kib"] = max(r["rss_kib"] for r in runs)
            row[f"{name}_named"] = all(r["named"] for r in runs)
        row["agents_ok_nodes"] = min(r["ok_nodes"] for r in agent_runs)
        row["agents_late_nodes"] = max(r["late_nodes"] for r in agent_runs)
        for key in ("lead_ms", "clocks_ms", "sent_ms", "replay_cpu_s"):
            row[f"agents_{key}"] = [r.get(key) for r in agent_runs]
        spreads = [r["spread"] for r in agent_runs if r["spread"]]
        row["agents_spread_ms"] = [round(s["spread_ms"], 1) for s in spreads]
        row["agents_raw_spread_ms"] = [round(s["raw_spread_ms"], 1) for s in spreads]
        row["agents_offset_abs_max_ms"] = max((s["offset_abs_max_ms"] for s in spreads),
                                              default=None)
        rows[ranks] = row
        shutil.rmtree(gen, ignore_errors=True)
        shutil.rmtree(os.path.join(workdir, f"pb-{nodes}"), ignore_errors=True)
    results["scale"] = rows


# --- report -----------------------------------------------------------------------------------

def ms(seconds):
    return f"{seconds * 1000:.0f} ms" if seconds < 10 else f"{seconds:.1f} s"


def verdict(ok):
    return "met" if ok else "**missed**"


def spread_of(values, unit=ms):
    """A median, with the runs' range when there were several."""
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    middle = unit(statistics.median(values))
    return middle if len(values) == 1 else f"{middle} ({unit(min(values))}-{unit(max(values))})"


def scale_markdown(scale):
    lines = ["## Diagnose at scale", "",
             "Synthetic jobs made from the real 8-rank capture above "
             "(tools/bench/make_scale_snapshots.py: every rank a renumbered copy of a real "
             "waiting rank, one of the real diverged rank), 8 ranks per node. Whole "
             "`diagnose` wall time (read, analysis, rules, bundle and reports written) and "
             "its peak RSS; with several runs, the median and (the range). *Agents*: "
             "`collect --replay` serves each node's recorded snapshot on its own loopback "
             "port below the ephemeral range (as many nodes per process as RLIMIT_NOFILE "
             "holds: a listener and a connection each), taking each sample when it is due; "
             "diagnose connects to every node and asks for 1 sample.", "",
             "| ranks | nodes | JSON files | binary files | agents | diagnose's CPU, user + "
             "system (JSON / binary / agents) | peak RSS (JSON / binary / agents) | bytes per "
             "rank | diverged rank named | target |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for ranks, r in scale.items():
        limit, rss_limit = SCALE_LIMITS.get(int(ranks), (30.0, 2 << 30))
        worst_rss = max(r["json_rss_kib"], r["pb_rss_kib"], r["agents_rss_kib"])
        rss_text = f"{rss_limit >> 30} GiB"
        lines.append(
            f"| {ranks} | {r['nodes']} | {spread_of(r.get('json_s_all', [r['json_s']]))} | "
            f"{spread_of(r.get('pb_s_all', [r['pb_s']]))} | "
            f"{spread_of(r.get('agents_s_all', [r['agents_s']]))} "
            f"({r['agents_ok_nodes']}/{r['nodes']} ok) | "
            f"{' / '.join(spread_of(r.get(k + '_cpu_s_all', [])) for k in ('json', 'pb', 'agents'))} | "
            f"{r['json_rss_kib'] // 1024} / {r['pb_rss_kib'] // 1024} / "
            f"{r['agents_rss_kib'] // 1024} MiB | {r['wire_bytes_per_rank']:.0f} | "
            f"{'yes' if r['json_named'] and r['pb_named'] and r['agents_named'] else 'NO'} | "
            f"< {limit:.0f} s: binary {verdict(r['pb_s'] < limit)}, JSON "
            f"{verdict(r['json_s'] < limit)}, agents {verdict(r['agents_s'] < limit)}; "
            f"< {rss_text}: {verdict(worst_rss * 1024 < rss_limit)} |")
    loads = [f"{ranks}: {', '.join(str(v) for v in r['load_average'])}"
             for ranks, r in scale.items() if r.get("load_average")]
    if loads:
        lines += ["", "The machine's load average (1 min) as each run began, on its "
                  f"{os.cpu_count()} CPUs: " + "; ".join(loads) + " (other users' builds and "
                  "tests: the wall times grow with it, the CPU times much less)."]
    lines.append("")
    fanned = {k: r for k, r in scale.items() if "agents_spread_ms" in r}
    if fanned:
        lines += ["The fan-out through the agents (diagnose's own lines: the clocks read, how far "
                  "ahead sample 0 was set, when the last Capture request was sent; then the "
                  "bundle: each node's sample 0 time less its clock offset, the spread across "
                  "nodes, and the same without the offsets, which on one machine is the true "
                  "spread):", "",
                  "| ranks | nodes | clocks read | sample 0 set ahead | every request sent | "
                  "sample 0 spread, offsets applied | raw spread | largest offset | nodes late > "
                  f"{SAMPLE_SPREAD_BOUND_MS} ms | the replays' CPU meanwhile | target |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for ranks, r in fanned.items():
            spreads = r["agents_spread_ms"]
            on_time = all(sent is not None and lead is not None and sent < lead
                          for sent, lead in zip(r["agents_sent_ms"], r["agents_lead_ms"]))
            within = bool(spreads) and max(spreads) <= SAMPLE_SPREAD_BOUND_MS
            offset = r.get("agents_offset_abs_max_ms")
            lines.append(
                f"| {ranks} | {r['nodes']} | {spread_of([v / 1e3 for v in r['agents_clocks_ms'] if v is not None])} | "
                f"{spread_of([v / 1e3 for v in r['agents_lead_ms'] if v is not None])} | "
                f"{spread_of([v / 1e3 for v in r['agents_sent_ms'] if v is not None])} | "
                f"{spread_of(spreads, lambda v: f'{v:.1f} ms')} | "
                f"{spread_of(r['agents_raw_spread_ms'], lambda v: f'{v:.1f} ms')} | "
                f"{'-' if offset is None else f'{offset:.1f} ms'} | {r['agents_late_nodes']} | "
                f"{spread_of(r.get('agents_replay_cpu_s') or [])} | "
                f"every request before sample 0: {verdict(on_time)}; spread <= "
                f"{SAMPLE_SPREAD_BOUND_MS} ms: {verdict(within)} |")
        lines.append("")
    sizes = sorted(scale, key=int)
    if len(sizes) >= 2:
        big, smaller = sizes[-1], sizes[-2]
        parts = []
        for name, key in (("JSON", "json_s"), ("binary", "pb_s"), ("agents", "agents_s")):
            per_rank = [1e6 * scale[k][key] / int(k) for k in sizes]
            ratio = per_rank[-1] / per_rank[-2]
            parts.append(f"{name} " + " / ".join(f"{v:.0f}" for v in per_rank) +
                         f" us ({ratio:.2f}x: {verdict(ratio <= LINEAR_FACTOR)})")
        lines += ["Linear growth: time per rank present at " +
                  " / ".join(str(k) for k in sizes) + " ranks: " + "; ".join(parts) +
                  f" (target: at {big} ranks at most {LINEAR_FACTOR}x its value at {smaller}).",
                  ""]
    return lines


def goals(results):
    """Every goal of issue 36 this run measured: (goal, figure, met)."""
    out = []
    for name, r in results.get("capture", {}).items():
        eu, pybt = r.get("eu-stack"), r.get("gdb py-bt")
        eu_goal, pybt_goal = CAPTURE_GOALS.get(name, (0.5, 100))
        if eu:
            out.append((f"{name}: hangscope dump <= {eu_goal}x eu-stack",
                        f"{r['hangscope'] / eu:.2f}x ({ms(r['hangscope'])} / {ms(eu)})",
                        r["hangscope"] <= eu * eu_goal))
        if pybt:
            out.append((f"{name}: gdb py-bt >= {pybt_goal}x hangscope dump",
                        f"{pybt / r['hangscope']:.0f}x", pybt >= pybt_goal * r["hangscope"]))
    pause = results.get("pause", {})
    for threads in (10, 100, 1000):
        r = pause.get(threads) or pause.get(str(threads))
        if r:
            limit = 2000 + 30 * (threads - 10)
            out.append((f"worst pause of a thread, {threads} threads: <= {limit} us",
                        f"{r['inside_max_us']} us", r["inside_max_us"] <= limit))
    node = results.get("node")
    if node:
        out.append((f"a node of {node['ranks']} ranks captured in < {NODE_CAPTURE_GOAL_MS} ms",
                    f"{node['collect_median_ms']:.0f} ms",
                    node["collect_median_ms"] < NODE_CAPTURE_GOAL_MS))
    scale = results.get("scale", {})
    for ranks, r in sorted(scale.items(), key=lambda kv: int(kv[0])):
        limit, rss_limit = SCALE_LIMITS.get(int(ranks), (30.0, 2 << 30))
        for name, key in (("files, binary", "pb"), ("files, JSON", "json"), ("agents", "agents")):
            out.append((f"{ranks} ranks from {name}: < {limit:.0f} s", ms(r[f"{key}_s"]),
                        r[f"{key}_s"] < limit))
        worst_rss = max(r["json_rss_kib"], r["pb_rss_kib"], r["agents_rss_kib"])
        out.append((f"{ranks} ranks: peak RSS < {rss_limit >> 30} GiB",
                    f"{worst_rss // 1024} MiB", worst_rss * 1024 < rss_limit))
        spreads = r.get("agents_spread_ms") or []
        if spreads:
            out.append((f"{ranks} ranks: sample 0 of every node within {SAMPLE_SPREAD_BOUND_MS} ms",
                        f"{max(spreads):.1f} ms", max(spreads) <= SAMPLE_SPREAD_BOUND_MS))
    sizes = sorted(scale, key=int)
    if len(sizes) >= 2:
        for name, key in (("binary", "pb_s"), ("JSON", "json_s"), ("agents", "agents_s")):
            per_rank = [scale[k][key] / int(k) for k in sizes[-2:]]
            ratio = per_rank[1] / per_rank[0]
            out.append((f"linear growth ({name}): time per rank at {sizes[-1]} <= "
                        f"{LINEAR_FACTOR}x at {sizes[-2]}", f"{ratio:.2f}x",
                        ratio <= LINEAR_FACTOR))
    for rhythm, r in results.get("watch", {}).items():
        out.append((f"watching a {rhythm} job: agent <= 0.5 % of a core",
                    f"{r['agent_core_pct']:.2f} %", r["agent_core_pct"] <= 0.5))
    return out


def goals_markdown(results):
    rows = goals(results)
    if not rows:
        return []
    missed = sum(1 for _, _, ok in rows if not ok)
    return ["## Goals", "",
            f"{len(rows) - missed} of {len(rows)} met" +
            (f"; {missed} missed (why: the notes below)." if missed else "."), "",
            "| goal | this run | |", "|---|---|---|"] + [
        f"| {goal} | {figure} | {verdict(ok)} |" for goal, figure, ok in rows] + [""]


def write_markdown(results, path):
    v = results["versions"]
    lines = ["# Performance", "",
             "Written by `tools/bench/run.sh` (tools/bench/bench.py) on "
             f"{results['date']}: {v['cpus']} CPUs, Linux {v['kernel']}; {v['hangscope']}; "
             f"{v['eu-stack']}; {v['gdb']}. Every ratio compares tools timed in this same run. "
             "Rerun it to refresh this page.", ""]
    dates = results.get("section_dates", {})
    if len(set(dates.values())) > 1:
        lines += ["Sections from separate runs (`--only`): " +
                  ", ".join(f"{k} {dates[k]}" for k in sorted(dates)) + ".", ""]
    lines += goals_markdown(results)
    cap = results.get("capture", {})
    if cap:
        lines += ["## Capture of one process (median wall time of the whole command)", "",
                  "| target | threads | hangscope dump (native + Python) | hangscope --native-only "
                  "| eu-stack -p (native) | gdb bt (native) | gdb py-bt (Python) | hangscope / "
                  "eu-stack | py-bt / hangscope |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for name, r in cap.items():
            eu = r.get("eu-stack")
            pybt = r.get("gdb py-bt")
            runs = r.get("all", {})

            def timed(key):
                return spread_of(runs.get(key) or ([r[key]] if key in r else []))
            eu_goal, pybt_goal = CAPTURE_GOALS.get(name, (0.5, 100))
            lines.append(
                f"| {name} | {r['threads']} | {timed('hangscope')} | {timed('hangscope_native')} | "
                f"{timed('eu-stack')} | {timed('gdb bt')} | {timed('gdb py-bt')} | "
                f"{r['hangscope'] / eu:.2f} ({verdict(r['hangscope'] <= eu * eu_goal)}: <= "
                f"{eu_goal}) | {pybt / r['hangscope']:.0f}x "
                f"({verdict(pybt >= pybt_goal * r['hangscope'])}: >= {pybt_goal}x) |"
                if eu and pybt else f"| {name} | {r['threads']} | {ms(r['hangscope'])} | peers missing |")
        pinned = any("pinned_cpu" in r for r in cap.values())
        lines += ["", f"Medians of {len(next(iter(cap.values())).get('all', {}).get('hangscope', [])) or '?'} "
                  "runs (gdb: fewer), with (the range); hangscope and eu-stack take turns run by "
                  "run" +
                  ("; each target's threads pinned to CPU 0." if pinned else "."), ""]
    pause = results.get("pause", {})
    if pause:
        lines += ["## Target pause", "",
                  "The longest time one target thread was stopped during one `hangscope dump` "
                  "(stop mode each: up to 8 threads at a time, each released once copied). *Inside*: measured by a thread of the "
                  "target that timestamps a tight loop (its largest gap, which also holds "
                  "scheduler noise: *baseline* is the same gap over 50 ms without any capture). "
                  "*Reported*: `max_paused_us` of the dump, over every thread.", "",
                  "| threads | inside, median | inside, worst | reported, median | reported, worst "
                  "| baseline (no capture), worst | capture wall | target |",
                  "|---|---|---|---|---|---|---|---|"]
        for threads in (10, 100, 1000):
            r = pause.get(threads) or pause.get(str(threads))
            if not r:
                continue
            limit = 2000 + 30 * (threads - 10)
            lines.append(
                f"| {threads} | {r['inside_median_us']} us | {r['inside_max_us']} us | "
                f"{r['reported_median_us']} us | {r['reported_max_us']} us | "
                f"{r['baseline_max_us']} us | {ms(r['wall_s'])} | <= {limit} us (inside, "
                f"worst): {verdict(r['inside_max_us'] <= limit)} |")
        py = pause.get("python-only")
        if py:
            lines += ["", f"Python-only capture (`--python-only`, {py['threads']} threads): "
                          f"`max_paused_us` = {py['reported_max_us']} (nothing is stopped: "
                          f"{verdict(py['reported_max_us'] == 0)})."]
        lines.append("")
    node = results.get("node")
    if node:
        lines += ["## Node capture", "",
                  f"{node['ranks']} real gloo ranks (store-wait scenario) captured in one node "
                  "capture (`capture_ns` of each sample: discovery, identity, facts, stacks of "
                  "every process):", "",
                  f"- `collect --once`: median {node['collect_median_ms']:.0f} ms, worst "
                  f"{node['collect_max_ms']:.0f} ms (target < 100 ms: "
                  f"{verdict(node['collect_median_ms'] < 100)}).",
                  f"- through an agent (one Capture call from `diagnose`): median "
                  f"{node['agent_median_ms']:.0f} ms.",
                  f"- on the wire: {node['bytes_per_rank']:.0f} bytes per rank (binary snapshot "
                  f"of one sample; target < 2048: {verdict(node['bytes_per_rank'] < 2048)}).", ""]
    scale = results.get("scale", {})
    if scale:
        lines += scale_markdown(scale)
    watching = results.get("watch", {})
    if watching:
        lines += ["## Watching", "",
                  "`hangscope watch --agents ADDR --poll 2s` observing one node of 8 real gloo "
                  "ranks through its agent (`collect --pid` of the 8 ranks). CPU is each "
                  "process's utime + stime over the whole window, after a first 10 s (the "
                  "first observation describes each process once). The ranks' threads are "
                  "sampled every 200 ms meanwhile: a thread in a ptrace stop would be counted.", "",
                  "| job | window | agent (one core) | watcher, the head (one core) | threads seen "
                  "stopped | target: agent <= 0.5 % |",
                  "|---|---|---|---|---|---|"]
        for rhythm, r in watching.items():
            lines.append(
                f"| {rhythm} | {r['seconds']} s | {r['agent_core_pct']:.2f} % | "
                f"{r['watch_core_pct']:.2f} % | {r['stopped_thread_samples']} | "
                f"{verdict(r['agent_core_pct'] <= 0.5)} |")
        lines.append("")
    lines += ["## Notes", "", results.get("notes", "").strip(), ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def main():
    global HANGSCOPE
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hangscope", default=os.path.join(REPO, "build", "src", "hangscope"))
    parser.add_argument("--out", default=os.path.join(REPO, "docs", "performance.md"))
    parser.add_argument("--notes", default=os.path.join(REPO, "tools", "bench", "notes.md"),
                        help="analysis text appended to the page (why a target is missed)")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--gdb-runs", type=int, default=3)
    parser.add_argument("--scale-nodes", type=int, nargs="*", default=[512, 4096, 16384])
    parser.add_argument("--scale-runs", type=int, default=1,
                        help="runs of each scale measurement (median and range reported)")
    parser.add_argument("--scale-real", default=None,
                        help="the real 8-rank capture to scale (a `collect --once` JSON file): "
                             "skips the node section's gloo job")
    parser.add_argument("--only", nargs="*",
                        default=["capture", "pause", "node", "scale", "watch"])
    parser.add_argument("--watch-seconds", type=int, default=300,
                        help="the watching window per job rhythm (issue 35: at least 5 minutes)")
    parser.add_argument("--render-only", action="store_true",
                        help="rewrite the page from the last run's .json (after editing notes)")
    args = parser.parse_args()
    HANGSCOPE = args.hangscope
    if args.render_only:
        with open(os.path.splitext(args.out)[0] + ".json") as f:
            results = json.load(f)
        with open(args.notes) as f:
            results["notes"] = f.read()
        write_markdown(results, args.out)
        print(f"wrote {args.out}")
        return
    now = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    results = {}
    json_path = os.path.splitext(args.out)[0] + ".json"
    everything = {"capture", "pause", "node", "scale", "watch"}
    if not everything <= set(args.only) and os.path.exists(json_path):
        # A partial run replaces only its own sections; each section keeps the date it ran, and
        # every ratio inside a section still compares tools timed in that section's run.
        with open(json_path) as f:
            results = json.load(f)
        dates = results.setdefault("section_dates", {})
        for section in everything - set(args.only):
            dates.setdefault(section, results.get("date", "?"))
    results["date"] = now
    results["versions"] = tool_versions()
    for section in args.only:
        results.setdefault("section_dates", {})[section] = now
    if os.path.exists(args.notes):
        with open(args.notes) as f:
            results["notes"] = f.read()
    # One connection per simulated node (diagnose) and a listener and a connection per node
    # (the replays): the soft descriptor limit up to the hard one, for every child.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    procs = Processes()
    workdir = tempfile.mkdtemp(prefix="hangscope-bench-")
    try:
        if "capture" in args.only:
            bench_capture(procs, args, results)
            procs.stop_all()
            print("capture:", json.dumps(results["capture"]), flush=True)
        if "pause" in args.only:
            bench_pause(procs, args, results, workdir)
            procs.stop_all()
            print("pause:", json.dumps(results["pause"]), flush=True)
        if "node" in args.only or ("scale" in args.only and not args.scale_real):
            real = bench_node(procs, args, results, workdir)
            procs.stop_all()
            print("node:", json.dumps(results["node"]), flush=True)
        else:
            real = args.scale_real
        if "scale" in args.only:
            bench_scale(procs, args, results, workdir, real)
            print("scale:", json.dumps(results["scale"]), flush=True)
        if "watch" in args.only:
            results["watch"] = {}
            for rhythm in ("hung", "busy"):
                results["watch"][rhythm] = bench_watch(procs, args, results, rhythm,
                                                       args.watch_seconds)
                procs.stop_all()
                print("watch:", rhythm, json.dumps(results["watch"][rhythm]), flush=True)
    finally:
        procs.stop_all()
        shutil.rmtree(workdir, ignore_errors=True)
    write_markdown(results, args.out)
    with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
        json.dump(results, f, indent=1, default=str)
    for goal, figure, ok in goals(results):
        print(f"goal: {goal}: {figure}: {'met' if ok else 'MISSED'}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    HANGSCOPE = None
    main()
