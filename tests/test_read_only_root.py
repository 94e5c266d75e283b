"""The collector and the dashboard on a read-only root filesystem, as the Kubernetes manifests run
them (`readOnlyRootFilesystem: true`): in a mount namespace of their own (`unshare -m`) whose `/`
is remounted read-only and whose only writable place is the data directory (the store volume,
and a tmp standing for the emptyDir). Each must still do its job: the collector turns ready (a cycle
stored), the dashboard serves its page."""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from jetwatch.core.embedded_server import free_port
from tests.helpers import clean_env, one_consumer_stream, status_json, stop_process, wait_until
from tests.test_probes import get

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                       reason="needs root and util-linux's unshare for a mount namespace"),
]


def read_only(command: list[str], data: Path) -> list[str]:
    """`command` in a new mount namespace whose / is read-only but for `data`. Its temporary files
    go to `data` too (TMPDIR), as the pods' go to their /tmp emptyDir: a tmpfs on /tmp here would
    hide a checkout that lives under /tmp."""
    script = (f"mount --make-rprivate / && mount --bind / / && mount -o remount,bind,ro / && "
              f"mount --bind {data} {data} && mount -o remount,bind,rw {data} && "
              f"! touch /.jetwatch-probe 2>/dev/null && exec {shlex.join(command)}")
    return ["unshare", "-m", "sh", "-c", script]


@pytest.fixture
def data() -> Iterator[Path]:
    """The writable data directory, with a tmp of its own."""
    path = Path(__file__).resolve().parent.parent / ".venv" / f"read-only-root-{os.getpid()}"
    (path / "tmp").mkdir(parents=True)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_the_collector_and_the_dashboard_run_on_a_read_only_root(nats_server, data, uid):
    metrics = f"127.0.0.1:{free_port()}"
    port = free_port()
    stream = f"RO_{uid}"
    asyncio.run(one_consumer_stream(nats_server.url, stream, f"ro.{uid}"))
    # The compiled pass's cache where an image keeps it: on the read-only root (it compiles in the process).
    env = clean_env(JETWATCH_DB=str(data / "jetwatch.duckdb"), JETWATCH_DATA_DIR=str(data),
                    NUMBA_CACHE_DIR=str(ROOT / ".venv" / "numba-cache-on-the-image"), PYTHONDONTWRITEBYTECODE="1",
                    TMPDIR=str(data / "tmp"))
    jetwatch = [sys.executable, "-m", "jetwatch.cli"]
    with open(data / "collector.log", "wb") as out:  # the child keeps its own descriptor
        collector = subprocess.Popen(read_only([*jetwatch, "collect", "--server", nats_server.url, "--interval", "1",
                                                "--metrics-address", metrics], data),
                                     env=env, stdout=out, stderr=subprocess.STDOUT)
    with open(data / "dashboard.log", "wb") as out:
        dashboard = subprocess.Popen(read_only([*jetwatch, "dashboard", "--port", str(port)], data),
                                     env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        def ready() -> bool:
            try:
                return get(f"http://{metrics}/readyz")[0] == 200
            except OSError:
                return collector.poll() is not None  # ended: said below

        wait_until(ready, timeout=120, interval=0.5, message="the collector ready on a read-only root")
        assert collector.poll() is None, (data / "collector.log").read_text()[-3000:]

        def serving() -> bool:
            try:
                return get(f"http://127.0.0.1:{port}/_stcore/health")[0] == 200
            except OSError:
                return dashboard.poll() is not None

        wait_until(serving, timeout=120, interval=0.5, message="the dashboard serving on a read-only root")
        assert dashboard.poll() is None, (data / "dashboard.log").read_text()[-3000:]
        assert get(f"http://127.0.0.1:{port}/")[0] == 200
        # Judged there too: the window pass compiled in the process, its cache dir unwritable.
        refused: list[str] = []

        def judged() -> bool:
            try:
                return any(r["stream"] == stream for r in status_json(str(data / "jetwatch.duckdb")))
            except AssertionError as exc:  # a read that waited out the store's lock: asked again
                refused.append(str(exc))
                return False

        try:
            wait_until(judged, timeout=120, interval=1.0, message="the consumer judged on a read-only root")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; status said: {refused[-3:]}; the collector: "
                                 f"{(data / 'collector.log').read_text()[-2000:]}") from None
    finally:
        for proc in (collector, dashboard):
            stop_process(proc)
    text = (data / "collector.log").read_text()
    assert "Read-only file system" not in text and "Traceback" not in text and "failed" not in text, text[-3000:]
    assert collector.returncode == 0, text[-3000:]
