"""Property-based tests at the announcement inboxes, where anyone who may publish on
`jetwatch.pin.announce.>` or `jetwatch.pull.announce.>` writes: any JSON, any Unicode (lone
surrogates written as JSON escapes, bidi overrides), huge fields, wrong types, another consumer's
subject. The promise: each message the inbox hands its handler is refused in words
(BadAnnouncement, never another exception) or stored, within the bounds, under the consumer its
subject names, and the handler goes on. Bounded examples keep them in the normal suite;
`pytest tests/test_fuzz_announcements.py --hypothesis-profile=explore` searches further."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import nats
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from jetwatch.collectors.announcement_inbox import AnnouncementBudget
from jetwatch.collectors.pin_holders import PinHolderCapture
from jetwatch.collectors.pull_settings import PullSettingsCapture
from jetwatch.collectors.runner import Collector
from jetwatch.core.connection import connect
from jetwatch.core.embedded_server import NatsServer
from jetwatch.core.pin_announce import FIELD_CHARS, MAX_ANNOUNCEMENT_BYTES, BadAnnouncement, parse_announcement
from jetwatch.core.pin_announce import announce_subject as pin_subject
from jetwatch.core.pull_announce import announce_subject as pull_subject
from jetwatch.core.pull_announce import parse_pull_announcement
from jetwatch.store.database import Store
from tests.helpers import LoopThread, collector_settings, rows, wait_until

HOSTILE_TEXT = ("x\ud800y", "\udfff", "\u202eorders", "<img src=x>", "w" * 300, "", "a.b", "*", ">")
_markers = itertools.count()

texts = st.one_of(st.text(max_size=20), st.sampled_from(HOSTILE_TEXT))
values = st.one_of(st.none(), st.booleans(), st.integers(-(2 ** 70), 2 ** 70), st.floats(), texts,
                   st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=4), st.integers(), max_size=2))
whole = st.integers(0, 2 ** 63 - 1)


def mostly(good: st.SearchStrategy, bad: st.SearchStrategy) -> st.SearchStrategy:
    """Three times in four a value the checks take, else anything."""
    return st.sampled_from((True, True, True, False)).flatmap(lambda ok: good if ok else bad)


COMMON = {
    "name": mostly(st.text(min_size=1, max_size=30), values), "host": mostly(st.text(min_size=1, max_size=30), values),
    "pid": mostly(whole, values), "version": mostly(st.one_of(st.none(), texts), values),
    "client_id": mostly(st.one_of(st.none(), whole), values), "server_id": mostly(st.one_of(st.none(), texts), values),
}
PULL = {
    "group": mostly(st.one_of(st.none(), st.sampled_from(["jobs", "other"])), values),
    "policy": mostly(st.sampled_from([None, "none", "overflow", "pinned_client", "prioritized"]), values),
    "expires_ns": mostly(st.one_of(st.none(), whole), values), "batch": mostly(st.integers(0, 2 ** 31 - 1), values),
    "min_pending": mostly(st.one_of(st.none(), whole), values),
    "min_ack_pending": mostly(st.one_of(st.none(), whole), values),
    "priority": mostly(st.one_of(st.none(), st.integers(0, 9)), values), "no_wait": mostly(st.booleans(), values),
}


@st.composite
def announcement(draw: Any, kind: str) -> tuple[str, bytes]:
    """(subject, payload) of a pin ("pin") or pull-settings ("pull") announcement, mostly well formed."""
    subject_of = pin_subject if kind == "pin" else pull_subject
    stream = draw(mostly(st.just("S"), st.one_of(st.none(), st.integers(), st.just("S" * 300), texts)))
    consumer = draw(mostly(st.sampled_from(["w", "x"]), st.one_of(st.none(), st.booleans(), texts)))
    own = subject_of(str(stream), str(consumer))
    subject = draw(mostly(st.just(own), st.sampled_from([subject_of("S", "someone-else"), subject_of("S", "w.x"),
                                                         subject_of("S", "w") + ".more"])))
    shape = draw(st.sampled_from(["doc"] * 6 + ["array", "bytes", "padded", "deep"]))
    if shape == "bytes":
        return subject, draw(st.binary(max_size=64))
    if shape == "array":
        return subject, json.dumps([draw(values)]).encode()
    if shape == "deep":
        return subject, b"[" * 100_000 + b"]" * 100_000
    doc: dict[str, Any] = {"stream": stream, "consumer": consumer}
    if kind == "pin":
        doc["pin_id"] = draw(mostly(st.just(f"PIN{next(_markers):019d}"), values))
        doc["group"] = draw(mostly(st.one_of(st.none(), texts), values))
    else:
        pull = {k: draw(s) for k, s in PULL.items() if draw(st.booleans())}
        doc["pull"] = draw(mostly(st.just(pull), values))
    doc.update({k: draw(s) for k, s in COMMON.items() if k in ("name", "host", "pid") or draw(st.booleans())})
    if shape == "padded":
        doc["padding"] = "p" * draw(st.sampled_from([100, MAX_ANNOUNCEMENT_BYTES, 100_000]))
    return subject, json.dumps(doc).encode()  # ensure_ascii: a lone surrogate as a JSON escape


@pytest.fixture(scope="module")
def scratch_store(tmp_path_factory) -> Store:
    store = Store(tmp_path_factory.mktemp("fuzz-announce") / "rows.duckdb")
    store.migrate()
    return store


def _publishable(subject: str, kind: str) -> str:
    """`subject` if a client can publish on it (a wildcard, an empty token, a space or a character
    UTF-8 cannot encode is refused before the inbox), else the consumer's own."""
    tokens = subject.split(".")
    ok = subject.isascii() and subject.isprintable() and " " not in subject and all(tokens) \
        and not {"*", ">"} & set(tokens)
    return subject if ok else (pin_subject if kind == "pin" else pull_subject)("S", "w")


def _handled(capture: Any, subject: str, payload: bytes) -> dict[str, Any] | None:
    """The capture's handler on one message, as its inbox calls it; no budget: every example counts."""
    capture._inbox.budget = AnnouncementBudget(per_origin=10 ** 9, in_all=10 ** 9)
    return asyncio.run(capture.handle(subject, payload))


def _writer(store: Store) -> Any:
    async def write(fn: Any) -> Any:
        return store.write(fn)
    return write


@settings(max_examples=150, deadline=None)
@given(announcement("pin"))
# A lone surrogate in the stream (escaped in JSON): the holder's consumer was once looked up unstorable.
@example(("jetwatch.pin.announce.x\ud800y.w", b'{"stream": "x\\ud800y", "consumer": "w", "pin_id": '
          b'"PIN0000000000000000001", "group": null, "name": "0", "host": "0", "pid": 0}'))
def test_any_pin_announcement_is_a_holder_of_its_own_consumer_or_refused_in_words(scratch_store, message):
    subject, payload = message
    try:
        ann = parse_announcement(subject, payload)
    except BadAnnouncement as exc:
        assert str(exc)
        assert _handled(PinHolderCapture(None, None, "$G", _writer(scratch_store)), subject, payload) is None
        return
    assert len(payload) <= MAX_ANNOUNCEMENT_BYTES and subject == pin_subject(ann.stream, ann.consumer)
    capture = PinHolderCapture(None, None, "$G", _writer(scratch_store))
    row = _handled(capture, subject, payload)
    assert row is not None and all(len(v) <= FIELD_CHARS for v in row.values() if isinstance(v, str))
    stored = rows(scratch_store, "SELECT stream, consumer, verification FROM pin_holders WHERE pin_id = ? AND "
                                 "stream = ? AND consumer = ?", [row["pin_id"], row["stream"], row["consumer"]])
    assert stored == [(row["stream"], row["consumer"], "no_connz")]
    assert list(capture.holders) == [("$G", row["stream"], row["consumer"], row["pin_id"])]


@settings(max_examples=150, deadline=None)
@given(announcement("pull"))
@example(("jetwatch.pull.announce.x\ud800y.w", b'{"stream": "x\\ud800y", "consumer": "w", "name": "0", '
          b'"host": "0", "pid": 0, "pull": {}}'))
def test_any_pull_settings_announcement_is_stored_for_its_own_consumer_or_refused_in_words(scratch_store, message):
    subject, payload = message
    try:
        ann = parse_pull_announcement(subject, payload)
    except BadAnnouncement as exc:
        assert str(exc)
        assert _handled(PullSettingsCapture(None, None, "$G", _writer(scratch_store)), subject, payload) is None
        return
    assert len(payload) <= MAX_ANNOUNCEMENT_BYTES and subject == pull_subject(ann.stream, ann.consumer)
    row = _handled(PullSettingsCapture(None, None, "$G", _writer(scratch_store)), subject, payload)
    assert row is not None and all(len(v) <= FIELD_CHARS for v in row.values() if isinstance(v, str)
                                   and v is not row["worker_key"] and v is not row["verification_note"])
    stored = rows(scratch_store, "SELECT stream, consumer, name FROM pull_settings WHERE worker_key = ?",
                  [row["worker_key"]])
    assert stored == [(row["stream"], row["consumer"], row["name"])]


@pytest.fixture(scope="module")
def live_inboxes(tmp_path_factory):
    """A real server and a real collector whose inboxes take every announcement (no budget),
    shared by the examples."""
    tmp = tmp_path_factory.mktemp("fuzz-announce-live")
    server = NatsServer(store_dir=tmp / "js").start()
    db = str(tmp / "jetwatch.duckdb")
    cfg = collector_settings(server.url, db, ("S",), interval=0.5)
    loop = LoopThread()

    async def start() -> tuple[Any, ...]:
        nc = await nats.connect(server.url, name="fuzzer")
        cnc = await connect(cfg, name="fuzz-collector")
        collector = Collector(cfg, cnc, Store(db, lock_timeout=30))
        stop = asyncio.Event()
        return nc, cnc, collector, stop, asyncio.get_running_loop().create_task(collector.run(stop))

    nc, cnc, collector, stop, task = loop.call(start())
    try:
        wait_until(lambda: collector.cycles > 0 or task.done(), timeout=60, message="the collector's first cycle")
        for capture in (collector.pin_holders, collector.pull_settings):
            capture._inbox.budget = AnnouncementBudget(per_origin=10 ** 9, in_all=10 ** 9)
        yield loop, nc, collector, task
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
@given(st.lists(st.one_of(announcement("pin").map(lambda m: ("pin", *m)),
                          announcement("pull").map(lambda m: ("pull", *m))), min_size=1, max_size=6))
def test_every_announcement_published_is_handled_once_and_the_inboxes_go_on(live_inboxes, batch):
    """Published on a real server: each message reaches its inbox and is handled (stored, refused or
    counted), and the collector keeps capturing: a marker published after the batch is stored."""
    loop, nc, collector, task = live_inboxes
    inboxes = {"pin": collector.pin_holders._inbox, "pull": collector.pull_settings._inbox}
    before = {k: i.handled for k, i in inboxes.items()}
    marker = f"MARK{next(_markers):018d}"

    async def publish() -> None:
        for kind, subject, payload in batch:
            await nc.publish(_publishable(subject, kind), payload)
        mark = {"pin_id": marker, "stream": "S", "consumer": "w", "group": None, "name": "m", "host": "h", "pid": 1}
        await nc.publish(pin_subject("S", "w"), json.dumps(mark).encode())
        await nc.publish(pull_subject("S", "w"), json.dumps({**mark, "name": marker, "pull": {}}).encode())
        await nc.flush()

    loop.call(publish())
    wait_until(lambda: rows(collector.store, "SELECT (SELECT count(*) FROM pin_holders WHERE pin_id = $m) + "
                                             "(SELECT count(*) FROM pull_settings WHERE name = $m)", {"m": marker})
               == [(2,)], timeout=30, message="the markers published after the batch stored")
    sent = {k: sum(1 for kind, _, _ in batch if kind == k) + 1 for k in inboxes}
    assert {k: i.handled - before[k] for k, i in inboxes.items()} == sent
    assert not task.done() and collector.fatal is None
