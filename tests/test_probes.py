"""The collector's /healthz and /readyz as a scheduler meets them, on a real collector (a
subprocess, as deployed) over a real nats-server, with its logs as JSON lines.

Live means the collector's event loop turns: never NATS, never the store (either would turn an
outage jetwatch must report into a restart loop). Ready means a cycle ended and the store took a
write lately: a NATS outage or a hung server leaves it ready and /metrics served (the outage is
what the metrics must show), a store held by another process takes it out, saying why."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from jetwatch.core.embedded_server import NatsServer, free_port
from jetwatch.exporters.probes import LIVE_WITHIN_S, Probes
from tests.helpers import clean_env, stop_process, wait_until


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


class Running:
    """A collector subprocess watching `server`, probed on its metrics address. Readiness is a
    window of 3 intervals + 2 request timeouts + the lock timeout: 17 s here, wide enough for a
    loaded machine's cycles, short enough for a held store to show."""

    def __init__(self, server: NatsServer, tmp_path: Path, *more: str) -> None:
        self.db = str(tmp_path / "jetwatch.duckdb")
        self.base = f"http://127.0.0.1:{free_port()}"
        self.log = tmp_path / "collector.log"
        args = [sys.executable, "-m", "jetwatch.cli", "--log-format", "json", "collect", "--server", server.url,
                "--db", self.db, "--interval", "1", "--lock-timeout", "10", "--request-timeout", "2",
                "--metrics-address", self.base.removeprefix("http://"), "--cluster", "east", *more]
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(args, env=clean_env(), stdout=subprocess.DEVNULL, stderr=out)

    def probe(self, path: str) -> tuple[int, str]:
        return get(self.base + path)

    def ready(self) -> bool:
        try:
            return self.probe("/readyz")[0] == 200
        except OSError:  # not serving yet
            return False

    def stop(self) -> None:
        stop_process(self.proc)


@pytest.fixture
def server(tmp_path) -> Iterator[NatsServer]:
    node = NatsServer(store_dir=tmp_path / "js")
    yield node
    if node.proc is not None and node.proc.poll() is None:
        node.proc.send_signal(signal.SIGCONT)
    node.stop(signal.SIGKILL)


def _answers(collector: Running) -> bool:
    try:
        return collector.probe("/healthz")[0] == 200
    except OSError:
        return False


def _lock(db: str) -> duckdb.DuckDBPyConnection | None:
    """Another process's write lock on the store (the collector opens it for each write only)."""
    try:
        return duckdb.connect(db)
    except duckdb.IOException:
        return None


def _holds(predicate, seconds: float) -> None:
    """`predicate` at every look for `seconds` (what must stay true, not become true)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        assert predicate()
        time.sleep(0.5)


def test_live_from_the_start_ready_once_it_cycles_and_still_ready_and_scraped_while_nats_is_down(server, tmp_path):
    server.port = free_port()
    collector = Running(server, tmp_path)  # before its server: live, not ready, saying why
    try:
        wait_until(lambda: _answers(collector), timeout=60, message="the probes served before NATS answers")
        status, text = collector.probe("/readyz")
        assert status == 503 and "no cycle yet" in text and "connect" in text, text

        server.start()
        wait_until(collector.ready, timeout=60, message="ready once a cycle is stored")
        assert collector.probe("/healthz") == (200, "ok: the collector runs\n")

        server.stop(signal.SIGKILL)  # NATS gone: jetwatch must report it, not restart or hide /metrics
        wait_until(lambda: "sampling failed" in collector.log.read_text() or "disconnected" in collector.log.read_text(),
                   timeout=30, message="the collector saw NATS go")
        _holds(lambda: collector.ready() and collector.probe("/metrics")[0] == 200
               and collector.probe("/healthz")[0] == 200, seconds=8.0)
    finally:
        collector.stop()
    assert collector.proc.returncode == 0
    lines = [json.loads(line) for line in collector.log.read_text().splitlines()]
    assert lines and all({"time", "level", "logger", "message"} <= set(line) and line["cluster"] == "east"
                         for line in lines), lines[:3]
    assert any(line["level"] == "WARNING" and "NATS" in line["message"] for line in lines), lines


def test_a_store_held_by_another_process_makes_it_not_ready_and_never_not_live(server, tmp_path):
    server.start()
    collector = Running(server, tmp_path)
    try:
        wait_until(collector.ready, timeout=60, message="ready once a cycle is stored")
        holder = wait_until(lambda: _lock(collector.db), timeout=30, message="the store's lock taken between writes")
        try:
            # Not ready once nothing was written for the window; why (the lock) once the write that
            # waited for it gave up: the window and that wait end close together on a busy machine.
            said = wait_until(lambda: (p := collector.probe("/readyz"))[0] == 503 and "lock" in p[1].lower() and p,
                              timeout=60, message="not ready, naming the lock, while the store is held")
            assert "nothing was written to the store" in said[1], said
            assert collector.probe("/healthz")[0] == 200
        finally:
            holder.close()
        wait_until(collector.ready, timeout=30, message="ready again once the store is let go")
    finally:
        collector.stop()


def test_a_hung_server_leaves_it_ready_its_cycles_bounded_by_the_request_timeout(server, tmp_path):
    server.start()
    collector = Running(server, tmp_path)
    try:
        wait_until(collector.ready, timeout=60, message="ready once a cycle is stored")
        assert server.proc is not None
        server.proc.send_signal(signal.SIGSTOP)  # every request waits out --request-timeout
        wait_until(lambda: "no reply" in collector.log.read_text(), timeout=30, message="requests time out")
        _holds(lambda: collector.ready() and collector.probe("/healthz")[0] == 200, seconds=10.0)
        server.proc.send_signal(signal.SIGCONT)
    finally:
        collector.stop()
    assert collector.proc.returncode == 0


@pytest.mark.parametrize("loop_quiet,cycle_ago,write_ago,live,ready,words", [
    (0, None, None, True, False, "no cycle yet (connecting"),
    (0, 1, 1, True, True, "the last cycle ended 1 s ago"),
    (0, 60, 1, True, False, "no sampling cycle ended for 60 s (one is due every 1 s)"),
    (0, 1, 60, True, False, "nothing was written to the store for 60 s: database is locked"),
    (LIVE_WITHIN_S + 5, 1, 1, False, True, "event loop has not turned for 35 s"),
])
def test_each_probe_reads_what_the_collector_last_did(loop_quiet, cycle_ago, write_ago, live, ready, words):
    probes = Probes(interval_s=1, request_timeout_s=2, lock_timeout_s=1)  # stale after 3 + 4 + 1 s
    now = time.monotonic()
    probes.stage = "connecting to NATS at nats://127.0.0.1:4222"
    probes.loop_at = now - loop_quiet
    if write_ago is not None:
        probes.stored()
        probes.stored_at = now - write_ago
        probes.store_failed("database is locked")
    if cycle_ago is not None:
        probes.cycle_at = now - cycle_ago
    said = probes.ready()
    assert (probes.live().ok, said.ok) == (live, ready)
    assert words in said.text or words in probes.live().text, (said, probes.live())
