"""`jetwatch up`: everything in one command, stopped cleanly with Ctrl-C.

With no server given it starts an embedded nats-server and the demo workload; then the
collector, the pipeline on a schedule and the dashboard, each its own process (in its own
session, so Ctrl-C reaches only this supervisor, which stops them in order).
"""

from __future__ import annotations

import argparse
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO
from urllib.parse import urlparse

from jetwatch.core.children import DASHBOARD_SECRETS, NATS_SECRETS, child_env
from jetwatch.core.embedded_server import NatsServer, ServerStartError, free_port
from jetwatch.core.errors import require
from jetwatch.core.processes import TREE_ENV, new_tree_token, stop_tree
from jetwatch.core.settings import Settings
from jetwatch.core.urls import shown_servers
from jetwatch.dashboard import identities
from jetwatch.dashboard.gate import is_loopback, read_only_reason
from jetwatch.store.database import Store, StoreError
from jetwatch.subcommands import PortInUse, check_port_free, dashboard_command


@dataclass
class Child:
    name: str
    proc: subprocess.Popen[bytes]
    log: IO[bytes]


def say(text: str) -> None:
    print(f"jetwatch up: {text}", flush=True)


def reachable(url: str, timeout: float = 3.0) -> bool:
    first = url.split(",")[0].strip()
    parsed = urlparse(first if "://" in first else f"nats://{first}")
    try:
        with socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or 4222), timeout=timeout):
            return True
    except OSError:
        return False


def wait_for_collector(store: Store, timeout: float) -> bool:
    """True once the collector has completed a cycle (so its advisory capture is open)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if store.exists() and store.query("collector_health").shape[0] > 0:
                return True
        except StoreError:
            pass
        time.sleep(0.2)
    return False


def java_available() -> bool:
    return shutil.which("java") is not None


# How long children get to finish their work (the collector its last write, the pipeline its
# run record) after SIGTERM, before everything left is killed.
STOP_GRACE = 20.0


class Supervisor:
    """Starts the parts, each in its own session, all marked with one token in their environment,
    so that stopping finds and ends every descendant: Spark's JVM and Python workers, drains."""

    def __init__(self, settings: Settings, log_dir: Path):
        self.settings = settings
        self.log_dir = log_dir
        self.children: list[Child] = []
        self.stopping = threading.Event()
        self.token = new_tree_token()
        self._lock = threading.Lock()  # spawn and stop never interleave: nothing starts after stop

    def spawn(self, name: str, cmd: list[str], secrets: tuple[str, ...] = ()) -> Child | None:
        """Start a child with the settings in its environment, only the `secrets` it needs, and
        the mark that lets `stop` find everything it starts in turn."""
        with self._lock:
            if self.stopping.is_set():
                return None
            log = open(self.log_dir / f"{name}.log", "ab")  # noqa: SIM115 (the Child holds it while the process writes)
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env={**child_env(self.settings, secrets), TREE_ENV: self.token},
                                    start_new_session=True)
            child = Child(name, proc, log)
            self.children.append(child)
            return child

    def pipeline_loop(self) -> None:
        every = self.settings.pipeline_every
        first = min(60.0, every)  # the first run once there is a minute of data
        if self.stopping.wait(first):
            return
        while not self.stopping.is_set():
            child = self.spawn("pipeline", [sys.executable, "-m", "jetwatch.cli", "pipeline", "run"])  # catches up after an outage
            if child is None:
                return
            while child.proc.poll() is None:
                if self.stopping.wait(1.0):
                    return  # stop() ends and reaps this run
            with self._lock:
                self.children.remove(child)
                child.log.close()
            if self.stopping.wait(every):
                return

    def stop(self, grace: float = STOP_GRACE) -> None:
        """SIGTERM every child's process group and every marked descendant, give them `grace`
        seconds, kill what is left, and reap the children: nothing outlives `up`."""
        with self._lock:
            self.stopping.set()
            children = list(self.children)
        for what in stop_tree([c.proc.pid for c in children], self.token, grace):
            say(f"{what} did not stop within {grace:g}s; killed it")
        for child in children:
            try:
                child.proc.wait(5)
            except subprocess.TimeoutExpired:
                child.proc.kill()
                child.proc.wait(5)
            if not child.log.closed:
                child.log.close()


DEMO_OPERATOR = "demo"


def demo_operator(settings: Settings, data_dir: Path) -> Settings:
    """The embedded demo's own operator, so that its user can try the unpin and drain it shows:
    a fresh password each start, said once here and kept only hashed. Only on a dashboard that
    listens on loopback, and never where operators are configured already."""
    if settings.operators_file or settings.trusted_user_header or not is_loopback(settings.address):
        return settings
    path = data_dir / "demo-operators"
    path.unlink(missing_ok=True)
    password = secrets.token_urlsafe(12)
    identities.add(path, DEMO_OPERATOR, password)
    say(f"demo operator: sign in on the dashboard as {DEMO_OPERATOR!r} with password {password} "
        "(this run's only; --operators-file for your own)")
    return settings.replace(operators_file=str(path))


def up(settings: Settings, demo: bool, pipeline: bool, nats_port: int) -> int:
    require("streamlit", "dashboard", "`jetwatch up` (the dashboard)")
    if pipeline:
        require("pyspark", "pipeline", "`jetwatch up` (the pipeline; --no-pipeline runs without it)")
    data_dir = Path(settings.data_dir)
    log_dir = data_dir / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    if "db" not in settings.values:
        settings = settings.replace(db=str(data_dir / "jetwatch.duckdb"))
    Store(settings.db, lock_timeout=settings.lock_timeout).check()  # a bad --db said before anything starts
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())

    server: NatsServer | None = None
    if not settings.server:
        try:
            server = NatsServer(store_dir=data_dir / "nats", port=nats_port, monitor_port=free_port(),
                                log_path=log_dir / "nats-server.log").start()
        except ServerStartError as exc:
            say(f"could not start the embedded nats-server: {exc}")
            return 1
        settings = settings.replace(server=server.url)
        demo = True
        say(f"embedded nats-server on {server.url} (data in {data_dir / 'nats'})")
        settings = demo_operator(settings, data_dir)
    elif not reachable(settings.server):
        say(f"cannot reach NATS at {shown_servers(settings.server)}: check the URL and that the server runs; "
            "the dashboard still starts and the collector keeps trying")

    if demo:
        settings = settings.replace(demo=True)  # the Fleet says what the demo scripts
    sup = Supervisor(settings, log_dir)
    try:
        sup.spawn("collector", [sys.executable, "-m", "jetwatch.cli", "collect"], NATS_SECRETS)
        if demo:
            # The collector first, so that the demo's very first pins are captured as advisories.
            wait_for_collector(Store(settings.db), timeout=20)
            sup.spawn("demo", [sys.executable, "-m", "jetwatch.demo.workload"], NATS_SECRETS)  # server from the env
            say("demo workload started: pinned, overflow and prioritized consumers with scripted trouble")
        try:
            check_port_free(settings.address, settings.port)
            sup.spawn("dashboard", dashboard_command(settings), DASHBOARD_SECRETS)
            say(f"dashboard: http://{settings.address}:{settings.port}/")
            if read_only_reason(settings):
                say(f"dashboard: {read_only_reason(settings)}")
        except PortInUse as exc:
            say(f"no dashboard: {exc}")
        if pipeline and java_available():
            threading.Thread(target=sup.pipeline_loop, name="pipeline", daemon=True).start()
            say(f"pipeline: every {settings.pipeline_every:g}s on Spark local mode")
        elif pipeline:
            say("no pipeline: Java was not found. Install a Java 17 runtime "
                "(apt-get install -y openjdk-17-jre-headless) to get pin sessions and rollups")
        say(f"logs in {log_dir}; store {settings.db}; Ctrl-C stops everything")
        while not stop.wait(0.5):
            for child in list(sup.children):
                if child.name != "pipeline" and child.proc.poll() is not None and not getattr(child, "reported", False):
                    say(f"{child.name} exited with status {child.proc.returncode}; see {log_dir / (child.name + '.log')}")
                    child.reported = True  # type: ignore[attr-defined]
    finally:
        say("stopping")
        sup.stop()
        if server is not None:
            server.stop()
        say("stopped")
    return 0


def run_up(args: argparse.Namespace, settings: Settings) -> int:
    return up(settings, demo=args.demo, pipeline=not args.no_pipeline, nats_port=args.nats_port)
