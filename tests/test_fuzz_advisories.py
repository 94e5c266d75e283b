"""Property-based tests at the advisory boundary, where anyone who may publish on
`$JS.EVENT.ADVISORY.CONSUMER.>` writes: any JSON, any Unicode (lone surrogates written as JSON
escapes, bidi overrides), huge fields, wrong types, forged subjects. The promise: every message is
stored or rejected, exactly once, and capture goes on. Bounded examples keep them in the normal
suite; `pytest tests/test_fuzz_advisories.py --hypothesis-profile=explore` searches further."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import nats
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jetwatch.collectors.advisories import (
    ADVISORY_PREFIX,
    MAX_ADVISORY_BYTES,
    TYPE_PREFIX,
    MalformedAdvisory,
    ensure_capture_stream,
    parse_advisory,
)
from jetwatch.collectors.runner import Collector
from jetwatch.core.connection import connect
from jetwatch.core.embedded_server import NatsServer
from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.store import writes
from jetwatch.store.database import Store
from tests.helpers import LoopThread, collector_settings, make_consumer, make_stream, rows, server_time, wait_until

KINDS = ("consumer_group_pinned", "consumer_group_unpinned", "nak", "terminated", "max_deliver",
         "consumer_action", "consumer_pause", "leader_elected", "not_a_kind")
SUBJECTS = tuple(f"{ADVISORY_PREFIX}{k}.S.w" for k in ("PINNED", "UNPINNED", "MSG_NAKED", "MSG_TERMINATED",
                                                       "MAX_DELIVERIES")) + (
    f"{ADVISORY_PREFIX}PINNED.S.someone-else", f"{ADVISORY_PREFIX}UNPINNED.X.w")  # forged: another consumer's
HOSTILE_TEXT = ("x\ud800y", "\udfff", "\u202eorders", "admin", "timeout", "<img src=x>", "r" * 2_000, "w" * 300)
_markers = itertools.count()

texts = st.one_of(st.text(max_size=20), st.sampled_from(HOSTILE_TEXT))
values = st.one_of(st.none(), st.booleans(), st.integers(-(2 ** 70), 2 ** 70), st.floats(), texts,
                   st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=4), st.integers(), max_size=2))


def mostly(good: st.SearchStrategy, bad: st.SearchStrategy) -> st.SearchStrategy:
    """Three times in four a value the checks take, else anything: most messages get far enough to
    reach the store, and every check still meets its wrong values."""
    return st.sampled_from((True, True, True, False)).flatmap(lambda ok: good if ok else bad)


# The stream and consumer are the watched ones, or wrong: a well-formed advisory of another stream
# is filtered out (neither stored nor rejected), which is not what these tests count.
FIELDS = {
    "stream": mostly(st.just("S"), st.one_of(st.none(), st.integers(), st.just("S" * 300))),
    "consumer": mostly(st.just("w"), st.one_of(st.none(), st.booleans(), st.just("w" * 300))),
    "account": mostly(st.sampled_from(["$G", "OTHER"]), values),
    "group": mostly(texts, values), "pinned_id": mostly(texts, values), "reason": mostly(texts, values),
    "domain": mostly(texts, values), "stream_seq": mostly(st.integers(0, 2 ** 63 - 1), values),
    "consumer_seq": mostly(st.integers(0, 2 ** 63 - 1), values), "deliveries": mostly(st.integers(0, 99), values),
}
OWN_SUBJECT = {"consumer_group_pinned": "PINNED", "consumer_group_unpinned": "UNPINNED", "nak": "MSG_NAKED",
               "terminated": "MSG_TERMINATED", "max_deliver": "MAX_DELIVERIES"}


@st.composite
def advisory(draw: Any) -> tuple[str, bytes, str]:
    """(subject, payload, marker): the marker is the message's id where it has a valid one, and is
    written first in every payload, so that a reject's raw text (cut to 4 KiB) still names it."""
    marker = f"fuzz-{next(_markers)}-{draw(st.integers(0, 10 ** 9))}"
    kind = draw(st.sampled_from(KINDS))
    own = f"{ADVISORY_PREFIX}{OWN_SUBJECT.get(kind, 'MSG_NAKED')}.S.w"
    subject = draw(mostly(st.just(own), st.sampled_from(SUBJECTS)))
    shape = draw(st.sampled_from(["advisory"] * 6 + ["array", "bytes", "padded"]))
    if shape == "bytes":
        return subject, marker.encode() + draw(st.binary(max_size=64)), marker
    if shape == "array":
        return subject, json.dumps([marker, draw(values)]).encode(), marker
    doc: dict[str, Any] = {"_m": marker}
    doc["type"] = draw(mostly(st.just(TYPE_PREFIX + kind), values))
    # A valid id is the marker; otherwise one the checks refuse (stored rows are found by id).
    doc["id"] = draw(mostly(st.just(marker), st.sampled_from(["", "i" * 129, 7, None])))
    doc["timestamp"] = draw(mostly(server_time(), values))
    for key, strategy in FIELDS.items():
        if key in ("stream", "consumer") or draw(st.booleans()):
            doc[key] = draw(strategy)
    if kind == "consumer_group_pinned" and draw(st.booleans()):
        doc["pinned_id"] = draw(mostly(st.text(min_size=1, max_size=22), values))
    if shape == "padded":
        doc["padding"] = "p" * draw(st.sampled_from([100, MAX_ADVISORY_BYTES, 100_000]))
    return subject, json.dumps(doc).encode(), marker  # ensure_ascii: a lone surrogate as a JSON escape


@pytest.fixture(scope="module")
def scratch_store(tmp_path_factory) -> Store:
    store = Store(tmp_path_factory.mktemp("fuzz") / "rows.duckdb")
    store.migrate()
    return store


@settings(max_examples=150, deadline=None)
@given(advisory())
def test_any_message_is_a_row_the_store_takes_or_a_rejection_in_words(scratch_store, message):
    """Whatever the payload, the reader either refuses it (MalformedAdvisory, never another
    exception) or returns a row within the bounds, which the store takes."""
    subject, payload, _ = message
    try:
        row = parse_advisory(subject, payload, "$G", "2026-11-22T10:00:00Z")
    except MalformedAdvisory as exc:
        assert str(exc)
        return
    assert len(payload) <= MAX_ADVISORY_BYTES
    assert all(len(row[k]) <= 256 for k in ("account", "stream", "consumer", "group_name", "pinned_id")
               if row[k] is not None)
    scratch_store.write(lambda con: writes.write_advisories(con, [row]))


@pytest.fixture(scope="module")
def live_capture(tmp_path_factory):
    """A real server and a real collector capturing durably, shared by the examples (each
    example's messages carry markers of their own)."""
    tmp = tmp_path_factory.mktemp("fuzz-live")
    server = NatsServer(store_dir=tmp / "js").start()
    db = str(tmp / "jetwatch.duckdb")
    cfg = collector_settings(server.url, db, ("S",), interval=0.5)
    loop = LoopThread()

    async def start() -> tuple[Any, ...]:
        nc = await nats.connect(server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, "S", ["s.>"])
        await make_consumer(api, "S", "w", "pinned_client", timeout_s=30)
        assert await ensure_capture_stream(api, cfg.capture_stream, 3600, 16 << 20)
        cnc = await connect(cfg, name="fuzz-collector")
        collector = Collector(cfg, cnc, Store(db, lock_timeout=30))
        stop = asyncio.Event()
        return nc, cnc, collector, stop, asyncio.get_running_loop().create_task(collector.run(stop))

    nc, cnc, collector, stop, task = loop.call(start())
    try:
        wait_until(lambda: collector.cycles > 0 or task.done(), timeout=60, message="the collector's first cycle")
        yield loop, nc, collector, Store(db)
    finally:
        async def finish() -> None:
            stop.set()
            await asyncio.wait_for(task, 30)
            await cnc.drain()
            await nc.close()

        loop.call(finish())
        loop.close()
        server.stop()


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(advisory(), min_size=1, max_size=4))
def test_every_published_advisory_is_stored_or_rejected_exactly_once_and_capture_goes_on(live_capture, batch):
    loop, nc, collector, store = live_capture

    async def publish() -> None:
        for subject, payload, _ in batch:
            await nc.publish(subject, payload)
        await nc.flush()

    loop.call(publish())
    markers = [m for _, _, m in batch]

    def accounted() -> dict[str, int] | None:
        got = {m: rows(store, "SELECT (SELECT count(*) FROM advisories WHERE id = $m) + "
                              "(SELECT count(*) FROM rejects WHERE origin = 'advisory' AND contains(raw, $m))",
                       {"m": m})[0][0] for m in markers}
        return got if all(got.values()) else None

    got = wait_until(accounted, timeout=30, message="every message of the batch stored or rejected")
    assert got == {m: 1 for m in markers}, got
    assert collector.fatal is None
