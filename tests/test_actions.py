"""Operator actions against a real server with real pinned workers."""

from __future__ import annotations

import asyncio
import datetime as dt
import sys

import nats
import pytest

from jetwatch.actions import operations as ops
from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.core.settings import parse_instant
from jetwatch.demo.workers import PullWorker
from jetwatch.store.database import Store
from tests.helpers import (
    clean_env,
    collecting,
    collector_settings,
    eventually,
    make_consumer,
    make_stream,
    publish,
    rows,
)


async def cli(*args: str, db: str | None = None) -> tuple[int, str]:
    cmd = [sys.executable, "-m", "jetwatch.cli", *args] + (["--db", db] if db else [])
    proc = await asyncio.create_subprocess_exec(*cmd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
                                                stdin=asyncio.subprocess.DEVNULL,
                                                env=clean_env())
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode()


async def advisory_barrier(nc, api: JetStreamAPI, uid: str) -> None:
    """Advisories are published in order: once a fresh consumer's unpin advisory is seen, any
    advisory an earlier request would have caused has been seen too."""
    stream = f"{uid}_BARRIER"
    await make_stream(api, stream, [f"{uid}.barrier"])
    await make_consumer(api, stream, "b", "pinned_client", timeout_s=30)
    sub = await nc.subscribe(f"$JS.EVENT.ADVISORY.CONSUMER.UNPINNED.{stream}.b")
    await api.unpin(stream, "b", "jobs")
    await sub.next_msg(timeout=10)
    await sub.unsubscribe()


def test_cli_unpin_records_an_admin_unpin_a_new_pin_and_an_audit_row(nats_server, db_path, uid, run):
    stream, consumer = f"{uid}_U", "work"
    store = Store(db_path)
    pins = "SELECT event, reason, pinned_id FROM pin_events WHERE stream = ? ORDER BY ts, event DESC"

    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid}.work"])
        await make_consumer(api, stream, consumer, "pinned_client", timeout_s=30)
        workers = [PullWorker(nc, stream, consumer, "jobs", name=n).start() for n in "ab"]
        async with collecting(collector_settings(nats_server.url, db_path, (stream,))):
            await publish(nc, f"{uid}.work", 2)
            await eventually(lambda: rows(store, pins, [stream]), message="first pin stored")
            code, out = await cli("unpin", stream, consumer, "--yes", "--actor", "ana", "--server", nats_server.url,
                                  db=db_path)
            assert code == 0, out
            assert "server reply: {'type': 'io.nats.jetstream.api.v1.consumer_unpin_response'}" in out
            await publish(nc, f"{uid}.work", 2)
            await eventually(lambda: len(rows(store, pins, [stream])) >= 3, message="unpin and new pin stored")
        history = rows(store, pins, [stream])
        assert [(e, r) for e, r, _ in history[:3]] == [("pinned", None), ("unpinned", "admin"), ("pinned", None)]
        assert history[0][2] != history[2][2]
        audit = rows(store, "SELECT actor, origin, action, stream, consumer, group_name, outcome FROM audit "
                            "WHERE phase = 'outcome'")
        assert audit == [("ana", "cli", "unpin", stream, consumer, "jobs", "ok")]
        for w in workers:
            await w.stop()
        await nc.close()

    run(scenario())


def test_unpin_is_not_sent_when_nothing_is_pinned_or_the_policy_has_no_pin(nats_server, uid, run):
    stream = f"{uid}_REFUSE"

    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid}.r"])
        await make_consumer(api, stream, "nobody", "pinned_client", timeout_s=30)
        await make_consumer(api, stream, "over", "overflow")
        seen = []

        async def record(msg) -> None:
            seen.append(msg)

        sub = await nc.subscribe(f"$JS.EVENT.ADVISORY.CONSUMER.UNPINNED.{stream}.*", cb=record)

        nothing = await ops.unpin(api, ops.Target(None, stream, "nobody"))
        assert (nothing.ok, nothing.outcome) == (False, "refused")
        assert "nothing is pinned" in nothing.message
        policy = await ops.unpin(api, ops.Target(None, stream, "over"))
        assert "priority policy overflow" in policy.message
        group = await ops.unpin(api, ops.Target(None, stream, "nobody", "other"))
        assert "group 'other' is not in the consumer's config (jobs)" in group.message
        missing = await ops.unpin(api, ops.Target(None, stream, "ghost"))
        assert missing.outcome == "error" and "consumer not found" in missing.message

        await advisory_barrier(nc, api, uid)
        assert seen == []
        await sub.unsubscribe()
        await nc.close()

    run(scenario())


def test_drain_with_work_in_flight_hands_the_pin_over_without_redelivery(nats_server, uid, run):
    stream, consumer = f"{uid}_DRAIN", "work"

    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid}.work"])
        await make_consumer(api, stream, consumer, "pinned_client", timeout_s=30, ack_wait=30 * 10**9)
        a = PullWorker(nc, stream, consumer, "jobs", name="a", batch=5)
        a.acking = False  # holds its work in flight until told
        a.start()
        await publish(nc, f"{uid}.work", 5)
        first_pin = await eventually(lambda: a.pin_id, message="a pinned")
        await eventually(lambda: a.stats.received == 5, message="five messages in flight")
        b = PullWorker(nc, stream, consumer, "jobs", name="b").start()

        readings: list[tuple[str, int | None]] = []
        paused_seen: list[bool] = []

        async def progress(state: str, start: int, in_flight: int | None, elapsed: float) -> None:
            readings.append((state, in_flight))
            if state == "draining" and len(readings) == 2:
                info = await api.consumer_info(stream, consumer)
                paused_seen.append(bool(info.get("paused")))
                await publish(nc, f"{uid}.work", 3)  # arrives while paused, with b waiting to pull
                held = await eventually(lambda: _pending_is(api, stream, consumer, 3), message="new work queued")
                readings.append(("delivered-while-paused", held["delivered"]["consumer_seq"] - 5))
                await a.ack_held()

        result = await ops.drain(api, ops.Target(None, stream, consumer), ops.DrainPlan("handoff", 20.0), progress)
        assert result.ok, result.message
        assert paused_seen == [True]
        assert ("delivered-while-paused", 0) in readings
        states = [s for s, _ in readings]
        assert states[-1] == "done"
        assert ("draining", 0) in readings
        assert readings.index(("draining", 0)) < states.index("done")
        assert result.reply is not None and set(result.reply) == {"pause", "unpin", "resume"}
        await eventually(lambda: (a.pin_id and a.pin_id != first_pin) or (b.pin_id and b.pin_id != first_pin),
                         message="a new pin after the handoff")
        await eventually(lambda: a.stats.received + b.stats.received >= 8, message="deliveries after resume")
        assert a.stats.redelivered == 0 and b.stats.redelivered == 0
        info = await api.consumer_info(stream, consumer)
        assert not info.get("paused") and info["num_redelivered"] == 0
        for w in (a, b):
            await w.stop()
        await nc.close()

    run(scenario())


async def _pending_is(api: JetStreamAPI, stream: str, consumer: str, n: int) -> dict | None:
    info = await api.consumer_info(stream, consumer)
    return info if info["num_pending"] == n else None


def test_drain_that_times_out_resumes_the_consumer_and_says_what_is_in_flight(nats_server, uid, run):
    stream, consumer = f"{uid}_TIMEOUT", "work"

    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid}.work"])
        await make_consumer(api, stream, consumer, ack_wait=60 * 10**9)
        w = PullWorker(nc, stream, consumer, name="never-acks", batch=10)
        w.acking = False
        w.start()
        await publish(nc, f"{uid}.work", 4)
        await eventually(lambda: w.stats.received == 4, message="work in flight")
        result = await ops.drain(api, ops.Target(None, stream, consumer), ops.DrainPlan("resume", 1.5))
        assert not result.ok
        assert result.message == "timed out after 2 s with 4 messages still in flight; the consumer was resumed"
        assert result.details["still_in_flight"] == 4
        info = await api.consumer_info(stream, consumer)
        assert not info.get("paused")
        await w.stop()
        await nc.close()

    run(scenario())


def test_cli_pause_then_resume_with_audit(nats_server, db_path, uid, run):
    stream = f"{uid}_PAUSE"
    store = Store(db_path)

    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid}.p"])
        await make_consumer(api, stream, "c")
        code, out = await cli("pause", stream, "c", "--until", "10m", "--yes", "--server", nats_server.url, db=db_path)
        assert code == 0, out
        info = await api.consumer_info(stream, "c")
        assert info["paused"] is True
        until = parse_instant(info["config"]["pause_until"], dt.datetime.now(dt.UTC))
        assert dt.timedelta(minutes=9) < until - dt.datetime.now(dt.UTC) < dt.timedelta(minutes=11)
        code, out = await cli("resume", stream, "c", "--yes", "--server", nats_server.url, db=db_path)
        assert code == 0, out
        assert not (await api.consumer_info(stream, "c")).get("paused")
        assert [r[0] for r in rows(store, "SELECT action FROM audit WHERE phase = 'outcome' ORDER BY seq")] \
            == ["pause", "resume"]
        await nc.close()

    run(scenario())


def test_cli_refuses_to_act_without_a_terminal_or_yes(nats_server, uid, run):
    async def scenario() -> None:
        code, out = await cli("resume", f"{uid}_X", "c", "--server", nats_server.url, "--no-audit")
        assert code == 2
        assert "no terminal to ask on. Add --yes" in out

    run(scenario())


def test_cli_reports_server_errors_in_words(nats_server, db_path, run):
    async def scenario() -> None:
        code, out = await cli("resume", "NO_SUCH_STREAM", "c", "--yes", "--server", nats_server.url, db=db_path)
        assert code == 1
        assert "the server refused: stream not found (error 10059)" in out
        audit = rows(Store(db_path), "SELECT action, phase, outcome FROM audit ORDER BY seq")
        assert audit == [("resume", "intent", "pending"), ("resume", "outcome", "error")]

    run(scenario())


def test_cli_drain_interrupted_says_what_state_it_left(nats_server, uid, run):
    stream = f"{uid}_CTRLC"

    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid}.w"])
        await make_consumer(api, stream, "c", ack_wait=60 * 10**9)
        w = PullWorker(nc, stream, "c", name="holder", batch=5)
        w.acking = False
        w.start()
        await publish(nc, f"{uid}.w", 2)
        await eventually(lambda: w.stats.received == 2, message="work in flight")
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "jetwatch.cli", "drain", stream, "c", "--timeout", "60s", "--yes",
            "--server", nats_server.url, "--no-audit", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            env=clean_env())
        seen = b""
        while b"draining: 2 of 2 in flight" not in seen:
            chunk = await asyncio.wait_for(proc.stdout.read(200), 120)  # a loaded machine starts Python slowly
            assert chunk, seen
            seen += chunk
        proc.send_signal(2)  # Ctrl-C
        rest, _ = await asyncio.wait_for(proc.communicate(), 120)
        text = (seen + rest).decode()
        assert proc.returncode == 130
        assert "interrupted: the consumer stays paused until its pause expires by itself" in text
        assert f"jetwatch resume -- {stream} c" in text
        info = await api.consumer_info(stream, "c")
        assert info["paused"] is True  # as the message says, and the pause has an end
        assert info["config"]["pause_until"]
        await api.pause(stream, "c", None)
        await w.stop()
        await nc.close()

    run(scenario())


def test_ctrl_c_ends_an_action_even_when_the_client_swallows_the_first_cancellation(monkeypatch):
    """nats-py swallows a cancellation that lands while it flushes a request (`except
    CancelledError: pass`). One cancel, as asyncio.run gives on Ctrl-C, then left a drain running
    to its timeout and exiting 1 instead of 130. The action is cancelled until it ends."""
    import argparse
    import os
    import signal
    import threading

    from jetwatch.actions import cli as action_cli

    async def swallows_once(*args, **kwargs):
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            pass  # what nats-py's flush does with a cancellation
        await asyncio.sleep(60)
        return "ran on as if nobody had pressed Ctrl-C"

    monkeypatch.setattr(action_cli, "perform_on_account", swallows_once)
    ctrl_c = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    ctrl_c.start()
    try:
        with pytest.raises((asyncio.CancelledError, KeyboardInterrupt)):
            asyncio.run(action_cli._act(argparse.Namespace(command="drain"), None, ops.Target(None, "S", "c", None),
                                        {}, None))
    finally:
        ctrl_c.cancel()
