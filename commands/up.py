"""`jetwatch up`: everything in one command, stopped cleanly with Ctrl-C.

With no server given it starts an embedded nats-server and the demo workload; then the
collector, the pipeline on a schedule and the dashboard, each its own process (in its own
session, so Ctrl-C reaches only this supervisor, which stops them in order).
"""

from __future__ import annotations

import argparse
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

from jetwatch.demo.server import NatsServer, ServerStartError, free_port
from jetwatch.subcommands import PortInUse, check_port_free, dashboard_command
from jetwatch.core.children import child_env
from jetwatch.core.settings import Settings
from jetwatch.store.database import Store, StoreError


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


class Supervisor:
    def __init__(self, settings: Settings, log_dir: Path):
        self.settings = settings
        self.log_dir = log_dir
        self.children: list[Child] = []
        self.stopping = threading.Event()

    def spawn(self, name: str, cmd: list[str]) -> Child:
        log = open(self.log_dir / f"{name}.log", "ab")
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=child_env(self.settings), start_new_session=True)
        child = Child(name, proc, log)
        self.children.append(child)
        return child

    def pipeline_loop(self) -> None:
        every = self.settings.pipeline_every
        first = min(60.0, every)  # the first run once there is a minute of data
        if self.stopping.wait(first):
            return
        while not self.stopping.is_set():
            child = self.spawn("pipeline", [sys.executable, "-m", "jetwatch.cli", "pipeline", "run", "--since", "2h"])
            while child.proc.poll() is None:
                if self.stopping.wait(1.0):
                    break
            self.children.remove(child)
            child.log.close()
            if self.stopping.wait(every):
                return

    def stop(self) -> None:
        self.stopping.set()
        for child in reversed(self.children):
            if child.proc.poll() is None:
                child.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 20
        for child in reversed(self.children):
            try:
                child.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                say(f"{child.name} did not stop in time; killing it")
                child.proc.kill()
                child.proc.wait(5)
            child.log.close()


def up(settings: Settings, demo: bool, pipeline: bool, nats_port: int) -> int:
    data_dir = Path(settings.data_dir)
    log_dir = data_dir / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    if "db" not in settings.values:
        settings = settings.replace(db=str(data_dir / "jetwatch.duckdb"))
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
    elif not reachable(settings.server):
        say(f"cannot reach NATS at {settings.server}: check the URL and that the server runs; "
            "the dashboard still starts and the collector keeps trying")

    sup = Supervisor(settings, log_dir)
    try:
        sup.spawn("collector", [sys.executable, "-m", "jetwatch.cli", "collect"])
        if demo:
            # The collector first, so that the demo's very first pins are captured as advisories.
            wait_for_collector(Store(settings.db), timeout=20)
            sup.spawn("demo", [sys.executable, "-m", "jetwatch.demo.workload", "--server", settings.server.split(",")[0]])
            say("demo workload started: pinned, overflow and prioritized consumers with scripted trouble")
        try:
            check_port_free(settings.address, settings.port)
            sup.spawn("dashboard", dashboard_command(settings))
            say(f"dashboard: http://{settings.address}:{settings.port}/")
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
            for child in sup.children:
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
