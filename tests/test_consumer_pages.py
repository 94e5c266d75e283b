"""The page-at-a-time parse (collectors/state_columns.py) against the entry-by-entry one it
speeds up (consumer_state.add_consumer): real CONSUMER.LIST pages, each with one field made
wrong (or odd but valid) in one entry, must give the same samples, configs, filters and rejects."""

from __future__ import annotations

import asyncio
import copy
import http.server
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import nats
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jetwatch.collectors import consumer_list, jsz, list_pages, state_columns
from jetwatch.collectors.consumer_list import ConsumerListCollector
from jetwatch.collectors.consumer_state import MalformedState, SampleBatch, Scope, add_consumer
from jetwatch.collectors.filters import NameFilter
from jetwatch.collectors.jsz import HttpJsz, JszCollector, ServerReport
from jetwatch.collectors.state_columns import add_consumers
from jetwatch.core.clock import parse_rfc3339
from jetwatch.core.jsapi import JetStreamAPI, NoReply, StreamNotFound
from jetwatch.store import writes
from tests.helpers import make_consumer, make_stream, publish

NOW = "2026-11-23T12:00:00Z"
SCOPE = Scope("$G", server="srv")


@pytest.fixture(scope="module")
def page(nats_server) -> list[dict[str, Any]]:
    """A real page: a plain consumer that has delivered (so its times and seqs are set), a
    pinned_client one, a filtered one and a paused one."""
    async def fetch() -> list[dict[str, Any]]:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, "PAGES", ["pages.>"])
        await make_consumer(api, "PAGES", "plain")
        await make_consumer(api, "PAGES", "pinned", policy="pinned_client", timeout_s=60)
        await make_consumer(api, "PAGES", "filtered", filter_subjects=["pages.a", "pages.b"])
        await make_consumer(api, "PAGES", "paused", pause_until="2099-01-01T00:00:00Z")
        await publish(nc, "pages.a", 3)
        sub = await nc.jetstream().pull_subscribe_bind("plain", stream="PAGES")
        await (await sub.fetch(1, timeout=5))[0].ack_sync()
        entries = sorted(await api.consumer_list("PAGES"), key=lambda c: c["name"])
        await nc.close()
        return entries

    entries = asyncio.run(fetch())
    assert [e["name"] for e in entries] == ["filtered", "paused", "pinned", "plain"]
    assert entries[3]["delivered"].get("last_active") and entries[1]["paused"] and entries[2]["priority_groups"]
    return entries


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], Any]:
    def change(entry: dict[str, Any]) -> Any:
        *parents, last = path.split(".")
        target = entry
        for p in parents:
            target = target.setdefault(p, {})
        target[last] = value
        return entry
    return change


def _drop(key: str) -> Callable[[dict[str, Any]], Any]:
    return lambda entry: {k: v for k, v in entry.items() if k != key}


TIMES = ["2026-11-23T10:00:00.123+02:00", "2024-02-29T00:00:00Z", "2026-11-23 10:00:00Z", "2026-11-23t10:00:00z",
         "2026-02-30T00:00:00Z", "0000-01-01T00:00:00Z", "2026-11-23T24:00:00Z", "2026-11-23T10:00:00Z\n2026-11-23T10:00:00Z",
         "2026-11-23T10:00:00.1234567891Z", "0001-01-01T00:00:00Z", "", "junk", 5, None]
CHANGES: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
    ("clean", lambda e: e),
    *[(f"num_pending={v!r}", _set("num_pending", v)) for v in ("5", True, 1.5, 2**63, -2**63, -2**63 - 1, None, 0)],
    *[(f"delivered.stream_seq={v!r}", _set("delivered.stream_seq", v)) for v in ("1", False, 2**63 - 1)],
    *[(f"stream_name={v!r}", _set("stream_name", v)) for v in ("", 5, None)],
    *[(f"name={v!r}", _set("name", v)) for v in (7, [], "", "x")],
    ("no config", _drop("config")), ("config=[]", _set("config", [])), ("config=None", _set("config", None)),
    *[(f"config.{k}={v!r}", _set(f"config.{k}", v)) for k, v in (
        ("max_waiting", "x"), ("ack_wait", True), ("priority_groups", "jobs"), ("filter_subjects", [1]),
        ("filter_subject", 3), ("max_deliver", 2**64), ("description", "changed"), ("num_replicas", True),
        ("metadata", "x"), ("metadata", {"owner": "team-a"}))],
    *[(f"{k}={v!r}", _set(k, v)) for k in ("delivered", "ack_floor", "cluster") for v in ([], "x", 0, None, {})],
    ("cluster.leader=5", _set("cluster.leader", 5)), ("cluster.name=[]", _set("cluster.name", [])),
    ("cluster.leader=n1", _set("cluster.leader", "n1")),
    *[(f"{k}={v!r}", _set(k, v)) for k in ("ts", "created", "delivered.last_active", "ack_floor.last_active")
      for v in TIMES],
    *[(f"paused=True, pause_until={v!r}", lambda e, v=v: _set("config.pause_until", v)(_set("paused", True)(e)))
      for v in ("bad", None, "2099-01-01T00:00:00Z")],
    ("paused=1", _set("paused", 1)),
    *[(f"priority_groups={v!r}", _set("priority_groups", v)) for v in (
        "x", [1], [], {}, 0, [{"group": 5}], [{"pinned_ts": "bad"}], [{"pinned_client_id": 3}],
        [{"group": "g", "pinned_client_id": "", "pinned_ts": "2026-11-23T10:00:00Z"}],
        [{"group": "g", "pinned_client_id": "p1", "pinned_ts": "2026-11-23T10:00:00Z"}, "second"],
        [{"group": "g", "pinned_client_id": "p1", "pinned_ts": "0001-01-01T00:00:00Z"}])],
    ("entry is a list", lambda e: [e]), ("entry is None", lambda e: None), ("entry is a string", lambda e: "x"),
]


def _one_by_one(pages: list[tuple[str, list[Any]]], known: dict) -> SampleBatch:
    """The entry-by-entry path, as the collector took it before the page-at-a-time one."""
    batch = SampleBatch(accounts={SCOPE.account})
    for stream, consumers in pages:
        batch.streams += 1
        for info in consumers:
            try:
                add_consumer(batch, info, SCOPE, NOW, known)
            except MalformedState as exc:
                batch.reject(f"CONSUMER.LIST.{stream}", exc, info, SCOPE.account, stream)
    return batch


def _same(a: SampleBatch, b: SampleBatch) -> None:
    assert a.samples == b.samples
    assert a.filters == b.filters
    assert a.configs == b.configs
    assert a.rejects == b.rejects
    assert a.rejected_consumers == b.rejected_consumers
    assert a.consumers == b.consumers


def _cycles(page: list[dict[str, Any]], where: int) -> Iterator[tuple[str, str, list[tuple[str, list[Any]]]]]:
    """For each change: a clean cycle, then the changed one, then a clean one again (configs seen
    before come from the fingerprints, configs that changed and changed back are stored again)."""
    for label, change in CHANGES:
        for cycle in ("before", label, "after"):
            entries = copy.deepcopy(page)
            if cycle == label:
                entries[where] = change(entries[where])
            yield label, cycle, [("PAGES", entries), ("PAGES2", copy.deepcopy(page))]


@pytest.mark.parametrize("where", [0, 1, 2, 3])
def test_each_odd_or_wrong_field_gives_what_the_entry_by_entry_path_gives(page, where):
    collector = ConsumerListCollector(None, SCOPE, NameFilter(), lambda: NOW)  # type: ignore[arg-type]
    known: dict = {}
    rejected = 0
    for label, cycle, pages in _cycles(page, where):
        fast = collector.batch_from_entries(copy.deepcopy(pages))
        slow = _one_by_one(copy.deepcopy(pages), known)
        try:
            _same(fast, slow)
        except AssertionError:
            raise AssertionError(f"{label} at entry {where}, cycle {cycle}") from None
        rejected += len(slow.rejects)
    assert rejected > 50  # the changes did make entries malformed


def test_a_clean_page_takes_the_page_at_a_time_path_and_a_bad_one_does_not(page):
    batch, known, before, now = SampleBatch(), {}, {}, {}
    assert add_consumers(batch, copy.deepcopy(page), SCOPE, NOW, known, before, now)
    assert batch.consumers == 4 and len(batch.configs) == 4 and len(now) == 4
    bad = copy.deepcopy(page)
    bad[2]["num_pending"] = "5"
    assert not add_consumers(batch, bad, SCOPE, NOW, known, now, {})
    assert batch.consumers == 4  # nothing of the refused page was appended


# -- the pages as sent, read straight into Arrow (collectors/list_pages.py) --------------------

def _sent(entries: list[Any], total: int | None = None) -> bytes:
    """A CONSUMER.LIST page as the server encodes it: compact JSON, the envelope first."""
    return json.dumps({"type": "io.nats.jetstream.api.v1.consumer_list_response", "total": total or len(entries),
                       "offset": 0, "limit": 256, "consumers": entries}, separators=(",", ":")).encode()


def _same_store_rows(batch: SampleBatch) -> None:
    """What the store appends from the Arrow columns is what it appends from the Python lists."""
    assert batch.arrow is not None
    assert writes.samples_table(batch.samples, batch.arrow).equals(writes.samples_table(batch.samples))


@pytest.mark.parametrize("where", [0, 3])
def test_each_odd_or_wrong_field_read_into_arrow_gives_what_the_entry_by_entry_path_gives(page, where):
    collector = ConsumerListCollector(None, SCOPE, NameFilter(), lambda: NOW)  # type: ignore[arg-type]
    known: dict = {}
    by_arrow = _read_both_ways(page, where, lambda pages: (
        collector.batch_from_pages([(stream, [_sent(e)]) for stream, e in pages]), _one_by_one(copy.deepcopy(pages), known)),
        _same)
    assert by_arrow >= 20  # the clean page and the odd but valid fields were read into Arrow


def _read_both_ways(page: list[dict[str, Any]], where: int,
                    read: Callable[[list[tuple[str, list[Any]]]], tuple[SampleBatch, SampleBatch]],
                    same: Callable[[SampleBatch, SampleBatch], None]) -> int:
    """Each cycle of _cycles read into Arrow and the decoded way, checked the same; how many of the
    changed cycles were read into Arrow."""
    by_arrow = 0
    for label, cycle, pages in _cycles(page, where):
        fast, slow = read(pages)
        try:
            same(fast, slow)
            if fast.arrow is not None:
                _same_store_rows(fast)
        except AssertionError:
            raise AssertionError(f"{label} at entry {where}, cycle {cycle}") from None
        by_arrow += cycle == label and fast.arrow is not None
    return by_arrow


# Pages only bytes can hold: each must be read as json.loads reads it, or left to the decoded path.
RAW_PAGES = {
    "a key given twice": lambda e: _sent([e]).replace(b'"num_pending":', b'"num_pending":7,"num_pending":', 1),
    "a config given twice": lambda e: _sent([e]).replace(b'"config":', b'"config":{"durable_name":"x"},"config":', 1),
    "a whole number written 5.0": lambda e: _sent([e]).replace(b'"num_waiting":0', b'"num_waiting":5.0', 1),
    "a count written 1e3": lambda e: _sent([e]).replace(b'"num_waiting":0', b'"num_waiting":1e3', 1),
    "a count of -0": lambda e: _sent([e]).replace(b'"num_waiting":0', b'"num_waiting":-0', 1),
    "NaN": lambda e: _sent([e]).replace(b'"num_waiting":0', b'"num_waiting":NaN', 1),
    "pretty-printed": lambda e: json.dumps({"total": 1, "consumers": [e]}, indent=2).encode(),
    "escapes in a name": lambda e: _sent([{**e, "name": "caf\u00e9\u0000\t/"}]),
    "escaped slashes": lambda e: _sent([e]).replace(b'"stream_name":"PAGES"', b'"stream_name":"PA\\/GES"', 1),
    "no consumers": lambda e: _sent([]),
    "consumers null": lambda e: b'{"total":0,"consumers":null}',
    "a null entry": lambda e: _sent([e, None]),
    "an entry that is a number": lambda e: _sent([e, 5]),
    "a first group that is null": lambda e: _sent([{**e, "priority_groups": [None]}]),
}


@pytest.mark.parametrize("label", list(RAW_PAGES))
def test_pages_only_bytes_can_hold_are_read_as_json_loads_reads_them(page, label):
    raw = RAW_PAGES[label](copy.deepcopy(page[2]))
    collector = ConsumerListCollector(None, SCOPE, NameFilter(), lambda: NOW)  # type: ignore[arg-type]
    fast = collector.batch_from_pages([("PAGES", [raw])])
    slow = _one_by_one([("PAGES", json.loads(raw).get("consumers") or [])], {})
    _same(fast, slow)
    if fast.arrow is not None:
        _same_store_rows(fast)


def test_a_stream_listed_over_several_pages_is_read_whole_and_its_last_entry_gives_the_server_time(page):
    entries = [{**copy.deepcopy(page[i % 4]), "name": f"c{i}", "ts": f"2026-11-23T10:00:{i:02d}Z"} for i in range(9)]
    collector = ConsumerListCollector(None, SCOPE, NameFilter(), lambda: NOW)  # type: ignore[arg-type]
    fast = collector.batch_from_pages([("EMPTY", [_sent([])]), ("PAGES", [_sent(entries[:4], 9), _sent(entries[4:], 9)])])
    slow = _one_by_one([("EMPTY", []), ("PAGES", entries)], {})
    _same(fast, slow)
    _same_store_rows(fast)
    assert fast.streams == 2 and fast.consumers == 9
    assert fast.server_now == parse_rfc3339("2026-11-23T10:00:08Z")


def test_a_consumer_filter_leaves_out_the_same_consumers_read_into_arrow(page):
    names = NameFilter(exclude_consumers=("pin*",))
    fast = ConsumerListCollector(None, SCOPE, names, lambda: NOW).batch_from_pages(  # type: ignore[arg-type]
        [("PAGES", [_sent(copy.deepcopy(page))])])
    assert fast.arrow is not None and fast.samples["consumer"] == ["filtered", "paused", "plain"]
    assert fast.filters == [("pages.a", "pages.b"), (), ()]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(
    st.sampled_from(TIMES[:-2]),
    st.from_regex(r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{0,10})?([Zz]|[+-][0-9]{2}:[0-9]{2})?\Z"),
    st.text(alphabet="0123456789-:TZ.+\n ", max_size=32)), min_size=1, max_size=8))
def test_arrows_time_check_takes_exactly_the_times_the_page_path_takes(times):
    column = pa.array(times, pa.string())
    assert list_pages._times_match(column) == state_columns._times_ok(tuple(times))


def test_a_cycle_with_no_consumers_or_every_stream_failed_is_read_into_arrow_as_empty():
    collector = ConsumerListCollector(None, SCOPE, NameFilter(), lambda: NOW)  # type: ignore[arg-type]
    batch = collector.batch_from_pages([("GONE", None), ("DOWN", NoReply("no reply"))])
    assert batch.arrow is not None and batch.consumers == 0 and batch.streams == 0
    assert batch.failed_streams == [("$G", "DOWN")] and "'DOWN' failed: no reply" in batch.errors[0]
    assert writes.samples_table(batch.samples, batch.arrow).num_rows == 0


def test_a_stream_of_more_than_a_page_is_listed_whole_as_sent_and_a_missing_one_refused(nats_server):
    async def listing() -> tuple[list[bytes], list[str]]:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, "MANY", ["many.>"])
        await asyncio.gather(*(make_consumer(api, "MANY", f"c{i:03d}") for i in range(300)))
        raw = await api.consumer_list_pages("MANY")
        names = [c["name"] for c in await api.consumer_list("MANY")]
        with pytest.raises(StreamNotFound):
            await api.consumer_list_pages("NOPE")
        await nc.close()
        return raw, names

    raw, names = asyncio.run(listing())
    assert len(raw) == 2 and [c["name"] for page in raw for c in json.loads(page)["consumers"]] == names
    collector = ConsumerListCollector(None, SCOPE, NameFilter(), lambda: NOW)  # type: ignore[arg-type]
    fast = collector.batch_from_pages([("MANY", raw)])
    assert fast.arrow is not None and sorted(fast.samples["consumer"]) == [f"c{i:03d}" for i in range(300)]
    _same(fast, _one_by_one([("MANY", [c for page in raw for c in json.loads(page)["consumers"]])], {}))
    _same_store_rows(fast)


def _decoded_reference(pages: list[tuple[str, list[bytes]]]) -> SampleBatch:
    """The same pages decoded as the collector decoded them before it read them into Arrow."""
    collector = ConsumerListCollector(None, SCOPE, NameFilter(), lambda: NOW)  # type: ignore[arg-type]
    return collector.batch_from_entries([(stream, consumer_list._decoded(got)) for stream, got in pages])


@pytest.mark.parametrize("label, bad", [
    ("invalid UTF-8 in a stored field", lambda raw: raw.replace(b'"name":"pinned"', b'"name":"pin\xc0\xafned"', 1)),
    ("invalid UTF-8 in a field not stored", lambda raw: raw.replace(b'"stream_name":', b'"x":"\xff","stream_name":', 1)),
    ("a raw newline inside a string", lambda raw: raw.replace(b'"name":"pinned"', b'"name":"pin\nned"', 1)),
    ("a surrogate encoded in UTF-8", lambda raw: raw.replace(b'"name":"pinned"', b'"name":"pin\xed\xb0\x80"', 1)),
    ("a config nested 2,000 deep", lambda raw: raw.replace(b'"config":{', b'"config":{"deep":' + b"[" * 2000 + b"]" * 2000 + b",", 1)),
])
def test_a_page_the_arrow_read_cannot_vouch_for_is_decoded_and_the_other_streams_kept(page, label, bad):
    raw = bad(_sent(copy.deepcopy(page)))
    pages = [("BAD", [raw]), ("GOOD", [_sent(copy.deepcopy(page))])]
    collector = ConsumerListCollector(None, SCOPE, NameFilter(), lambda: NOW)  # type: ignore[arg-type]
    fast = collector.batch_from_pages(pages)
    reference = _decoded_reference(pages)
    _same(fast, reference)
    assert fast.arrow is None and fast.failed_streams == reference.failed_streams and fast.errors == reference.errors
    assert fast.consumers >= 4 and ("$G", "GOOD") not in fast.failed_streams


def test_the_time_pattern_is_refused_at_import_if_rE2_could_not_take_it():
    assert list_pages._for_re2(state_columns.TIME_PATTERN) == list_pages._TIME_RE2
    with pytest.raises(ValueError, match="RE2 cannot take"):
        list_pages._for_re2(r"(?!19)\d{4}-" + state_columns.TIME_PATTERN)


# -- JSZ reports as sent, read into Arrow the same way ------------------------------------------

def _jsz(pages: list[tuple[str, list[Any]]], server: str) -> dict[str, Any]:
    """One server's JSZ report holding these streams' consumers (as /jsz?consumers=true lists them)."""
    return {"server_id": server, "now": "2026-11-23T12:00:01Z", "account_details": [
        {"name": "$G", "id": "$G", "stream_detail": [{"name": stream, "consumer_detail": entries}
                                                    for stream, entries in pages]},
        {"name": "OTHER", "stream_detail": []}]}


def _same_jsz(fast: SampleBatch, slow: SampleBatch) -> None:
    _same(fast, slow)
    assert (fast.accounts, fast.streams, fast.server_now) == (slow.accounts, slow.streams, slow.server_now)
    assert (fast.unanswered, fast.errors) == (slow.unanswered, slow.errors)


@pytest.mark.parametrize("where", [0, 3])
def test_jsz_reports_read_into_arrow_give_what_decoding_them_entry_by_entry_gives(page, where):
    led = copy.deepcopy(page)
    for i, entry in enumerate(led):  # two servers each report every consumer; each leads some, one leads none
        entry["cluster"] = {"leader": "n1"} if i % 2 == 0 else {"leader": "n2"} if i == 1 else {}
    fast_reader = JszCollector(None, NameFilter(), lambda: NOW)  # type: ignore[arg-type]
    slow_reader = JszCollector(None, NameFilter(), lambda: NOW)  # type: ignore[arg-type]

    def read(pages: list[tuple[str, list[Any]]]) -> tuple[SampleBatch, SampleBatch]:
        docs = {server: _jsz(pages, server) for server in ("n1", "n2")}
        return (fast_reader.batch_from_reports([ServerReport(s, raw=json.dumps(d).encode()) for s, d in docs.items()]),
                slow_reader.batch_from_reports([ServerReport(s, jsz=copy.deepcopy(d)) for s, d in docs.items()]))
    assert _read_both_ways(led, where, read, _same_jsz) >= 20
    # n2 stops answering: what it led keeps its last state, said the same way by both.
    doc = _jsz([("PAGES", copy.deepcopy(led))], "n1")
    fast = fast_reader.batch_from_reports([ServerReport("n1", raw=json.dumps(doc).encode())])
    slow = slow_reader.batch_from_reports([ServerReport("n1", jsz=doc)])
    _same_jsz(fast, slow)
    assert fast.arrow is not None and fast.unanswered == [("$G", "PAGES", "paused"), ("$G", "PAGES2", "paused")]


def test_a_jsz_report_that_is_not_json_is_left_out_as_its_source_left_it_out(page):
    good = ServerReport("n1", raw=json.dumps(_jsz([("PAGES", copy.deepcopy(page))], "n1")).encode())
    bad = ServerReport("n2", raw=b'{"now":"2026-11-23T12:00:01Z","x":"\xff"}')
    batch = JszCollector(None, NameFilter(), lambda: NOW).batch_from_reports([good, bad])  # type: ignore[arg-type]
    assert batch.arrow is None and batch.consumers == 4 and batch.errors == []


def test_a_real_jsz_report_is_read_into_arrow_as_decoding_it_reads_it(page, nats_server):
    reports = asyncio.run(HttpJsz((nats_server.monitor_url,)).reports())
    assert len(reports) == 1 and reports[0].raw is not None
    fast = JszCollector(None, NameFilter(), lambda: NOW).batch_from_reports(reports)  # type: ignore[arg-type]
    decoded = [ServerReport(r.server, jsz=json.loads(r.raw)) for r in reports]
    slow = JszCollector(None, NameFilter(), lambda: NOW).batch_from_reports(decoded)  # type: ignore[arg-type]
    _same_jsz(fast, slow)
    _same_store_rows(fast)
    assert {"filtered", "paused", "pinned", "plain"} <= set(fast.samples["consumer"])


def test_a_ping_jsz_reply_keeps_its_report_as_sent_and_one_without_a_report_is_left_out(page):
    data = json.dumps(_jsz([("PAGES", copy.deepcopy(page))], "n1")).encode()
    reply = b'{"server":{"name":"n1","id":"NID"},"data":' + data + b"}"
    report = jsz._report(reply)
    assert report is not None and report.server == "n1" and report.raw == data and report.jsz is None
    assert jsz._report(b'{"server":{"id":"NID"},"data":' + data + b"}").server == "NID"
    assert [jsz._report(r) for r in (b'{"server":{"name":"n1"},"data":[]}', b'{"server":{"name":"n1"}}', b"junk")] \
        == [None, None, None]
    batch = JszCollector(None, NameFilter(), lambda: NOW).batch_from_reports([report])  # type: ignore[arg-type]
    assert batch.arrow is not None and batch.consumers == 4


def test_a_jsz_reply_that_is_empty_or_not_utf8_leaves_out_that_server_alone(page):
    good = json.dumps(_jsz([("PAGES", copy.deepcopy(page))], "n1")).encode()
    bodies = {"good": good, "empty": b"", "bad": good[:-1] + b',"x":"\xff"}'}

    class Reply(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # the handler's name
            name, endpoint = self.path.split("?")[0].strip("/").split("/")
            body = bodies[name] if endpoint == "jsz" else json.dumps({"server_name": name}).encode()
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Reply)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        urls = tuple(f"{base}/{name}" for name in ("good", "empty", "bad"))
        reports = asyncio.run(HttpJsz(urls, timeout=5).reports())
    finally:
        server.shutdown()
    assert [r.server for r in reports] == ["good"]
    assert jsz._report(b'{"server":{"name":"n\xff"},"data":' + good + b"}") is None
