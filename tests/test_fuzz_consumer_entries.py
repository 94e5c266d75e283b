"""Property-based tests at the consumer-state boundary: CONSUMER.LIST pages and `/jsz` reports as
the collector reads them. A server, a proxy in front of a monitoring port or anyone answering on
`$JS.API.CONSUMER.LIST` decides these bytes: any JSON shape, wrong types, missing fields, huge
numbers, NaN and infinities, odd Unicode (lone surrogates written as JSON escapes, U+202E).
The promise: each consumer entry is read into the cycle's batch or refused in words (a reject
with the reason), the rest of the page and the other streams are still read, the store takes the
batch, and nothing raises. Bounded examples keep them in the normal suite;
`pytest tests/test_fuzz_consumer_entries.py --hypothesis-profile=explore` searches further."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from jetwatch.collectors import jsz
from jetwatch.collectors.consumer_list import ConsumerListCollector
from jetwatch.collectors.consumer_state import SampleBatch, Scope
from jetwatch.collectors.filters import NameFilter
from jetwatch.collectors.jsz import JszCollector, ServerReport
from jetwatch.core.clock import parse_rfc3339
from jetwatch.core.jsapi import JetStreamAPIError, _extent
from jetwatch.store import writes
from jetwatch.store.database import Store
from tests.helpers import server_time

NOW = "2026-11-23T12:00:00Z"
SCOPE = Scope("$G", server="srv")
HOSTILE_TEXT = ("x\ud800y", "\udfff", "\u202eorders", "caf\u00e9\u0000\t/", "", "w" * 300, "<img src=x>", "n\u2028l")
HUGE = (2 ** 63, -(2 ** 63) - 1, 2 ** 64, 10 ** 30, float("nan"), float("inf"), float("-inf"), 1e308, -0.0, 1.5)

texts = st.one_of(st.text(max_size=12), st.sampled_from(HOSTILE_TEXT))
values = st.one_of(st.none(), st.booleans(), st.integers(-(2 ** 70), 2 ** 70), st.floats(), st.sampled_from(HUGE),
                   texts, st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=4), st.integers(), max_size=2))


def mostly(good: st.SearchStrategy, bad: st.SearchStrategy) -> st.SearchStrategy:
    """Three times in four a value the checks take, else anything."""
    return st.one_of(good, good, good, bad)


counts = mostly(st.integers(0, 2 ** 63 - 1), values)
times = mostly(server_time(), values)


@st.composite
def seqs(draw: Any) -> Any:
    return draw(mostly(st.fixed_dictionaries({"consumer_seq": counts, "stream_seq": counts},
                                             optional={"last_active": times}), values))


@st.composite
def entry(draw: Any, stream: str) -> Any:
    """One consumer entry as CONSUMER.LIST or `/jsz` sends it, each field mostly right."""
    if not draw(st.sampled_from((True, True, True, False))):
        return draw(values)  # not an object at all
    name = draw(mostly(st.sampled_from(["w", "orders-1", "c_2", "pinned"]), st.one_of(texts, values)))
    config = draw(mostly(st.fixed_dictionaries({}, optional={
        "durable_name": texts, "ack_policy": mostly(st.just("explicit"), values),
        "ack_wait": counts, "max_deliver": counts, "max_waiting": counts, "max_ack_pending": counts,
        "priority_policy": mostly(st.sampled_from(["pinned_client", "overflow", "none"]), values),
        "priority_groups": mostly(st.lists(texts, max_size=2), values), "priority_timeout": counts,
        "filter_subject": mostly(st.just("s.a"), values), "filter_subjects": mostly(st.lists(texts, max_size=2), values),
        "pause_until": times, "metadata": mostly(st.dictionaries(texts, texts, max_size=2), values),
        "deliver_subject": mostly(st.none(), values)}), values))
    doc = {"stream_name": draw(mostly(st.just(stream), st.one_of(texts, values))), "name": name, "config": config}
    optional = {
        "created": times, "ts": times, "num_pending": counts, "num_ack_pending": counts, "num_waiting": counts,
        "num_redelivered": counts, "delivered": seqs(), "ack_floor": seqs(), "paused": mostly(st.booleans(), values),
        "cluster": mostly(st.fixed_dictionaries({}, optional={"name": texts, "leader": mostly(st.just("srv"), values)}),
                          values),
        "priority_groups": mostly(st.lists(st.fixed_dictionaries({}, optional={
            "group": texts, "pinned_client_id": texts, "pinned_ts": times}), max_size=2), values),
    }
    for key, strategy in optional.items():
        if draw(st.booleans()):
            doc[key] = draw(strategy)
    return doc


@st.composite
def page(draw: Any, stream: str) -> bytes:
    """A CONSUMER.LIST page as bytes: mostly the server's envelope around entries, else junk."""
    entries = draw(st.lists(entry(stream), max_size=4))
    shape = draw(st.sampled_from(["page"] * 8 + ["not an object", "consumers not a list", "odd total", "error", "bytes"]))
    if shape == "bytes":
        return draw(st.binary(max_size=40))
    if shape == "not an object":
        return json.dumps(entries).encode()
    doc = {"type": "io.nats.jetstream.api.v1.consumer_list_response", "total": len(entries), "offset": 0,
           "limit": 256, "consumers": draw(values) if shape == "consumers not a list" else entries}
    if shape == "odd total":
        doc["total"] = draw(values)
    if shape == "error":
        doc["error"] = draw(mostly(st.fixed_dictionaries({"code": values, "err_code": values, "description": values}),
                                   values))
    # ensure_ascii: a lone surrogate as a JSON escape; NaN and Infinity as Python writes them.
    return json.dumps(doc).encode()


@pytest.fixture(scope="module")
def scratch_store(tmp_path_factory) -> Store:
    store = Store(tmp_path_factory.mktemp("fuzz-entries") / "rows.duckdb")
    store.migrate()
    return store


def _store(store: Store, batch: SampleBatch) -> None:
    """The batch written as the collector writes a cycle: the store takes it whole."""
    def tx(con: Any) -> None:
        writes.write_samples(con, sorted(batch.accounts), batch.samples,
                             [*batch.failed_streams, *batch.rejected_consumers, *batch.unanswered], None, batch.arrow)
        writes.write_configs(con, batch.configs)
        writes.write_rejects(con, parse_rfc3339(NOW), "consumer_state", batch.rejects)
    store.write(tx)


def _entries_of(raw: bytes) -> list[Any] | None:
    """The page's entries as json.loads reads them; None when the page is not a readable object."""
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return doc.get("consumers") or [] if isinstance(doc, dict) else None


def _accounted(batch: SampleBatch, sent: dict[str, list[Any]]) -> None:
    """Every entry of a readable page is a sample, a reject, or the placeholder of a consumer its
    server cannot load (evidence that no server leads it); a stream whose page could not be read
    is said to have failed, in words."""
    from jetwatch.collectors.consumer_list import placeholder_of

    failed = {stream for _, stream in batch.failed_streams}
    for stream in failed:
        assert any(repr(stream) in e for e in batch.errors), batch.errors
    placeholders = [(s, placeholder_of(e)) for s, entries in sent.items() if s not in failed for e in entries
                    if placeholder_of(e) is not None]
    assert all(("$G", s, name) in batch.evidence for s, name in placeholders), batch.evidence
    expected = sum(len(entries) for stream, entries in sent.items() if stream not in failed) - len(placeholders)
    assert batch.consumers + len(batch.rejects) == expected, (batch.samples["consumer"], batch.rejects)
    assert all(error for _, error, _ in batch.rejects)


SURROGATES = b'{"total":2,"consumers":[{"stream_name":"S","name":"x\\ud800y","config":{}},' \
             b'{"stream_name":"S","name":"c","config":{"priority_policy":"\\udfff"},"cluster":{"leader":"\\udfff"}}]}'
GOOD = b'{"total":1,"consumers":[{"stream_name":"T","name":"t","config":{}}]}'


@settings(max_examples=60, deadline=None)
@given(st.lists(page("S"), min_size=1, max_size=2), st.lists(page("T"), min_size=1, max_size=2))
# Each failed before: a lone surrogate escaped in a name or config failed the store's write of the
# whole cycle; a page that is not an object, `consumers` or `error` not the server's shape, or a
# `total` that is not a count raised out of the pager and failed every stream's listing.
@example([SURROGATES], [GOOD])
@example([b"[]"], [GOOD])
@example([b'{"total":0,"consumers":5}'], [GOOD])
@example([b'{"total":"x","consumers":[]}'], [GOOD])
@example([b'{"total":0,"consumers":[],"error":5}'], [GOOD])
def test_any_consumer_list_page_is_read_entry_by_entry_into_the_batch_or_refused_in_words(scratch_store, s_pages, t_pages):
    listed: list[tuple[str, Any]] = []
    sent: dict[str, list[Any]] = {}
    for stream, pages in (("S", s_pages), ("T", t_pages)):
        try:  # the pager's own read of each page: a refusal it raises is one the collector catches
            for raw in pages:
                count, total = _extent(f"$JS.API.CONSUMER.LIST.{stream}", raw)
                assert type(count) is int and type(total) is int  # what the pager pages on
        except (JetStreamAPIError, ValueError, RecursionError) as exc:
            listed.append((stream, exc))
            continue
        listed.append((stream, pages))
        decoded = [_entries_of(raw) for raw in pages]
        sent[stream] = [e for entries in decoded if entries is not None for e in entries]
    collector = ConsumerListCollector(None, SCOPE, NameFilter(), lambda: NOW)  # type: ignore[arg-type]
    batch = collector.batch_from_pages(listed)
    _accounted(batch, sent)
    _store(scratch_store, batch)


@settings(max_examples=40, deadline=None)
# Failed before: a PING reply naming its server `true` stored a boolean as the server's name
# (the store refused the cycle), and a lone surrogate escaped in a name did the same.
@example([], [{"stream_name": "T", "name": "t", "config": {}}], True, False, None)
@example([{"stream_name": "S", "name": "x\ud800y", "config": {"ack_policy": "\udfff"}}], [], "srv", True, None)
@given(st.lists(entry("S"), max_size=4), st.lists(entry("T"), max_size=3), mostly(st.just("srv"), values),
       st.booleans(), values)
def test_any_jsz_report_is_read_entry_by_entry_into_the_batch_or_refused_in_words(scratch_store, s_entries, t_entries,
                                                                                 server, as_sent, odd):
    """A report as `/jsz` sends it, or inside a `$SYS.REQ.SERVER.PING.JSZ` reply whose `server`
    object names the server (anything may be there)."""
    doc = {"server_id": "NID", "now": NOW, "account_details": [
        {"name": "$G", "id": "$G", "stream_detail": [{"name": "S", "consumer_detail": s_entries},
                                                    {"name": "T", "consumer_detail": t_entries},
                                                    {"name": odd, "consumer_detail": [odd]}]},
        {"name": odd, "stream_detail": odd}, odd]}
    raw = json.dumps(doc).encode()
    if as_sent:
        report = ServerReport("srv", raw=raw)
    else:
        report = jsz._report(json.dumps({"server": {"name": server, "id": "NID"}, "data": doc}).encode())
        assert report is not None
    batch = JszCollector(None, NameFilter(), lambda: NOW).batch_from_reports([report])  # type: ignore[arg-type]
    if report.server != "srv":
        return _store(scratch_store, batch)  # its entries' leader is another server's name: how many are read varies
    # Entries led by another server are left out (their leader reports them), and a second entry
    # of the same consumer after one was read; every other one is a sample or a reject.
    least = 0
    for stream in json.loads(raw)["account_details"][0]["stream_detail"][:2]:
        entries = stream["consumer_detail"]
        least += sum(not isinstance(e, dict) for e in entries)
        least += len({str(e.get("name")) for e in entries if isinstance(e, dict)
                      and not (isinstance(e.get("cluster"), dict) and e["cluster"].get("leader") not in (None, "", "srv"))})
    assert batch.consumers + len(batch.rejects) >= least, (batch.samples["consumer"], batch.rejects)
    assert all(error for _, error, _ in batch.rejects)
    _store(scratch_store, batch)


@settings(max_examples=40, deadline=None)
@given(values, st.one_of(values, st.just({"server_name": "n1"})), st.booleans())
# Failed before: a `/varz` reply that is JSON but not an object raised AttributeError out of the
# read, and every server's report was lost with it.
@example([1], [], True)
def test_any_monitoring_reply_is_a_report_or_left_out(head, varz, same_id):
    """`/jsz` and `/varz` of a monitoring port (or a proxy in front of it) answer anything: each
    server's report is read or left out, the read never raises."""
    bodies = {"/jsz": json.dumps({"server_id": "NID" if same_id else head, "server_name": head, "now": NOW,
                                  "account_details": []}).encode(), "/varz": json.dumps(varz).encode()}

    def get(url: str, timeout: float, auth: str | None = None, max_bytes: int = 0) -> bytes:
        return next(body for path, body in bodies.items() if path in url)

    source = jsz.HttpJsz(("http://n1:8222",))
    original = jsz.deadline_http.get
    jsz.deadline_http.get = get  # type: ignore[assignment]
    try:
        reports = asyncio.run(source.reports())
    finally:
        jsz.deadline_http.get = original  # type: ignore[assignment]
    assert all(isinstance(r.server, str) for r in reports)
