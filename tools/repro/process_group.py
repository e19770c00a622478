"""The process group a repro driver leads: its deployment (servers, engine cores, workers,
schedulers) is started in it and killed with it (tools/repro/serving_chain.py,
tools/repro/sglang_serving.py)."""
import os
import signal


def lead_process_group():
    """Makes this process the leader of a new process group; its children are started in it."""
    try:
        os.setpgid(0, 0)
    except PermissionError:
        pass  # already a group (session) leader


def kill_process_group():
    """SIGKILLs every other process of this process group; SIGTERM and SIGINT are ignored from
    now on, so a second signal cannot interrupt it."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    group = os.getpgid(0)
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            if os.getpgid(int(entry)) == group:
                os.kill(int(entry), signal.SIGKILL)
        except OSError:
            pass
