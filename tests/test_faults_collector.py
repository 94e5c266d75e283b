"""The collector off the happy path, against real servers and real store files: every fault is
said in words where the on-call engineer looks, and never costs what was already collected."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import nats
import pytest

from jetwatch.collectors.advisories import ensure_capture_stream
from jetwatch.collectors.jsz import HttpJsz, ServerReport
from jetwatch.core.clock import utcnow
from jetwatch.core.embedded_server import NatsServer, free_port
from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.store.database import Store
from tests.helpers import (
    LoopThread,
    clean_env,
    collecting,
    collector_settings,
    eventually,
    make_consumer,
    make_stream,
    one_consumer_stream,
    publish,
    rows,
    running,
    wait_until,
)

ADMIN = {"user": "admin", "password": "admin-pw"}


def _perms_server(directory: Path) -> NatsServer:
    """A server where `watcher` may not list the consumers of stream SECRET, `blind` may not
    list streams at all, and `limited` may not update streams; `admin` may do anything."""
    conf = directory / "perms.conf"
    conf.write_text(
        "authorization { users: [\n"
        "  { user: admin, password: admin-pw }\n"
        "  { user: watcher, password: watcher-pw, permissions: { publish: { deny: [\"$JS.API.CONSUMER.LIST.SECRET\"] } } }\n"
        "  { user: blind, password: blind-pw, permissions: { publish: { deny: [\"$JS.API.STREAM.NAMES\"] } } }\n"
        "  { user: limited, password: limited-pw, permissions: { publish: { deny: [\"$JS.API.STREAM.UPDATE.>\"] } } }\n"
        "]}\n")
    return NatsServer(store_dir=directory / "js", extra_args=["-c", str(conf)]).start()


@pytest.fixture(scope="module")
def perms_server(tmp_path_factory):
    server = _perms_server(tmp_path_factory.mktemp("perms"))
    yield server
    server.stop()


@pytest.fixture
def own_perms_server(tmp_path):
    """The same, of the test's own (no capture stream made by other tests)."""
    server = _perms_server(tmp_path)
    yield server
    server.stop()


def _status(store: Store) -> tuple:
    return rows(store, "SELECT last_cycle_at, last_error FROM collector_status")[0]


# -- one stream, one consumer, one cycle ---------------------------------------------------------

def test_a_stream_the_collector_may_not_list_never_blocks_the_others_and_its_error_clears(
        perms_server, db_path, run):
    store = Store(db_path)

    async def scenario() -> None:
        nc = await nats.connect(perms_server.url, **ADMIN)
        api = JetStreamAPI(nc)
        await make_stream(api, "OPEN", ["open.>"])
        await make_consumer(api, "OPEN", "worker")
        await publish(nc, "open.x", 3)
        await make_stream(api, "SECRET", ["secret.>"])
        await make_consumer(api, "SECRET", "hidden")
        settings = collector_settings(perms_server.url, db_path, ("OPEN", "SECRET"), user="watcher",
                                      password="watcher-pw", request_timeout=0.5)
        async with collecting(settings):
            await eventually(lambda: rows(store, "SELECT consumer, num_pending FROM consumer_latest"),
                             message="the open stream sampled")
            assert rows(store, "SELECT stream, consumer, num_pending FROM consumer_latest") == [("OPEN", "worker", 3)]
            error = (await eventually(lambda: _status(store)[1], message="the denied stream said"))
            assert "'SECRET'" in error and "$JS.API.CONSUMER.LIST.SECRET" in error, error
            await api.request("STREAM.DELETE.SECRET")
            await eventually(lambda: _status(store)[1] is None, message="the error cleared by a clean cycle")
            assert rows(store, "SELECT stream, consumer, num_pending FROM consumer_latest") == [("OPEN", "worker", 3)]
        await nc.close()

    run(scenario())


def test_a_cycle_that_fails_whole_still_writes_the_collectors_status_with_the_error(perms_server, db_path, run):
    store = Store(db_path)

    async def scenario() -> None:
        settings = collector_settings(perms_server.url, db_path, ("OPEN",), user="blind", password="blind-pw",
                                      request_timeout=0.5)
        async with running(settings) as (collector, _):
            status = await eventually(lambda: store.exists() and rows(store, "SELECT last_cycle_at, last_error FROM collector_status"),
                                      message="a status row for the failed cycles")
            assert collector.cycles == 0
            last_cycle_at, error = status[0]
            assert last_cycle_at is None
            assert error.startswith("sampling failed: no reply to $JS.API.STREAM.NAMES"), error

    run(scenario())


def test_in_jsz_mode_a_cycle_with_no_report_still_writes_the_status_with_the_error(nats_server, db_path, run):
    from jetwatch.core.embedded_server import free_port

    store = Store(db_path)
    nowhere = f"http://127.0.0.1:{free_port()}"  # nothing listens there

    async def scenario() -> None:
        settings = collector_settings(nats_server.url, db_path, ("NONE",), monitor_url=(nowhere,), request_timeout=0.5)
        async with running(settings) as (collector, _):
            status = await eventually(lambda: store.exists() and rows(store, "SELECT last_cycle_at, sample_mode, last_error "
                                                                             "FROM collector_status"),
                                      message="a status row for the failed cycles")
            assert collector.cycles == 0
            assert status == [(None, "jsz", f"sampling failed: no JSZ report came back from {nowhere}")]

    run(scenario())


def test_a_monitoring_port_that_trickles_its_reply_is_given_up_at_the_deadline_and_the_cycles_go_on(
        nats_server, db_path, uid, run):
    """One of two monitoring URLs accepts the request and answers a byte a second: every socket read
    succeeds, so only a total deadline ends it. The cycles go on at about `--request-timeout` with
    the other server's report (they used to wait for the trickle to end), and the error says which
    URL and what to check."""
    from tests.test_alerting import Trickler

    stream = f"{uid}_TRICKLEJSZ"
    trickler = Trickler(every_s=0.5, at_most=120)
    store = Store(db_path)

    async def scenario() -> None:
        await one_consumer_stream(nats_server.url, stream, f"{uid}.trickle")
        settings = collector_settings(nats_server.url, db_path, (stream,), interval=0.5, request_timeout=1.0,
                                      monitor_url=(nats_server.monitor_url, trickler.url))
        async with running(settings) as (collector, task):
            await eventually(lambda: collector.cycles >= 3 or task.done(), timeout=20,
                             message="three cycles while one monitoring port trickles")
            assert trickler.accepted >= 3, trickler.accepted  # each cycle asked it again, and gave up
            assert collector.last_error is not None
            assert f"{trickler.url}/jsz?" in collector.last_error[0], collector.last_error
            assert "did not answer within 1s (it accepted the connection but its reply never completed): its " \
                   "consumers were not read this cycle" in collector.last_error[0], collector.last_error
        assert rows(store, "SELECT count(*) FROM consumer_current WHERE stream = ?", [stream]) == [(1,)]

    try:
        run(scenario())
    finally:
        trickler.close()


# What a flood may have sent past the cap once the reader stops: the loopback socket's buffers at
# both ends, at most a few MiB each on Linux; far below the flood's whole body.
FLOOD_BODY = 256 << 20
BUFFERED = 32 << 20


@pytest.mark.parametrize("content_length", [None, 3 << 30], ids=["unannounced", "announced"])
def test_a_monitoring_port_that_floods_its_reply_is_read_up_to_the_cap_and_said(content_length, run):
    """A monitoring port that answers 200 and sends hundreds of MiB fast, within the deadline:
    `/jsz` is read up to --monitor-max-bytes and no further (said, with the URL and the cap), and an
    announced Content-Length past the cap is refused before any of the body is read."""
    from jetwatch.collectors.pin_holders import ConnzUnavailable, HttpConnz
    from tests.helpers import Flood, wait_until

    flood = Flood(FLOOD_BODY, content_length)
    cap = 1 << 20
    try:
        source = HttpJsz((flood.url,), timeout=60, max_bytes=cap)
        assert run(source.reports()) == []
        wait_until(lambda: len(flood.sent) == 1, message="the flood's connection ended")
        assert flood.sent[0] < BUFFERED, f"{flood.sent[0]:,} bytes read past a cap of {cap:,}"
        assert len(source.late) == 1, source.late
        assert f"{flood.url}/jsz?" in source.late[0] and "the cap of 1,048,576 bytes" in source.late[0], source.late
        assert "raise --monitor-max-bytes" in source.late[0], source.late

        connz = HttpConnz((flood.url,), timeout=60, max_bytes=cap)
        with pytest.raises(ConnzUnavailable):
            run(connz.connection("NID", 7))
        wait_until(lambda: len(flood.sent) == 2, message="the flood's /connz connection ended")
        assert flood.sent[1] < BUFFERED, f"{flood.sent[1]:,} bytes read past a cap of {cap:,}"
    finally:
        flood.close()


def test_a_flooding_monitoring_port_is_said_in_the_collectors_status_and_the_cycles_go_on(
        tmp_path, db_path, uid, run):
    """One of two monitoring URLs floods its reply: each cycle reads it up to the cap, goes on with
    the other server's report, and the status names the URL and the cap. The real server is one of
    the test's own, so that its report stays far below the cap whatever other tests created."""
    from tests.helpers import Flood

    stream = f"{uid}_FLOODJSZ"
    nats_server = NatsServer(store_dir=tmp_path / "js", monitor_port=free_port()).start()
    flood = Flood(FLOOD_BODY)
    store = Store(db_path)

    async def scenario() -> None:
        await one_consumer_stream(nats_server.url, stream, f"{uid}.flood")
        settings = collector_settings(nats_server.url, db_path, (stream,), interval=0.5, request_timeout=30.0,
                                      monitor_url=(nats_server.monitor_url, flood.url), monitor_max_bytes=1 << 20)
        async with running(settings) as (collector, task):
            await eventually(lambda: collector.cycles >= 2 or task.done(), timeout=60,
                             message="two cycles while one monitoring port floods")
            assert collector.last_error is not None
            assert f"{flood.url}/jsz?" in collector.last_error[0], collector.last_error
            assert "the cap of 1,048,576 bytes" in collector.last_error[0], collector.last_error
            await eventually(lambda: len(flood.sent) >= 2, message="the flood's connections ended")
            assert max(flood.sent) < BUFFERED, flood.sent
        assert rows(store, "SELECT count(*) FROM consumer_current WHERE stream = ?", [stream]) == [(1,)]

    try:
        run(scenario())
    finally:
        flood.close()
        nats_server.stop()


def test_credentials_in_a_monitor_url_are_never_shown_in_the_log_or_the_status(nats_server, db_path, run, caplog):
    """`--monitor-url http://user:pass@host:8222` (a monitoring port behind basic auth): the
    error that names the URL, in the log and in `collector_status.last_error`, names it bare."""
    from jetwatch.core.embedded_server import free_port

    store = Store(db_path)
    port = free_port()  # nothing listens there

    async def scenario() -> None:
        settings = collector_settings(nats_server.url, db_path, ("NONE",), request_timeout=0.5,
                                      monitor_url=(f"http://jw:s3cret-pw@127.0.0.1:{port}",))
        async with running(settings) as (collector, _):
            status = await eventually(lambda: store.exists() and rows(store, "SELECT last_error FROM collector_status"),
                                      message="a status row for the failed cycles")
            assert status == [(f"sampling failed: no JSZ report came back from http://127.0.0.1:{port}",)]

    run(scenario())
    assert "s3cret-pw" not in caplog.text and f"http://127.0.0.1:{port}" in caplog.text


def _corrupt(entry: dict, **fields: object) -> dict:
    return {**entry, **fields}


async def _good_and_bad(url: str, stream: str, subject: str) -> tuple[nats.NATS, JetStreamAPI]:
    """A stream with two consumers, "good" and "bad" (the one a test corrupts)."""
    nc = await nats.connect(url)
    api = JetStreamAPI(nc)
    await make_stream(api, stream, [subject])
    for name in ("good", "bad"):
        await make_consumer(api, stream, name)
    return nc, api


def test_a_consumer_with_a_field_of_the_wrong_type_is_rejected_alone_in_list_mode(nats_server, db_path, uid, run):
    """The real server never sends `"num_pending": "5"`; a real page from it, with that one field
    changed, goes through the parsing and storing the collector really does."""
    stream = f"{uid}_MAL"
    store = Store(db_path)

    async def scenario() -> None:
        nc, api = await _good_and_bad(nats_server.url, stream, f"{uid}.mal")
        await publish(nc, f"{uid}.mal", 5)
        # One real cycle at start, then the test drives the cycles.
        async with collecting(collector_settings(nats_server.url, db_path, (stream,), interval=3600)) as collector:
            page = sorted(await api.consumer_list(stream), key=lambda c: c["name"])
            page[0] = _corrupt(page[0], num_pending="5")  # "bad"
            page[1] = _corrupt(page[1], num_pending=7)  # "good", told apart from the sampled 5
            batch = collector.sampler.batch_from_entries([(stream, page)])
            await collector.store_cycle(batch)
            # `bad` keeps its last known state (from the first real cycle); `good` is this cycle's.
            assert rows(store, "SELECT consumer, num_pending FROM consumer_current WHERE stream = ? ORDER BY consumer",
                        [stream]) == [("bad", 5), ("good", 7)]
            rejected = rows(store, "SELECT origin, subject, error, raw FROM rejects WHERE subject = ?",
                            [f"CONSUMER.LIST.{stream}"])
            assert [r[:3] for r in rejected] == [
                ("consumer_state", f"CONSUMER.LIST.{stream}", "num_pending is str '5', expected an integer")]
            assert json.loads(rejected[0][3])["name"] == "bad"
            # The next real cycle carries on with both.
            await collector.sample_once()
            assert rows(store, "SELECT consumer, num_pending FROM consumer_current WHERE stream = ? ORDER BY consumer",
                        [stream]) == [("bad", 5), ("good", 5)]
        await nc.close()

    run(scenario())


def test_a_time_the_store_cannot_read_is_rejected_alone_and_the_cycles_go_on(nats_server, db_path, uid, run):
    """RFC 3339 allows a lower-case 't' and 'z', which DuckDB's cast does not read: such a time
    once reached the store and failed the whole cycle's write, and every retry of it."""
    stream = f"{uid}_LOW"
    store = Store(db_path)

    async def scenario() -> None:
        nc, api = await _good_and_bad(nats_server.url, stream, f"{uid}.low")
        async with collecting(collector_settings(nats_server.url, db_path, (stream,), interval=3600)) as collector:
            page = sorted(await api.consumer_list(stream), key=lambda c: c["name"])
            page[0] = _corrupt(page[0], created=page[0]["created"].replace("T", "t").replace("Z", "z"))  # "bad"
            page[1] = _corrupt(page[1], num_pending=7)  # "good"
            await collector.store_cycle(collector.sampler.batch_from_entries([(stream, page)]))
            assert rows(store, "SELECT consumer, num_pending FROM consumer_current WHERE stream = ? ORDER BY consumer",
                        [stream]) == [("bad", 0), ("good", 7)]
            rejected = rows(store, "SELECT error FROM rejects WHERE subject = ?", [f"CONSUMER.LIST.{stream}"])
            assert rejected == [(f"created: not an RFC 3339 time: {page[0]['created']!r:.60}",)]
            assert len(collector.backlog) == 0  # nothing left waiting for the store
            await collector.sample_once()
            assert rows(store, "SELECT count(*) FROM consumer_current WHERE stream = ?", [stream]) == [(2,)]
        await nc.close()

    run(scenario())


def test_a_consumer_with_a_bad_timestamp_is_rejected_alone_in_jsz_mode(nats_server, db_path, uid, run):
    stream = f"{uid}_JMAL"
    store = Store(db_path)

    async def scenario() -> None:
        nc, api = await _good_and_bad(nats_server.url, stream, f"{uid}.jmal")
        settings = collector_settings(nats_server.url, db_path, (stream,), monitor_url=(nats_server.monitor_url,),
                                      interval=3600)
        async with collecting(settings) as collector:
            reports = await HttpJsz((nats_server.monitor_url,)).reports()
            assert reports[0].raw is not None and reports[0].jsz is None  # kept as sent
            details = [s for a in reports[0].decoded()["account_details"] for s in a["stream_detail"]
                       if s["name"] == stream]
            for entry in details[0]["consumer_detail"]:
                if entry["name"] == "bad":
                    entry["delivered"] = {**entry["delivered"], "last_active": "yesterday"}
            # The same report as sent is read into Arrow, refused there, and decoded: the same rejects.
            as_sent = ServerReport(reports[0].server, raw=json.dumps(reports[0].jsz).encode())
            resent = collector.sampler.batch_from_reports([as_sent])
            batch = collector.sampler.batch_from_reports(reports)
            assert resent.arrow is None and resent.samples == batch.samples and resent.rejects == batch.rejects
            assert batch.consumers >= 1
            assert abs((batch.server_now - utcnow()).total_seconds()) < 5  # JSZ `now`: the server's clock
            before = rows(store, "SELECT ts FROM consumer_current WHERE stream = ? AND consumer = 'bad'", [stream])
            await collector.store_cycle(batch)
            assert rows(store, "SELECT consumer FROM consumer_current WHERE stream = ? ORDER BY consumer",
                        [stream]) == [("bad",), ("good",)]
            # `bad` keeps the state of the first real cycle: nothing of the rejected entry was stored.
            assert rows(store, "SELECT ts FROM consumer_current WHERE stream = ? AND consumer = 'bad'", [stream]) == before
            # (origin: the session's shared capture stream may hold other tests' junk advisories)
            assert rows(store, "SELECT origin, subject, error FROM rejects WHERE origin = 'consumer_state'") == [
                ("consumer_state", "jsz", "delivered.last_active: not an RFC 3339 time: 'yesterday'")]
        await nc.close()

    run(scenario())


# -- advisories ----------------------------------------------------------------------------------

@pytest.fixture
def own_server(tmp_path):
    """A server of the test's own: its capture stream holds only what the test publishes."""
    server = NatsServer(store_dir=tmp_path / "js").start()
    yield server
    server.stop()


def _advisory(kind: str, id_: str, stream: str, consumer: str, **fields: object) -> bytes:
    return json.dumps({"type": f"io.nats.jetstream.advisory.v1.{kind}", "id": id_,
                       "timestamp": "2026-11-22T10:00:00.123456789Z", "account": "$G",
                       "stream": stream, "consumer": consumer, "group": "jobs", **fields}).encode()


def test_a_poison_or_forged_advisory_is_rejected_alone_and_capture_catches_up(own_server, db_path, run):
    """One advisory whose timestamp does not parse, one pin event on the other pin subject: each
    goes to `rejects` alone and is acknowledged; the good ones of the same batch are stored."""
    store = Store(db_path)
    pinned, unpinned = (f"$JS.EVENT.ADVISORY.CONSUMER.{k}.S.w" for k in ("PINNED", "UNPINNED"))

    async def scenario() -> None:
        nc = await nats.connect(own_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, "S", ["s.>"])
        await make_consumer(api, "S", "w", "pinned_client", timeout_s=30)
        settings = collector_settings(own_server.url, db_path, ("S",))
        assert await ensure_capture_stream(api, settings.capture_stream, 3600, 1 << 20)
        # Published before the collector starts: they reach it in one batch.
        await nc.publish(pinned, _advisory("consumer_group_pinned", "good-1", "S", "w", pinned_id="P1"))
        await nc.publish(pinned, _advisory("consumer_group_pinned", "poison", "S", "w", pinned_id="P2",
                                           timestamp="not-a-time"))
        await nc.publish(unpinned, _advisory("consumer_group_pinned", "forged", "S", "w", pinned_id="P3"))
        await nc.publish(unpinned, _advisory("consumer_group_unpinned", "good-2", "S", "w", reason="admin"))
        await nc.flush()
        async with collecting(settings) as collector:
            await eventually(lambda: rows(store, "SELECT capture_caught_up FROM collector_status") == [(True,)],
                             message="capture caught up")
            assert collector.caught_up
        assert rows(store, "SELECT id FROM advisories WHERE stream = 'S' ORDER BY id") == [("good-1",), ("good-2",)]
        rejected = rows(store, "SELECT subject, error, raw FROM rejects WHERE origin = 'advisory' ORDER BY subject")
        assert [r[:2] for r in rejected] == [
            (pinned, "timestamp: not an RFC 3339 time: 'not-a-time'"),
            (unpinned, f"consumer_group_pinned advisory for S/w arrived on '{unpinned}'")]
        assert [json.loads(r[2])["id"] for r in rejected] == ["poison", "forged"]
        info = await api.consumer_info(settings.capture_stream, collector.capture.durable)
        assert (info["num_pending"], info["num_ack_pending"]) == (0, 0)  # every one acknowledged
        await nc.close()

    run(scenario())


def test_an_advisory_the_store_cannot_take_never_wedges_capture(own_server, db_path, run):
    """Any user may publish on an advisory subject. A NAK whose reason holds a lone surrogate,
    written as a JSON escape (Python decodes it into text no UTF-8 store can encode), and one
    nested deeper than the JSON reader goes, arrive in one batch with good ones: the first is
    stored with the surrogate replaced, the second goes to `rejects` alone, the good ones are
    stored, every one is acknowledged and capture catches up, with no false gap."""
    store = Store(db_path)
    naked = "$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.S.w"
    surrogate = _advisory("nak", "lone", "S", "w", stream_seq=2, consumer_seq=2, deliveries=2,
                          reason="REASON").replace(b'"REASON"', b'"x\\ud800y"')
    assert b'"x\\ud800y"' in surrogate
    # Deeper than the JSON reader goes, yet under the 16 KiB an advisory may be.
    deep = _advisory("nak", "deep", "S", "w", reason="DEEP").replace(b'"DEEP"', b"[" * 5_000 + b"]" * 5_000)

    async def scenario() -> None:
        nc = await nats.connect(own_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, "S", ["s.>"])
        await make_consumer(api, "S", "w")
        settings = collector_settings(own_server.url, db_path, ("S",))
        assert await ensure_capture_stream(api, settings.capture_stream, 3600, 4 << 20)
        for body in (_advisory("nak", "good-1", "S", "w", stream_seq=1, consumer_seq=1, deliveries=2), surrogate,
                     deep, _advisory("nak", "good-2", "S", "w", stream_seq=3, consumer_seq=3, deliveries=2)):
            await nc.publish(naked, body)
        await nc.flush()
        async with collecting(settings) as collector:
            await eventually(lambda: rows(store, "SELECT capture_caught_up FROM collector_status") == [(True,)],
                             timeout=30, message="capture caught up")
            assert collector.caught_up
            info = await api.consumer_info(settings.capture_stream, collector.capture.durable)
            assert (info["num_pending"], info["num_ack_pending"]) == (0, 0)  # every one acknowledged
        stored = rows(store, "SELECT id, reason FROM advisories WHERE stream = 'S' ORDER BY id")
        assert stored == [("good-1", None), ("good-2", None), ("lone", "x\ufffdy")]
        rejected = rows(store, "SELECT subject, error FROM rejects WHERE origin = 'advisory'")
        assert len(rejected) == 1 and rejected[0][0] == naked and "nested" in rejected[0][1], rejected
        assert rows(store, "SELECT count(*) FROM capture_gaps") == [(0,)]
        await nc.close()

    run(scenario())


def test_well_formed_but_oversize_advisories_are_rejected_and_never_grow_the_store(own_server, db_path, run):
    """Valid advisories padded with 100 KB, or with a field far longer than any the server writes,
    go to `rejects` alone (raw cut to 4 KiB, as every reject), so a publisher cannot grow the store
    10x with messages that pass every other check; the good ones of the batch are stored."""
    store = Store(db_path)
    naked = "$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.S.w"
    unpinned = "$JS.EVENT.ADVISORY.CONSUMER.UNPINNED.S.w"
    padded = [_advisory("nak", f"padded-{i}", "S", "w", stream_seq=i, consumer_seq=i, deliveries=2,
                        padding="p" * 100_000) for i in range(20)]
    long_reason = _advisory("consumer_group_unpinned", "long-reason", "S", "w", reason="r" * 5_000)
    long_group = _advisory("consumer_group_unpinned", "long-group", "S", "w", reason="admin", group="g" * 5_000)

    async def scenario() -> None:
        nc = await nats.connect(own_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, "S", ["s.>"])
        await make_consumer(api, "S", "w")
        settings = collector_settings(own_server.url, db_path, ("S",))
        assert await ensure_capture_stream(api, settings.capture_stream, 3600, 8 << 20)
        await nc.publish(naked, _advisory("nak", "good-1", "S", "w", stream_seq=1, consumer_seq=1, deliveries=2))
        for body in padded:
            await nc.publish(naked, body)
        await nc.publish(unpinned, long_reason)
        await nc.publish(unpinned, long_group)
        await nc.publish(unpinned, _advisory("consumer_group_unpinned", "good-2", "S", "w", reason="timeout"))
        await nc.flush()
        async with collecting(settings) as collector:
            await eventually(lambda: rows(store, "SELECT capture_caught_up FROM collector_status") == [(True,)],
                             timeout=30, message="capture caught up")
            info = await api.consumer_info(settings.capture_stream, collector.capture.durable)
            assert (info["num_pending"], info["num_ack_pending"]) == (0, 0)  # every one acknowledged
        await nc.close()

    run(scenario())
    assert rows(store, "SELECT id FROM advisories WHERE stream = 'S' ORDER BY id") == [("good-1",), ("good-2",)]
    rejected = rows(store, "SELECT error, length(raw) FROM rejects WHERE origin = 'advisory' ORDER BY error")
    assert len(rejected) == 22, rejected
    errors = [e for e, _ in rejected]
    assert sum("bytes, more than the 16384 an advisory may be" in e for e in errors) == 20, errors
    assert any(e.startswith("group is 5000 characters, more than the 256") for e in errors), errors
    assert any(e.startswith("reason is 5000 characters, more than the 1024") for e in errors), errors
    assert max(n for _, n in rejected) <= 4096
    assert rows(store, "SELECT max(length(raw)) FROM advisories") <= [(16384,)]


def test_a_burst_of_junk_advisories_keeps_a_bounded_number_of_rejects_and_counts_the_rest(own_server, db_path, run):
    store = Store(db_path)
    subject = "$JS.EVENT.ADVISORY.CONSUMER.PINNED.S.w"
    burst = 3000

    async def scenario() -> None:
        nc = await nats.connect(own_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, "S", ["s.>"])
        async with collecting(collector_settings(own_server.url, db_path, ("S",))) as collector:
            for i in range(burst):
                await nc.publish(subject, b"junk %d " % i + b"x" * 2000)
            await nc.publish(subject, _advisory("consumer_group_pinned", "after-the-burst", "S", "w", pinned_id="P1"))
            await nc.flush()
            await eventually(lambda: rows(store, "SELECT count(*) FROM advisories WHERE id = 'after-the-burst'") == [(1,)],
                             timeout=60, message="the advisory after the burst stored")
            await eventually(lambda: collector.caught_up, message="capture caught up")
        kept = rows(store, "SELECT count(*), max(length(raw)) FROM rejects WHERE origin = 'advisory' AND subject IS NOT NULL")[0]
        dropped = [json.loads(r[0])["dropped"] for r in
                   rows(store, "SELECT raw FROM rejects WHERE origin = 'advisory' AND subject IS NULL")]
        minutes = len(dropped)
        assert 1 <= minutes <= 2  # the burst may straddle a minute
        assert kept[0] <= 50 * minutes and kept[1] <= 4096
        assert kept[0] + sum(dropped) == burst
        assert rows(store, "SELECT error FROM rejects WHERE subject IS NULL")[0][0].startswith(
            f"dropped {dropped[0]} more rejects in this minute (over the limit of 50 a minute); most common: not JSON")
        await nc.close()

    run(scenario())


# -- gaps in the advisory record -----------------------------------------------------------------

NAKED = "$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.S.w"


async def _naks(nc, prefix: str, count: int) -> None:
    for i in range(count):
        await nc.publish(NAKED, _advisory("nak", f"{prefix}-{i}", "S", "w", stream_seq=i + 1, consumer_seq=i + 1,
                                          deliveries=2))
    await nc.flush()


def _gaps(store: Store) -> list[tuple]:
    return rows(store, "SELECT from_seq, to_seq, missed, from_ts IS NOT NULL AND to_ts > from_ts, reason "
                       "FROM capture_gaps ORDER BY from_seq")


def _dashboard_warnings(db: str, page: str | None, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The warnings a page shows (sidebar included), under Streamlit's AppTest."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("JETWATCH_DB", db)
    monkeypatch.setenv("JETWATCH_STALE_AFTER", "1h")
    st.cache_data.clear()
    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "dashboard" / "app.py"), default_timeout=60)
    at.run()
    if page:
        at.switch_page(page).run()
    assert not at.exception, [e.message for e in at.exception]
    st.cache_data.clear()
    return [w.value.replace("\\", "") for w in at.warning]


def _exposed(collector) -> dict[str, float]:
    """The collector's own series as /metrics renders them for this cycle (prometheus-client's parser)."""
    from prometheus_client.parser import text_string_to_metric_families

    from jetwatch.exporters.metrics_server import MetricsExporter
    text = MetricsExporter("non_ok").render(collector.snapshot(collector.judged)).decode()
    return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples if not s.labels}


@pytest.mark.parametrize("durable", ["kept", "gone"])
def test_advisories_the_capture_stream_dropped_while_the_collector_was_stopped_become_a_gap(
        own_server, db_path, run, durable, monkeypatch):
    """More advisories than the capture stream's size cap arrive while the collector is stopped
    (and its durable outlived its inactive threshold, or not): the lost range is a gap row."""
    from jetwatch.collectors.capture_gaps import DROPPED, DURABLE_GONE
    store = Store(db_path)
    settings = collector_settings(own_server.url, db_path, ("S",), capture_max_bytes=16384)

    async def scenario() -> None:
        nc = await nats.connect(own_server.url)
        api = JetStreamAPI(nc)
        async with collecting(settings) as collector:
            await _naks(nc, "before", 2)
            await eventually(lambda: rows(store, "SELECT count(*) FROM advisories") == [(2,)], message="two stored")
            name = collector.capture.durable
        assert _gaps(store) == []
        last = rows(store, "SELECT last_seq FROM capture_cursor")[0][0]
        if durable == "gone":
            await api.delete_consumer(settings.capture_stream, name)
        await _naks(nc, "while-stopped", 200)
        async with collecting(settings) as collector:
            await eventually(lambda: collector.caught_up, message="caught up after the restart")
            await eventually(lambda: _gaps(store), message="the gap recorded")
            [(from_seq, to_seq, missed, ordered, reason)] = _gaps(store)
            assert (from_seq, to_seq, ordered) == (last + 1, last + missed, True)
            assert reason == (DURABLE_GONE if durable == "gone" else DROPPED)
            kept = sorted(int(r[0].rsplit("-", 1)[1]) for r in
                          rows(store, "SELECT id FROM advisories WHERE id LIKE 'while-stopped-%'"))
            assert kept == list(range(kept[0], 200)) and kept[0] > 100  # the cap kept the newest only
            assert kept[0] <= missed <= kept[0] + 5  # the lost ones (and the odd other advisory)
            await eventually(lambda: collector.judged is not None, message="a judged cycle")
            exposed = _exposed(collector)
            assert exposed["jetwatch_collector_capture_gaps_total"] == 1.0
            found = rows(store, "SELECT epoch(detected_at) FROM capture_gaps")[0][0]
            assert exposed["jetwatch_collector_last_capture_gap_timestamp_seconds"] == pytest.approx(found)
        async with collecting(settings) as collector:  # a restart still exports when the gap was found
            await eventually(lambda: collector.judged is not None, message="a judged cycle")
            exposed = _exposed(collector)
            assert exposed["jetwatch_collector_capture_gaps_total"] == 0.0
            assert exposed["jetwatch_collector_last_capture_gap_timestamp_seconds"] == pytest.approx(found)
        if durable == "kept":  # the pages say so
            for page in (None, "views/pins.py"):
                shown = [w for w in _dashboard_warnings(db_path, page, monkeypatch) if "Pin history incomplete" in w]
                assert len(shown) == 1 and f"({missed} advisories lost from the capture stream JETWATCH_ADVISORIES: " \
                    "the capture stream's size or age limit dropped these" in shown[0], shown
        await nc.close()

    run(scenario())


def test_advisories_a_stopped_collector_fetched_and_never_stored_come_back_and_are_no_gap(own_server, db_path, run):
    """A collector killed between fetching a batch and storing it (or one whose store was full)
    leaves the batch unacknowledged on its durable, which hands out the newer advisories first and
    redelivers the batch after its ack_wait: skipped for a while, never lost. Every advisory is
    stored once and no gap is booked (one used to be, for advisories the stream still held)."""
    store = Store(db_path)
    settings = collector_settings(own_server.url, db_path, ("S",))

    async def scenario() -> None:
        nc = await nats.connect(own_server.url)
        async with collecting(settings) as collector:
            await _naks(nc, "first", 2)
            await eventually(lambda: rows(store, "SELECT count(*) FROM advisories") == [(2,)], message="two stored")
            durable = collector.capture.durable
        await _naks(nc, "fetched", 3)
        died = await nc.jetstream().pull_subscribe_bind(durable, settings.capture_stream)
        assert len(await died.fetch(3, timeout=10)) == 3  # and never acknowledged: the collector died here
        await died.unsubscribe()
        await _naks(nc, "after", 3)
        async with collecting(settings) as collector:
            await eventually(lambda: rows(store, "SELECT count(*) FROM advisories WHERE id LIKE 'after-%'") == [(3,)],
                             message="the newer advisories stored first")
            await eventually(lambda: rows(store, "SELECT count(*) FROM advisories") == [(8,)], timeout=30,
                             message="the fetched three stored once the durable redelivered them")
        assert _gaps(store) == []
        assert rows(store, "SELECT awaiting FROM capture_cursor") == [(None,)]  # written with the advisories
        await nc.close()

    run(scenario())


def test_a_collector_sigkilled_again_and_again_under_a_stream_of_advisories_stores_each_once_and_books_no_gap(
        own_server, db_path, tmp_path):
    """NAKs published at about 20 a second while the collector is SIGKILLed four times at random
    points of its work and started again at once: every advisory is stored exactly once, and no
    gap is booked for any of them (a killed collector's fetched batch comes back late)."""
    import random

    store, rng, total = Store(db_path), random.Random(7), 400
    loop = LoopThread()

    async def naks() -> None:
        nc = await nats.connect(own_server.url)
        for i in range(total):
            await nc.publish(NAKED, _advisory("nak", f"flood-{i}", "S", "w", stream_seq=i + 1, consumer_seq=i + 1,
                                              deliveries=2))
            await asyncio.sleep(0.05)
        await nc.flush()
        await nc.close()

    def collector() -> subprocess.Popen[bytes]:
        with open(tmp_path / "collector.log", "ab") as log:
            return subprocess.Popen([sys.executable, "-m", "jetwatch.cli", "collect", "--server", own_server.url,
                                     "--db", db_path, "--include-streams", "S", "--interval", "0.5s"],
                                    env=clean_env(), stdout=log, stderr=subprocess.STDOUT)

    proc = collector()
    try:
        wait_until(lambda: store.exists() and rows(store, "SELECT count(*) FROM collector_status")[0][0] > 0,
                   timeout=60, message="the collector's first cycle")
        publishing = asyncio.run_coroutine_threadsafe(naks(), loop.loop)
        kills = 0
        while kills < 4 and not publishing.done():
            stored = rows(store, "SELECT count(*) FROM advisories")[0][0]
            wait_until(lambda: rows(store, "SELECT count(*) FROM advisories")[0][0] > stored or publishing.done(),
                       timeout=60, message="more advisories stored before the next kill")
            time.sleep(rng.uniform(0.0, 0.5))  # a random point of the collector's work, not a wait for a condition
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            kills += 1
            proc = collector()
        assert kills >= 2, "the advisories were all published before the collector could be killed twice"
        publishing.result(timeout=60)
        wait_until(lambda: rows(store, "SELECT count(*) FROM advisories")[0][0] >= total, timeout=60,
                   message="every advisory stored after the last restart")
        assert rows(store, "SELECT count(*), count(DISTINCT id) FROM advisories") == [(total, total)]
        assert _gaps(store) == []
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        loop.close()


def test_a_capture_stream_deleted_while_the_collector_runs_is_recreated_and_the_gap_said(own_server, db_path, run):
    from jetwatch.collectors.capture_gaps import RECREATED
    store = Store(db_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "jetwatch.cli", "collect", "--server", own_server.url, "--db", db_path,
         "--interval", "0.5s", "--include-streams", "S"],
        env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    async def scenario() -> None:
        nc = await nats.connect(own_server.url)
        api = JetStreamAPI(nc)
        await eventually(lambda: store.exists() and rows(store, "SELECT capture_mode FROM collector_status") == [("durable",)],
                         timeout=30, message="durable capture")
        await _naks(nc, "before", 3)
        await eventually(lambda: rows(store, "SELECT count(*) FROM advisories") == [(3,)], message="three stored")
        last = rows(store, "SELECT last_seq FROM capture_cursor")[0][0]
        await api.request("STREAM.DELETE.JETWATCH_ADVISORIES")
        await eventually(lambda: _gaps(store), timeout=30, message="the gap recorded")
        assert _gaps(store) == [(last + 1, None, None, True, RECREATED)]
        info = await api.stream_info("JETWATCH_ADVISORIES")
        assert info["config"]["max_bytes"] == 256 << 20
        await _naks(nc, "after", 2)
        await eventually(lambda: rows(store, "SELECT count(*) FROM advisories WHERE id LIKE 'after-%'") == [(2,)],
                         timeout=30, message="capture goes on in the new stream")
        await eventually(lambda: rows(store, "SELECT capture_mode, capture_caught_up FROM collector_status")
                         == [("durable", True)], message="durable capture caught up again")
        await nc.close()

    try:
        run(scenario())
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    text = out.decode()
    assert proc.returncode == 0, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    assert "disappeared while the collector ran" in text


def test_capture_stream_limits_that_differ_are_corrected_or_reported(own_perms_server, tmp_path, run):
    """An existing capture stream with other limits than the settings: a user allowed to update
    streams corrects them; one who is not gets the difference in the collector's status."""

    async def scenario() -> None:
        nc = await nats.connect(own_perms_server.url, **ADMIN)
        api = JetStreamAPI(nc)
        await api.add_stream({"name": "CAPTURE_LIMITS", "subjects": ["$JS.EVENT.ADVISORY.CONSUMER.PINNED.>"],
                              "storage": "file", "max_age": 3600 * 10**9, "max_bytes": 1 << 20})
        limited = collector_settings(own_perms_server.url, str(tmp_path / "l.duckdb"), ("OPEN",), user="limited",
                                     password="limited-pw", capture_stream="CAPTURE_LIMITS")
        async with collecting(limited):
            warning = rows(Store(limited.db), "SELECT capture_warning FROM collector_status")[0][0]
        assert warning.startswith("the capture stream CAPTURE_LIMITS has other limits than the settings (max_age "
                                  "3600000000000 instead of 604800000000000, max_bytes 1048576 instead of 268435456, subjects")
        assert "Run `jetwatch setup`" in warning
        allowed = collector_settings(own_perms_server.url, str(tmp_path / "a.duckdb"), ("OPEN",), user="watcher",
                                     password="watcher-pw", capture_stream="CAPTURE_LIMITS")
        async with collecting(allowed):
            assert rows(Store(allowed.db), "SELECT capture_warning FROM collector_status") == [(None,)]
        config = (await api.stream_info("CAPTURE_LIMITS"))["config"]
        assert (config["max_age"], config["max_bytes"], len(config["subjects"])) == (604800 * 10**9, 256 << 20, 10)
        await api.request("STREAM.DELETE.CAPTURE_LIMITS")
        await nc.close()

    run(scenario())


# -- clock skew ----------------------------------------------------------------------------------

# Debian's faketime library, preloaded straight into the collector (the `faketime` wrapper
# would stand between the test's SIGTERM and the collector).
LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"


@pytest.mark.skipif(not Path(LIBFAKETIME).exists(), reason="Debian's faketime is not installed (make system-deps)")
def test_a_collector_host_five_minutes_off_still_judges_and_invents_no_pin_events(own_server, db_path, run, monkeypatch):
    """The collector process runs under faketime, its clock 5 minutes ahead of the server's:
    windows and inference cutoffs follow the server's clock, so a consumer with work and no
    pullers is judged (not COLLECTING), pin switches are stored once each, from their advisories,
    and the offset is in the status."""
    from jetwatch.demo.workers import PullWorker

    store = Store(db_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "jetwatch.cli", "collect", "--server", own_server.url,
         "--db", db_path, "--interval", "0.3s", "--health-window", "30s", "--health-min-span", "1s",
         "--inference-grace", "1.5s", "--include-streams", "IDLE,PINS"],
        env=clean_env(LD_PRELOAD=LIBFAKETIME, FAKETIME="+5m"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    async def scenario() -> None:
        nc = await nats.connect(own_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, "IDLE", ["idle.>"])
        await make_consumer(api, "IDLE", "idle")
        await publish(nc, "idle.x", 5)
        await make_stream(api, "PINS", ["pins.>"])
        await make_consumer(api, "PINS", "w", "pinned_client", timeout_s=30)
        workers = [PullWorker(nc, "PINS", "w", "jobs", name=n).start() for n in ("a", "b")]
        try:
            await eventually(lambda: store.exists() and rows(store, "SELECT capture_caught_up FROM collector_status")
                             == [(True,)], timeout=30, message="the collector running")
            for _ in range(6):
                await publish(nc, "pins.x", 2)
                await eventually(lambda: any(w.pin_id for w in workers), message="a pin")
                await asyncio.sleep(0.4)  # a sample or two sees this pin before the next switch
                await api.unpin("PINS", "w", "jobs")
            await publish(nc, "pins.x", 2)
            pinned = "SELECT count(*) FROM advisories WHERE stream = 'PINS' AND kind = 'consumer_group_pinned'"
            await eventually(lambda: rows(store, pinned)[0][0] >= 7, message="the pins captured")
            # Past the inference grace on either clock, with every advisory stored: nothing inferred.
            await eventually(lambda: rows(store, "SELECT count(*) FROM samples WHERE stream = 'PINS' AND ts > "
                                                 "(SELECT max(ts) FROM advisories) + INTERVAL 3 SECOND")[0][0] > 0,
                             message="samples past the grace")
            assert rows(store, "SELECT event, why FROM inferred_pin_events") == []
            await eventually(lambda: rows(store, "SELECT verdict FROM verdicts_current WHERE stream = 'IDLE'")
                             == [("NO_PULLERS",)], timeout=30, message="the idle consumer judged")
            offset = rows(store, "SELECT clock_offset_seconds FROM collector_status")[0][0]
            assert -302 < offset < -298
        finally:
            for w in workers:
                await w.stop()
            await nc.close()

    try:
        run(scenario())
    except BaseException:
        proc.send_signal(signal.SIGTERM)
        print(proc.communicate(timeout=30)[0].decode()[-5000:])  # what the collector said
        raise
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out.decode()[-3000:]
    shown = [w for w in _dashboard_warnings(db_path, None, monkeypatch) if "clock" in w]
    assert len(shown) == 1 and re.match(r"The server's clock is (4 min 5\d s|5 min( \d s)?) behind the collector's",
                                         shown[0]), shown  # 5 minutes, in the words every page uses


def _fleet_page(db: str, monkeypatch: pytest.MonkeyPatch, stale_after: str):
    """The Fleet page over `db` under Streamlit's AppTest, its data stale after `stale_after`."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("JETWATCH_DB", db)
    monkeypatch.setenv("JETWATCH_STALE_AFTER", stale_after)
    st.cache_data.clear()
    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "dashboard" / "app.py"), default_timeout=60)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    st.cache_data.clear()
    return at


def _last_cycle_seconds(at) -> float:
    """The sidebar's "last cycle 1 min 4 s ago", in seconds."""
    import re

    said = next(c.value for c in at.sidebar.caption if c.value.startswith("last cycle "))
    words = re.match(r"last cycle ((?:-?[\d.]+ (?:d|h|min|s) ?)+) ago", said).group(1)
    return sum(float(n) * {"s": 1, "min": 60, "h": 3600, "d": 86400}[u] for n, u in re.findall(r"(-?[\d.]+) (\w+)", words))


@pytest.mark.skipif(not Path(LIBFAKETIME).exists(), reason="Debian's faketime is not installed (make system-deps)")
@pytest.mark.parametrize("skew", ["-5m", "+5m"])
def test_the_collectors_staleness_is_judged_on_the_servers_clock(own_server, db_path, run, monkeypatch, skew):
    """The collector's host 5 minutes behind the server: while it runs, the Fleet must not say it
    stopped. 5 minutes ahead: once it stopped, the Fleet must say so, and never "-300s ago". Its
    times are read on the server's clock, with the offset it measured, as verdicts are."""
    import time

    from tests.helpers import one_consumer_stream, wait_until

    store = Store(db_path)
    run(one_consumer_stream(own_server.url, "SKEW", "skew.x"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "jetwatch.cli", "collect", "--server", own_server.url, "--db", db_path,
         "--interval", "0.3s", "--include-streams", "SKEW"],
        env=clean_env(LD_PRELOAD=LIBFAKETIME, FAKETIME=skew), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: store.exists() and abs(rows(store, "SELECT coalesce(max(abs(clock_offset_seconds)), 0) "
                                                              "FROM collector_status")[0][0] - 300) < 5,
                   timeout=30, message="the collector measured its clock's offset")
        if skew == "-5m":
            at = _fleet_page(db_path, monkeypatch, "30s")
            assert not [w.value for w in at.warning if "stale" in w.value], [w.value for w in at.warning]
            assert 0 <= _last_cycle_seconds(at) < 30
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    if skew == "+5m":
        stopped = time.monotonic()
        wait_until(lambda: time.monotonic() - stopped > 3, message="the collector stopped for longer than stale_after")
        at = _fleet_page(db_path, monkeypatch, "2s")
        assert [w.value for w in at.warning if w.value.startswith("Data is stale: collector stopped")], \
            [w.value for w in at.warning]
        assert 3 <= _last_cycle_seconds(at) < 60
