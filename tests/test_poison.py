"""Poison messages against a real server: a message naked until max_deliver drops it, one a client
terminates with a reason, and one gone before the collector could read it. Each is listed with what
the stream said of it (subject, stored time) in the store, /metrics, `status --json` and on the
Consumer page; naked messages still owed show the deliveries max_deliver leaves them."""

from __future__ import annotations

import json
import subprocess
import sys

import nats

from jetwatch.core.embedded_server import free_port
from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.store.database import Store
from tests.helpers import clean_env, collecting, collector_settings, eventually, make_consumer, make_stream, rows
from tests.incident_library import Client
from tests.test_dashboard import frame, run_app
from tests.test_metrics import scrape

DROPPED = ("SELECT dropped_by, stream_seq, deliveries, reason, read_state, message_subject, message_time, read_note "
           "FROM dropped_messages WHERE stream = ? AND consumer = ? ORDER BY stream_seq")
RAW = "SELECT raw FROM advisories WHERE stream = ? AND consumer = ? AND kind = ? ORDER BY ts"


def _status(db_path: str, stream: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "jetwatch.cli", "status", "--json", "--db", db_path],
                         env=clean_env(), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    [mine] = [r for r in json.loads(out.stdout) if r["stream"] == stream]
    return mine


def _read(store: Store, stream: str, consumer: str, count: int = 1) -> list[tuple]:
    """The dropped messages once every one has been read (found, or known gone)."""
    def done() -> list[tuple]:
        got = rows(store, DROPPED, [stream, consumer])
        return got if len(got) >= count and all(r[4] is not None for r in got) else []
    return done()


async def _acked_through(api: JetStreamAPI, stream: str, consumer: str, seq: int) -> bool:
    info = await api.request(f"CONSUMER.INFO.{stream}.{consumer}", None)
    return bool(info["ack_floor"]["stream_seq"] >= seq)


def test_a_poison_message_naked_to_max_deliver_is_listed_with_its_subject(nats_server, db_path, uid, run, app_env):
    stream, consumer, subject = f"{uid}_POISON", "orders", f"{uid.lower()}.poison.order.42"
    store = Store(db_path)
    settings = collector_settings(nats_server.url, db_path, (stream,), metrics_address=f"127.0.0.1:{free_port()}",
                                  metrics_cardinality="all")

    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid.lower()}.poison.>"], allow_direct=True)
        await make_consumer(api, stream, consumer, max_deliver=3)
        async with collecting(settings) as collector:
            worker = Client(nc, stream, consumer, nak_body=b"poison", expires_s=0.5).start()
            await nc.request(f"{uid.lower()}.poison.order.41", b"fine", timeout=5)
            await nc.request(subject, b"poison", timeout=5)
            await nc.request(f"{uid.lower()}.poison.order.43", b"fine", timeout=5)
            got = await eventually(lambda: _read(store, stream, consumer), message="the drop stored and read")
            [(by, seq, deliveries, reason, state, subj, stored, _)] = got
            assert (by, seq, deliveries, reason, state, subj) == ("max_deliver", 2, 3, None, "found", subject)
            assert stored is not None
            # The server's facts: MAX_DELIVERIES has the stream sequence and the deliveries, no subject
            # or time; each NAK advisory has the message's delivery count.
            [(raw,)] = rows(store, RAW, [stream, consumer, "max_deliver"])
            doc = json.loads(raw)
            assert (doc["stream_seq"], doc["deliveries"]) == (2, 3)
            assert "subject" not in doc and "time" not in doc
            naks = [json.loads(r) for (r,) in await eventually(
                lambda: len(rows(store, RAW, [stream, consumer, "nak"])) >= 3 and rows(store, RAW, [stream, consumer, "nak"]),
                message="the naks stored")]
            assert sorted(n["deliveries"] for n in naks) == [1, 2, 3]
            assert {n["stream_seq"] for n in naks} == {2}

            def counted() -> list:
                assert collector.metrics_bound is not None
                fams = scrape(collector.metrics_bound)
                return [s for s in fams.get("jetwatch_consumer_dropped_messages", [])
                        if s.labels["stream"] == stream and s.labels["reason"] == "max_deliver" and s.value == 1]
            await eventually(counted, message="the drop in /metrics")
            fleet = scrape(collector.metrics_bound)["jetwatch_dropped_messages"]
            assert any(s.labels == {"reason": "max_deliver"} and s.value >= 1 for s in fleet)
            await worker.stop()
        await nc.close()

    run(scenario())

    mine = _status(db_path, stream)
    assert mine["dropped"]["count"] == 1
    [d] = mine["dropped"]["latest"]
    assert (d["stream_seq"], d["dropped_by"], d["deliveries"], d["subject"], d["read"]) == (
        2, "max_deliver", 3, subject, "found")
    assert d["stored_at"] and d["get"] == f"nats stream get {stream} 2"

    app_env(db_path)
    at = run_app("views/consumer.py", stream=stream, consumer=consumer)
    table = frame(at, "Stream seq")
    row = table.iloc[0]
    assert (row["Stream seq"], row["Subject"], row["Deliveries"], row["Reason"]) == (2, subject, "3", "max_deliver reached")
    assert row["Stored (UTC)"] and row["Read it with"] == f"nats stream get {stream} 2"
    assert any(f"nats stream get {stream} 2" in c.value for c in at.code)


def test_a_terminated_message_shows_its_reason_and_a_naked_one_its_deliveries_left(nats_server, db_path, uid, run,
                                                                                   app_env):
    stream, consumer = f"{uid}_TERM", "billing"
    store = Store(db_path)
    settings = collector_settings(nats_server.url, db_path, (stream,))

    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid.lower()}.term.>"])  # no direct get: read with STREAM.MSG.GET
        await make_consumer(api, stream, consumer, max_deliver=5)
        await nc.request(f"{uid.lower()}.term.invoice", b"unparseable", timeout=5)
        await nc.request(f"{uid.lower()}.term.retry", b"flaky", timeout=5)
        async with collecting(settings):
            sub = await nc.jetstream().pull_subscribe_bind(consumer, stream)
            first, second = await sub.fetch(2, timeout=5)
            await nc.publish(first.reply, b"+TERM schema v1 is not supported")
            await second.nak()
            [again] = await sub.fetch(1, timeout=5)
            assert again.metadata.sequence.stream == 2 and again.metadata.num_delivered == 2
            await again.nak()
            await nc.flush()
            got = await eventually(lambda: _read(store, stream, consumer), message="the termination stored and read")
            [(by, seq, deliveries, reason, state, subj, _, _)] = got
            assert (by, seq, deliveries, reason, state, subj) == (
                "terminated", 1, 1, "schema v1 is not supported", "found", f"{uid.lower()}.term.invoice")
            [(raw,)] = rows(store, RAW, [stream, consumer, "terminated"])
            doc = json.loads(raw)  # MSG_TERMINATED adds consumer_seq and reason; no subject or time either
            assert (doc["stream_seq"], doc["consumer_seq"], doc["reason"]) == (1, 1, "schema v1 is not supported")
            assert "subject" not in doc and "time" not in doc
            await eventually(lambda: len(rows(store, RAW, [stream, consumer, "nak"])) == 2, message="both naks stored")
            await eventually(lambda: rows(store, "SELECT ack_floor_stream_seq FROM consumer_latest WHERE stream = ?",
                                          [stream]) == [(1,)], message="the ack floor past the terminated message")
            await sub.unsubscribe()
        await nc.close()

    run(scenario())

    [d] = _status(db_path, stream)["dropped"]["latest"]
    assert (d["dropped_by"], d["reason"], d["subject"]) == ("terminated", "schema v1 is not supported",
                                                            f"{uid.lower()}.term.invoice")
    app_env(db_path)
    at = run_app("views/consumer.py", stream=stream, consumer=consumer)
    row = frame(at, "Stream seq").iloc[0]
    assert row["Reason"] == "terminated by a client: schema v1 is not supported"
    naks = frame(at, "Left before dropped")
    assert naks.iloc[0][["Stream seq", "Deliveries", "Left before dropped"]].tolist() == [2, "2", "3"]


def test_a_message_gone_before_it_is_read_says_so(nats_server, db_path, uid, run, app_env):
    stream, consumer = f"{uid}_GONE", "audit"
    store = Store(db_path)
    settings = collector_settings(nats_server.url, db_path, (stream,))

    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid.lower()}.gone.>"], allow_direct=True)
        await make_consumer(api, stream, consumer, max_deliver=2)
        async with collecting(settings):  # the capture stream exists from here on
            pass
        # While no collector runs: the message is terminated, then deleted; the advisory waits in
        # the capture stream, the message does not wait for the collector.
        await nc.request(f"{uid.lower()}.gone.x", b"short-lived", timeout=5)
        sub = await nc.jetstream().pull_subscribe_bind(consumer, stream)
        [msg] = await sub.fetch(1, timeout=5)
        await msg.term()
        await nc.flush()
        # The server queues acknowledgements; a delete that overtakes the term would be the
        # server's own drop ("Unacknowledged message was deleted"), a different story.
        await eventually(lambda: _acked_through(api, stream, consumer, 1), message="the term taken by the consumer")
        await api.request(f"STREAM.MSG.DELETE.{stream}", {"seq": 1})
        async with collecting(settings):
            got = await eventually(lambda: _read(store, stream, consumer), message="the drop stored and read")
        [(by, seq, _, _, state, subj, stored, note)] = got
        assert (by, seq, state, subj, stored) == ("terminated", 1, "gone", None, None)
        assert note == f"stream {stream} no longer has message 1"
        await sub.unsubscribe()
        await nc.close()

    run(scenario())

    [d] = _status(db_path, stream)["dropped"]["latest"]
    assert (d["read"], d["subject"]) == ("gone", None)
    app_env(db_path)
    at = run_app("views/consumer.py", stream=stream, consumer=consumer)
    assert frame(at, "Stream seq").iloc[0]["Subject"] == "(gone before it was read)"


def test_a_message_the_streams_limits_removed_while_owed_is_lost_not_poison(nats_server, db_path, uid, run, app_env):
    """A worker holds message 1; the stream keeps 3 messages and 3 more arrive: the server removes
    the held one and says so (MSG_TERMINATED, "Unacknowledged message was deleted"). It is listed
    as removed by the stream, never as given up on by a handler, and no line offers to read what
    the stream no longer has; a message a client terminated beside it keeps its own words and line."""
    stream, consumer = f"{uid}_LIMITS", "audit"
    store = Store(db_path)
    settings = collector_settings(nats_server.url, db_path, (stream,))

    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid.lower()}.limits.>"], max_msgs=3, discard="old", allow_direct=True)
        await make_consumer(api, stream, consumer)
        async with collecting(settings):
            await nc.request(f"{uid.lower()}.limits.first", b"job", timeout=5)
            sub = await nc.jetstream().pull_subscribe_bind(consumer, stream)
            [held] = await sub.fetch(1, timeout=5)  # held, never acknowledged
            for i in range(3):  # the stream keeps 3: message 1 goes while owed
                await nc.request(f"{uid.lower()}.limits.more{i}", b"job", timeout=5)
            [refused] = await sub.fetch(1, timeout=5)
            await nc.publish(refused.reply, b"+TERM not mine")
            await nc.flush()
            got = await eventually(lambda: _read(store, stream, consumer, 2), message="both drops stored and read")
            await sub.unsubscribe()
        by_seq = {seq: (by, reason, state) for by, seq, _, reason, state, *_ in got}
        assert by_seq[1] == ("terminated", "Unacknowledged message was deleted", "gone"), got
        assert by_seq[2][:2] == ("terminated", "not mine"), got
        await nc.close()

    run(scenario())

    latest = {d["stream_seq"]: d for d in _status(db_path, stream)["dropped"]["latest"]}
    assert (latest[1]["cause"], latest[1]["get"]) == ("removed", None)
    assert latest[2]["cause"] == "terminated" and latest[2]["get"] == f"nats stream get {stream} 2"
    app_env(db_path)
    at = run_app("views/consumer.py", stream=stream, consumer=consumer)
    table = frame(at, "Stream seq").set_index("Stream seq")
    assert table.loc[1, "Reason"].startswith("removed from the stream before it was acknowledged"), table
    assert table.loc[1, "Read it with"] == "(the stream no longer has it)", table
    assert table.loc[2, "Reason"] == "terminated by a client: not mine", table
    lines = [c.value for c in at.code]
    assert any(f"nats stream get {stream} 2" in v for v in lines) and not any(f" {stream} 1" in v for v in lines), lines
    captions = " ".join(c.value for c in at.caption)
    assert "1 removed from the stream before it was acknowledged" in captions and "lost, not poison" in captions
