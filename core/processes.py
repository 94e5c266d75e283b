"""Finding and stopping every process a jetwatch supervisor started, however deep.

Killing a child's process group is not enough: Spark's Python workers move to a group of their
own (pyspark/daemon.py calls setpgid), and a drain started from the dashboard has a session of its
own. What all of them keep is the environment they were started with, so a supervisor marks its
children with a token in `TREE_ENV` and later finds every descendant by reading /proc/*/environ
(Linux; elsewhere nothing is found and only the process groups are signalled).
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

# Not a JETWATCH_* name: child_env() drops those, and the mark must reach grandchildren.
TREE_ENV = "JW_PROCESS_TREE"


def new_tree_token() -> str:
    return uuid.uuid4().hex


def _state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def alive(pid: int) -> bool:
    """Running (a zombie has ended; it only waits for its parent to collect its status)."""
    state = _state(pid)
    return state is not None and state not in ("Z", "X")


def marked(name: str, value: str) -> list[int]:
    """Live processes (other than this one) whose environment holds name=value."""
    needle = f"{name}={value}".encode()
    found = []
    me = os.getpid()
    for entry in Path("/proc").glob("[0-9]*"):
        pid = int(entry.name)
        if pid == me:
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0") and alive(pid):
            found.append(pid)
    return found


def describe(pid: int) -> str:
    try:
        cmd = (Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")).strip()
    except OSError:
        cmd = "?"
    return f"pid {pid}: {cmd[:200]}"


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop_tree(groups: Iterable[int], token: str | None, grace: float) -> list[str]:
    """SIGTERM each process group in `groups` and every process marked with `token`, wait up to
    `grace` seconds for all of them to end, then SIGKILL what is left (and its group). Returns what
    was killed, described. Group leaders that are this process's children must still be reaped by the caller."""
    groups = list(groups)
    for pgid in groups:
        _signal_group(pgid, signal.SIGTERM)
    for pid in marked(TREE_ENV, token) if token else []:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace

    def remaining() -> list[int]:
        left = set(marked(TREE_ENV, token)) if token else set()
        return sorted(left | {g for g in groups if alive(g)})

    left = remaining()
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = remaining()
    killed = [describe(pid) for pid in left]
    for pid in left:
        _signal(pid, signal.SIGKILL)
        _signal_group(pid, signal.SIGKILL)
    return killed
