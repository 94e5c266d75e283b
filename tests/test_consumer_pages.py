"""The page-at-a-time parse (collectors/state_columns.py) against the entry-by-entry one it
speeds up (consumer_state.add_consumer): real CONSUMER.LIST pages, each with one field made
wrong (or odd but valid) in one entry, must give the same samples, configs, filters and rejects."""

from __future__ import annotations

import asyncio
import copy
from typing import Any, Callable

import nats
import pytest

from jetwatch.collectors.consumer_list import ConsumerListCollector
from jetwatch.collectors.consumer_state import MalformedState, SampleBatch, Scope, add_consumer
from jetwatch.collectors.filters import NameFilter
from jetwatch.collectors.state_columns import add_consumers
from jetwatch.core.jsapi import JetStreamAPI
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
    ("no config", _drop("config")), ("config=[]", _set("config", [])),
    *[(f"config.{k}={v!r}", _set(f"config.{k}", v)) for k, v in (
        ("max_waiting", "x"), ("ack_wait", True), ("priority_groups", "jobs"), ("filter_subjects", [1]),
        ("filter_subject", 3), ("max_deliver", 2**64), ("description", "changed"), ("num_replicas", True))],
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


@pytest.mark.parametrize("where", [0, 1, 2, 3])
def test_each_odd_or_wrong_field_gives_what_the_entry_by_entry_path_gives(page, where):
    collector = ConsumerListCollector(None, SCOPE, NameFilter(), lambda: NOW)  # type: ignore[arg-type]
    known: dict = {}
    rejected = 0
    for label, change in CHANGES:
        # A clean cycle, then the changed one, then a clean one again: configs seen before come
        # from the fingerprints, configs that changed and changed back are stored again.
        for cycle in ("before", label, "after"):
            entries = copy.deepcopy(page)
            if cycle == label:
                entries[where] = change(entries[where])
            pages = [("PAGES", entries), ("PAGES2", copy.deepcopy(page))]
            fast = collector.batch_from_pages(copy.deepcopy(pages))
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
