"""Shared test helpers: waiting on conditions, creating streams and consumers, running a collector."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import io
import json
import os
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar
from unittest import mock

from hypothesis import strategies as st

from jetwatch import cli
from jetwatch.collectors.runner import Collector
from jetwatch.core.connection import connect
from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.core.settings import Settings
from jetwatch.store.database import Store

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout: float = 60.0, interval: float = 0.05,
               message: str = "condition") -> T:
    """Poll until predicate() is truthy; never a fixed sleep."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {message}")
        time.sleep(interval)


async def eventually(predicate: Callable[[], Awaitable[T]] | Callable[[], T], timeout: float = 60.0,
                     interval: float = 0.05, message: str = "condition") -> T:
    """Async form of wait_until; the predicate may be sync or async."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {message}")
        await asyncio.sleep(interval)


async def make_stream(api: JetStreamAPI, name: str, subjects: list[str] | None = None, **extra: Any) -> None:
    await api.add_stream({"name": name, "subjects": subjects or [f"{name}.>"], "storage": "memory", **extra})


async def make_consumer(api: JetStreamAPI, stream: str, name: str, policy: str | None = None,
                        group: str = "jobs", timeout_s: float | None = None, **extra: Any) -> dict[str, Any]:
    config: dict[str, Any] = {"durable_name": name, "ack_policy": "explicit", **extra}
    if policy:
        config["priority_policy"] = policy
        config["priority_groups"] = [group]
        if timeout_s is not None:
            config["priority_timeout"] = int(timeout_s * 1e9)
    return await api.add_consumer(stream, config)


async def one_consumer_stream(server_url: str, stream: str, subject: str, consumer: str = "c") -> None:
    """A stream on `subject` with one pull consumer: the least a collector has to sample."""
    import nats
    nc = await nats.connect(server_url)
    try:
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [subject])
        await make_consumer(api, stream, consumer)
    finally:
        await nc.close()


async def publish(nc: Any, subject: str, count: int) -> None:
    for i in range(count):
        await nc.request(subject, str(i).encode(), timeout=5)


def said_named(scenario: str, seconds: float | None, deadline: float) -> None:
    """Note how long after its signal an incident was named (None: not named), where the run was
    asked to (`--named-log`, for bench.cluster_incidents): one JSON line, appended whole."""
    where = os.environ.get("JW_NAMED_LOG")
    if where:
        line = json.dumps({"scenario": scenario, "seconds": seconds, "deadline": deadline}) + "\n"
        with open(where, "a") as out:
            out.write(line)


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without JETWATCH_* settings, plus `extra`: what a child
    jetwatch process sees when a test means to set its options explicitly."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("JETWATCH_")}, **extra}


def status_json(db: str, *more: str) -> list[dict[str, Any]]:
    """`jetwatch status --json` run in this process, as a child would run it (the environment's
    JETWATCH_* settings left out): for a test that polls the command until a condition holds, where
    a child Python started for every poll would cost the suite more than the test itself. A test
    that checks the command as users run it starts the child once, for its final read."""
    out, err = io.StringIO(), io.StringIO()
    with (mock.patch.dict(os.environ, clean_env(), clear=True), contextlib.redirect_stdout(out),
          contextlib.redirect_stderr(err)):
        code = cli.main(["status", "--json", "--db", db, *more])
    assert code == 0, f"jetwatch status exited {code}: {err.getvalue()[-500:]}"
    return json.loads(out.getvalue())


def pages_on(monkeypatch: Any, db: str, server_url: str) -> None:
    """The pages' settings for an AppTest on this store and server, and nothing else of the
    environment's JETWATCH_* (as `jetwatch dashboard` hands them over)."""
    for k in list(os.environ):
        if k.startswith("JETWATCH_"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("JETWATCH_DB", db)
    monkeypatch.setenv("JETWATCH_SERVER", server_url)
    monkeypatch.setenv("JETWATCH_DATA_DIR", os.path.dirname(db))


def collector_settings(server_url: str, db: str, streams: tuple[str, ...] = (), **extra: Any) -> Settings:
    return Settings({"server": server_url, "db": db, "interval": 0.5, "inference_grace": 1.5,
                     "include_streams": streams, "lock_timeout": 30.0, **extra})


@contextlib.asynccontextmanager
async def running(settings: Settings) -> AsyncIterator[tuple[Collector, asyncio.Task[None]]]:
    """A real collector in the test's event loop that may never complete a cycle, stopped
    cleanly afterwards."""
    nc = await connect(settings, name="test-collector")
    collector = Collector(settings, nc, Store(settings.db, lock_timeout=settings.lock_timeout))
    stop = asyncio.Event()
    task = asyncio.create_task(collector.run(stop))
    try:
        yield collector, task
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
        await nc.drain()


@contextlib.asynccontextmanager
async def collecting(settings: Settings) -> AsyncIterator[Collector]:
    """A real collector running in the test's event loop, once it has completed a cycle."""
    async with running(settings) as (collector, task):
        await eventually(lambda: collector.cycles > 0 or task.done(), message="first collector cycle")
        if task.done():
            task.result()
        yield collector


async def judged(server_url: str, db: str, stream: str, subjects: str, consumers: dict[str, tuple[dict[str, Any], int]],
                 expected: dict[str, str], timeout: float = 30.0) -> None:
    """A stream on `<subjects>.>` with `consumers` (name: its config's extra keys, and how many
    messages to publish on `<subjects>.<name>`), and the collector on a short health window until
    their verdicts are `expected`: the set-up of a test about what a verdict leads to."""
    import nats
    nc = await nats.connect(server_url)
    try:
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{subjects}.>"])
        for name, (extra, count) in consumers.items():
            await make_consumer(api, stream, name, **extra)
            await publish(nc, f"{subjects}.{name}", count)
        settings = collector_settings(server_url, db, (stream,), interval=0.3, health_window=4.0,
                                      health_min_samples=3, health_min_span=1.0)
        store = Store(db)
        query = "SELECT consumer, verdict FROM verdicts_current WHERE stream = ?"
        async with collecting(settings):
            await eventually(lambda: store.exists() and dict(rows(store, query, [stream])) == expected,
                             timeout=timeout, message=f"the verdicts {expected}")
    finally:
        await nc.close()


def rows(store: Store, sql_text: str, params: Any = ()) -> list[tuple[Any, ...]]:
    """Ad-hoc read for assertions (tests only; product code reads named queries)."""
    return store.read(lambda con: con.execute(sql_text, params).fetchall())


class LoopThread:
    """An event loop on its own thread, for real workers that must keep running while a test
    blocks (AppTest runs a page synchronously)."""

    def __init__(self) -> None:
        import threading

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def call(self, coro: Awaitable[T], timeout: float = 60) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)  # type: ignore[arg-type]

    def close(self) -> None:
        async def cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        self.call(cancel_all())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


OPERATOR_PASSWORD = "correct horse battery"


def operators_file(directory: Any, *names: str) -> str:
    """An operator identities file with `names`, each signing in with OPERATOR_PASSWORD, written as
    an operator may write it by hand: its hashes cost 2^10, not `jetwatch operator add`'s 2^14
    (tests sign in hundreds of times; test_security_dashboard checks what `operator add` writes)."""
    from jetwatch.dashboard import identities

    path = Path(directory) / "operators"
    path.write_text("".join(f"{name}:{identities.hash_password(OPERATOR_PASSWORD, n=2**10)}\n" for name in names))
    path.chmod(0o600)
    return str(path)


def stop_process(proc: subprocess.Popen[bytes] | subprocess.Popen[str]) -> None:
    """SIGTERM a server the test started, SIGKILL it if it has not gone in 20 s, and reap it."""
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


@st.composite
def server_time(draw: Any) -> str:
    """A time as a server may write it: any year, 0 to 9 fraction digits, Z or an offset, 'T' or a
    space; among them the zero time, pre-1970 fractions and years past 2262."""
    at = draw(st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30)))
    digits = draw(st.integers(0, 9))
    fraction = "." + f"{at.microsecond:06d}{draw(st.integers(0, 999)):03d}"[:digits] if digits else ""
    zone = draw(st.sampled_from(["Z", "+00:00", "+05:30", "-08:00", "+14:00", "-12:00"]))
    day = f"{at.year:04d}-{at.month:02d}-{at.day:02d}"
    return day + draw(st.sampled_from("T ")) + at.strftime("%H:%M:%S") + fraction + zone


EDGES = ["0001-01-01T00:00:00Z", "1969-12-31T23:59:59.999999999Z", "1970-01-01T00:00:00.000000001Z",
         "2262-04-11T23:47:16.854775807Z", "2262-04-12T00:00:00Z", "9999-12-31T23:59:59.999999999Z",
         "2024-02-29T23:59:59.123456789-00:30", "2026-11-22 12:00:00.5+01:00"]


class Flood:
    """An HTTP server on loopback that answers every request 200 and then sends `body_bytes` of
    body as fast as the socket takes it (with `Content-Length: content_length` when given),
    counting what each connection sent: a monitoring port or an Alertmanager gone hostile. The
    client that stops reading closes the connection, and the count then stops growing."""

    PIECE = 1 << 20

    def __init__(self, body_bytes: int, content_length: int | None = None) -> None:
        import socket
        import threading

        self.body_bytes, self.content_length = body_bytes, content_length
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.sent: list[int] = []  # body bytes each connection sent, in the order they ended
        self.stopped = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import threading

        while not self.stopped.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._flood, args=(conn,), daemon=True).start()

    def _flood(self, conn: Any) -> None:
        sent = 0
        with conn:
            try:
                conn.recv(65536)
                length = f"Content-Length: {self.content_length}\r\n" if self.content_length is not None else ""
                conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{length}"
                             "Connection: close\r\n\r\n".encode())
                piece = b" " * self.PIECE
                while sent < self.body_bytes and not self.stopped.is_set():
                    conn.sendall(piece[:self.body_bytes - sent])
                    sent += min(self.PIECE, self.body_bytes - sent)
            except OSError:
                pass
        self.sent.append(sent)

    def close(self) -> None:
        self.stopped.set()
        self.listener.close()


def known_variables() -> set[str]:
    """Every JETWATCH_* variable jetwatch reads: one per setting, and the CLI's log format."""
    from jetwatch.core.settings import SETTINGS

    return {s.env for s in SETTINGS} | {"JETWATCH_LOG_FORMAT"}
