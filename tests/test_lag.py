"""Time lag against a real server: the ages the collector stores are the stream's own timestamps of
the right messages (read back here through nats-py's own client, an independent path), estimates
are labelled as such, and the interpolation behind them is a table."""

from __future__ import annotations

import datetime as dt
import json
import time

import nats
import pytest

from jetwatch.collectors.lag import History, StreamFacts
from jetwatch.core.embedded_server import NatsServer
from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.store.database import Store
from tests.helpers import collecting, collector_settings, eventually, make_consumer, make_stream, rows

LATEST = ("SELECT ts, oldest_unacked_age_seconds, oldest_unacked_age_kind, oldest_undelivered_age_seconds, "
          "oldest_undelivered_age_kind FROM consumer_latest WHERE stream = ? AND consumer = ?")


async def message_time(nc: nats.NATS, stream: str, seq: int) -> float:
    """A stored message's timestamp, read with nats-py's JetStream client (not jetwatch's reader)."""
    msg = await nc.jetstream().get_msg(stream, seq)
    text = msg.headers["Nats-Time-Stamp"] if msg.headers and "Nats-Time-Stamp" in msg.headers else None
    if text is None:  # nats-py's STREAM.MSG.GET reply keeps the time in the JSON it parsed
        raw = await nc.request(f"$JS.API.STREAM.MSG.GET.{stream}", json.dumps({"seq": seq}).encode(), timeout=5)
        text = json.loads(raw.data)["message"]["time"]
    return dt.datetime.fromisoformat(text[:26].rstrip("Z") + "+00:00" if text.endswith("Z") else text).timestamp()


async def publish_at_known_times(nc: nats.NATS, subjects: list[str]) -> list[tuple[float, float]]:
    """Publish one message per subject, each between two readings of the clock."""
    out = []
    for subject in subjects:
        before = time.time()
        await nc.request(subject, b"job", timeout=5)
        out.append((before, time.time()))
    return out


async def latest(store: Store, stream: str, consumer: str, want: str | None = "exact") -> tuple:
    row = await eventually(lambda: [r for r in rows(store, LATEST, [stream, consumer])
                                    if r[1] is not None and (want is None or r[2] == want)],
                           message=f"an age for {stream}/{consumer}")
    return row[0]


def test_oldest_unacked_age_is_the_floor_messages_timestamp(nats_server, db_path, store, uid, run):
    """Five jobs published at known times; a worker takes all five, acks the first two and stalls.
    The oldest unacked message is the third: its age is the sample's time minus that message's
    timestamp, within its publish window, and the oldest undelivered is absent (all delivered)."""
    stream = f"{uid}LAG"

    async def go() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid}.lag.>"])
        await make_consumer(api, stream, "worker", ack_wait=int(300e9))
        known = await publish_at_known_times(nc, [f"{uid}.lag.x"] * 5)
        sub = await nc.jetstream().pull_subscribe_bind("worker", stream=stream)
        msgs = await sub.fetch(5, timeout=5)
        for m in msgs[:2]:
            await m.ack_sync()
        third = await message_time(nc, stream, 3)
        assert known[2][0] - 0.001 <= third <= known[2][1] + 0.001
        async with collecting(collector_settings(nats_server.url, db_path, (stream,))):
            ts, unacked, kind, undelivered, _ = await latest(store, stream, "worker")
            check_time = time.time()
        assert kind == "exact"
        assert unacked == pytest.approx(ts.timestamp() - third, abs=0.001)
        assert ts.timestamp() - known[2][1] <= unacked + 0.001 and unacked <= ts.timestamp() - known[2][0] + 0.001
        # The truth when the test looked is at most one sampling interval (and a cycle) ahead.
        assert (check_time - third) - unacked >= 0
        assert undelivered is None  # everything was delivered
        await nc.close()

    run(go())


def test_a_filtered_consumer_reports_its_own_subjects_message(nats_server, db_path, store, uid, run):
    """Subjects interleaved a, b, a, b: a consumer filtered on b, nothing delivered, reports the
    age of the first b (sequence 2), not of the stream's first message."""
    stream = f"{uid}FILT"

    async def go() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid}.f.>"], allow_direct=True)
        await make_consumer(api, stream, "only-b", filter_subject=f"{uid}.f.b")
        await make_consumer(api, stream, "multi", filter_subjects=[f"{uid}.f.b", f"{uid}.f.c"])
        await publish_at_known_times(nc, [f"{uid}.f.a", f"{uid}.f.b", f"{uid}.f.a", f"{uid}.f.b"])
        first_b = await message_time(nc, stream, 2)
        first_a = await message_time(nc, stream, 1)
        async with collecting(collector_settings(nats_server.url, db_path, (stream,))):
            ts, unacked, kind, undelivered, ukind = await latest(store, stream, "only-b")
            multi_ts, multi, multi_kind, _, _ = await latest(store, stream, "multi")
        assert (kind, ukind) == ("exact", "exact")
        assert unacked == pytest.approx(ts.timestamp() - first_b, abs=0.001)
        assert undelivered == pytest.approx(unacked, abs=0.001)  # nothing delivered: the same message
        # Each age against its own sample's time: the two latest samples may be from different cycles.
        assert multi_kind == "exact" and multi == pytest.approx(multi_ts.timestamp() - first_b, abs=0.001)
        assert first_a < first_b
        await nc.close()

    run(go())


def test_a_floor_message_removed_by_max_msgs_gives_the_first_message_still_there(nats_server, db_path, store,
                                                                                  uid, run):
    """max_msgs 3 and six messages: 1-3 are gone while the consumer's floor is still 0. The oldest
    unacknowledged message it can still get is sequence 4."""
    stream = f"{uid}MAXM"

    async def go() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid}.m.>"], max_msgs=3)
        await make_consumer(api, stream, "late")
        await publish_at_known_times(nc, [f"{uid}.m.x"] * 6)
        fourth = await message_time(nc, stream, 4)
        async with collecting(collector_settings(nats_server.url, db_path, (stream,))):
            ts, unacked, kind, undelivered, _ = await latest(store, stream, "late")
        assert kind == "exact"
        assert unacked == pytest.approx(ts.timestamp() - fourth, abs=0.001)
        assert undelivered == pytest.approx(unacked, abs=0.001)
        await nc.close()

    run(go())


COLLECTOR_PERMISSIONS = [
    "$JS.API.INFO", "$JS.API.STREAM.NAMES", "$JS.API.STREAM.LIST", "$JS.API.CONSUMER.LIST.*",
    "$JS.API.STREAM.INFO.JETWATCH_ADVISORIES", "$JS.API.CONSUMER.CREATE.JETWATCH_ADVISORIES.>",
    "$JS.API.CONSUMER.INFO.JETWATCH_ADVISORIES.*", "$JS.API.CONSUMER.MSG.NEXT.JETWATCH_ADVISORIES.*",
    "$JS.ACK.JETWATCH_ADVISORIES.>", "$SYS.REQ.USER.INFO"]


def _ages_as_watcher(tmp_path, db_path, store, run, allowed: list[str]) -> tuple:
    """A server where `watcher` may publish only `allowed`; a direct-get stream DENIED with four
    messages nobody took. Returns (sample ts, unacked age, kind, undelivered age, kind, oldest
    message time, newest message time, the collector's denied streams)."""
    conf = tmp_path / "perms.conf"
    conf.write_text("authorization { users: [\n"
                    "  { user: admin, password: admin-pw }\n"
                    f"  {{ user: watcher, password: watcher-pw, permissions: {{ publish: {json.dumps(allowed)}, "
                    "subscribe: [\"_INBOX.>\"] } }\n]}\n")
    server = NatsServer(store_dir=tmp_path / "js", extra_args=["-c", str(conf)]).start()
    out: list = []

    async def go() -> None:
        nc = await nats.connect(server.url, user="admin", password="admin-pw")
        api = JetStreamAPI(nc)
        await make_stream(api, "DENIED", ["denied.>"], allow_direct=True)
        await make_consumer(api, "DENIED", "worker")
        await publish_at_known_times(nc, ["denied.x"] * 4)
        oldest, newest = await message_time(nc, "DENIED", 1), await message_time(nc, "DENIED", 4)
        settings = collector_settings(server.url, db_path, ("DENIED",), user="watcher", password="watcher-pw")
        async with collecting(settings) as collector:
            assert collector.lag is not None
            # Whatever its turn, the worker is read from its second cycle on: not OK (COLLECTING) then.
            await eventually(lambda: collector.cycles >= 3, message="a few cycles")
            row = await latest(store, "DENIED", "worker", want=None)
            out.extend([*row, oldest, newest, set(collector.lag.denied), collector._lag_refused])
        await nc.close()

    try:
        run(go())
    finally:
        server.stop()
    return tuple(out)


def test_a_user_denied_message_reads_gets_estimates_labelled_as_such(tmp_path, db_path, store, run, caplog):
    """The collector's user may list streams but not read messages (no DIRECT.GET or
    STREAM.MSG.GET): the server sends no reply; the ages are estimates from the stream's first and
    last message, between the ages of the newest and the oldest message, and say so."""
    ts, unacked, kind, undelivered, ukind, oldest, newest, denied, said = _ages_as_watcher(
        tmp_path, db_path, store, run, COLLECTOR_PERMISSIONS)
    assert denied == said == {"DENIED"}
    said_in_words = [r for r in caplog.records if r.name == "jetwatch.collector"
                     and "time lag: reading messages of stream(s) DENIED got no reply" in r.getMessage()]
    assert len(said_in_words) == 1  # said where the collector's errors go, once
    assert (kind, ukind) == ("estimate", "estimate")
    assert ts.timestamp() - newest - 0.001 <= unacked <= ts.timestamp() - oldest + 0.001


def test_a_user_denied_direct_get_reads_exact_ages_with_stream_msg_get(tmp_path, db_path, store, run):
    """Direct get refused but STREAM.MSG.GET allowed: the reader falls back to it, the ages are exact."""
    ts, unacked, kind, undelivered, ukind, oldest, newest, denied, said = _ages_as_watcher(
        tmp_path, db_path, store, run, COLLECTOR_PERMISSIONS + ["$JS.API.STREAM.MSG.GET.*"])
    assert denied == said == set()
    assert (kind, ukind) == ("exact", "exact")
    assert unacked == pytest.approx(ts.timestamp() - oldest, abs=0.001)


T = 1_000_000.0


@pytest.mark.parametrize("points, facts, seq, expected", [
    # (exact points read so far, stream first/last, sequence asked, estimated time)
    ([], StreamFacts(False, 1, T, 11, T + 100), 6, T + 50),            # halfway between first and last
    ([(6, T + 90)], StreamFacts(False, 1, T, 11, T + 100), 6, T + 90),  # an exact point wins
    ([(6, T + 90)], StreamFacts(False, 1, T, 11, T + 100), 8, T + 94),  # between the point and the last
    ([], StreamFacts(False, 5, T, 11, T + 60), 2, T),                   # removed: the first still there
    ([], StreamFacts(False, 1, T, 11, T + 100), 12, None),              # nothing at or after it
    ([(3, T + 10), (7, T + 50)], None, 5, T + 30),                      # no stream state: points only
    ([], None, 5, None),                                                # nothing known
])
def test_interpolated_time_of_a_sequence(points, facts, seq, expected):
    history = History()
    for s, t in points:
        history.add(s, t)
    got = history.estimate(seq, facts)
    assert got == (None if expected is None else pytest.approx(expected))


def test_non_ok_consumers_are_read_every_cycle_and_the_rest_in_turn_or_marked_estimates(nats_server, uid, run):
    """Two consumers whose floors move between cycles: the one named non-OK is read each cycle
    (exact, at its new floor); the other, not due in a long rotation, is an estimate. With a
    refresh period (lag_every), a cycle in between reads nothing, yet a floor that did not move
    keeps its exact age, grown by the time that passed."""
    import zlib

    from jetwatch.collectors.consumer_list import ConsumerListCollector
    from jetwatch.collectors.consumer_state import Scope
    from jetwatch.collectors.filters import NameFilter
    from jetwatch.collectors.lag import LagReader
    from jetwatch.core.clock import rfc3339, utcnow

    stream = f"{uid}ROT"

    async def go() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid}.r.>"])
        await make_consumer(api, stream, "urgent", ack_wait=int(300e9))
        # calm starts further on, so the two never share a read (a shared one would be exact for both)
        await make_consumer(api, stream, "calm", ack_wait=int(300e9), deliver_policy="by_start_sequence", opt_start_seq=3)
        await publish_at_known_times(nc, [f"{uid}.r.x"] * 6)
        times = [await message_time(nc, stream, seq) for seq in range(1, 7)]
        sampler = ConsumerListCollector(api, Scope("$G"), NameFilter(include_streams=(stream,)),
                                        lambda: rfc3339(utcnow()))
        rotation = 1000
        reader = LagReader(nc, "$G", rotation=rotation)
        # Start the rotation where neither consumer is due for a long while.
        turns = {zlib.crc32("\x1f".join(("$G", stream, c)).encode()) % rotation for c in ("urgent", "calm")}
        reader.cycle = next(c for c in range(rotation) if all((c + k) % rotation not in turns for k in range(3)))
        urgent = {("$G", stream, "urgent")}

        async def ages() -> dict[str, tuple]:
            batch = await sampler.collect()
            await reader.fill(batch, urgent)
            s = batch.samples
            return {s["consumer"][i]: (s["ts"][i], s["oldest_unacked_age_seconds"][i], s["oldest_unacked_age_kind"][i])
                    for i in range(batch.consumers)}

        def seconds(ts: str) -> float:
            return dt.datetime.fromisoformat(ts[:26].rstrip("Z") + "+00:00").timestamp()

        first = await ages()
        assert first["urgent"][2] == "exact" and first["urgent"][1] == pytest.approx(seconds(first["urgent"][0]) - times[0], abs=0.001)
        assert first["calm"][2] == "estimate"
        for name in ("urgent", "calm"):  # both take and acknowledge two: their floors move to 2
            sub = await nc.jetstream().pull_subscribe_bind(name, stream=stream)
            for m in await sub.fetch(2, timeout=5):
                await m.ack_sync()
        second = await ages()
        assert second["urgent"][2] == "exact"
        assert second["urgent"][1] == pytest.approx(seconds(second["urgent"][0]) - times[2], abs=0.001)
        assert second["calm"][2] == "estimate"
        assert reader.last.requests == 1  # only the urgent consumer's new floor was read

        reader.every = 3600.0  # from now on, reads at most hourly: this cycle reads nothing
        reader._last_refresh = reader.clock()
        third = await ages()
        assert reader.last.requests == 0
        assert third["urgent"][2] == "exact"
        assert third["urgent"][1] == pytest.approx(seconds(third["urgent"][0]) - times[2], abs=0.001)
        assert third["urgent"][1] >= second["urgent"][1]
        await nc.close()

    run(go())
