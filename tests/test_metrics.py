"""Prometheus exposition: the collector's /metrics, parsed as Prometheus parses it, and scraped
by a real Prometheus server."""

from __future__ import annotations

import contextlib
import json
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest
from prometheus_client.parser import text_string_to_metric_families

from jetwatch.core.embedded_server import free_port
from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.exporters import cycle_snapshot, metrics, metrics_server
from tests.helpers import (
    collecting,
    collector_settings,
    eventually,
    make_consumer,
    make_stream,
    publish,
    stop_process,
)

PROMETHEUS = "/usr/bin/prometheus"
FAST = {"health_window": 4.0, "health_min_samples": 3, "health_min_span": 1.0}


def scrape(address: tuple[str, int]) -> dict[str, list]:
    with urllib.request.urlopen(f"http://{address[0]}:{address[1]}/metrics", timeout=5) as reply:
        assert reply.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = reply.read().decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


async def _idle_and_ok(nc, uid: str) -> str:
    """Two consumers: `idle` has work and nobody pulling (NO_PULLERS), `fine` has none (OK)."""
    stream = f"{uid}_MET"
    api = JetStreamAPI(nc)
    await make_stream(api, stream, [f"{uid}.>"])
    await make_consumer(api, stream, "idle", filter_subject=f"{uid}.idle")
    await make_consumer(api, stream, "fine", filter_subject=f"{uid}.fine", max_waiting=0)
    await publish(nc, f"{uid}.idle", 3)
    return stream


@pytest.mark.parametrize("cardinality,shown,every", [
    # the default, `auto`: a fleet of two is within --metrics-all-up-to, so both have history
    ({}, ["fine", "idle"], 1.0),
    # `auto` over a fleet larger than --metrics-all-up-to: the non-OK one alone
    ({"metrics_cardinality": "auto", "metrics_all_up_to": 1}, ["idle"], 0.0),
    ({"metrics_cardinality": "non_ok"}, ["idle"], 0.0),
])
def test_metrics_serve_the_cycles_verdicts_with_bounded_cardinality_and_fleet_totals(nats_server, db_path, uid, run,
                                                                                     cardinality, shown, every):
    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        stream = await _idle_and_ok(nc, uid)
        settings = collector_settings(nats_server.url, db_path, (stream,), interval=0.3,
                                      metrics_address=f"127.0.0.1:{free_port()}", **FAST, **cardinality)
        async with collecting(settings) as collector:
            def stalled() -> dict | None:
                got = scrape(collector.metrics_bound)
                hit = [s for s in got.get("jetwatch_consumer_verdict", []) if s.labels["verdict"] == "NO_PULLERS"]
                return got if hit else None

            got = await eventually(stalled, message="NO_PULLERS on /metrics")
            idle = {"cluster": "default", "account": "$G", "stream": stream, "consumer": "idle", "group": ""}
            verdict = [s for s in got["jetwatch_consumer_verdict"] if s.labels["stream"] == stream]
            assert ({**idle, "verdict": "NO_PULLERS"}, 1.0) in [(s.labels, s.value) for s in verdict]
            assert sorted(s.labels["consumer"] for s in verdict) == shown
            pending = [s for s in got["jetwatch_consumer_pending_messages"] if s.labels["stream"] == stream]
            assert sorted(s.labels["consumer"] for s in pending) == shown
            assert got["jetwatch_collector_every_consumer_exported"][0].value == every
            totals = {s.labels["verdict"]: s.value for s in got["jetwatch_consumers"]}
            assert totals["NO_PULLERS"] >= 1 and totals["OK"] >= 1, "fleet totals count every consumer"
            assert got["jetwatch_collector_cycles"][0].value >= 1
            assert any(s.name == "jetwatch_collector_cycle_duration_seconds_count" and s.value >= 1
                       for s in got["jetwatch_collector_cycle_duration_seconds"])
            # The parser names families as declared; an info family keeps its _info suffix.
            declared = {m.exposed if m.type == "info" else m.name for m in metrics.METRICS}
            assert set(got) <= declared, set(got) - declared
        await nc.close()

    run(scenario())


def test_time_lag_is_exported_per_consumer_and_no_eta_where_nothing_drains(nats_server, db_path, uid, run):
    """`idle` holds three messages nobody pulled: both its ages are exported, equal (nothing was
    delivered), and no older than the first message published; it gets no drain ETA."""
    import time

    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        published = time.time()
        stream = await _idle_and_ok(nc, uid)
        settings = collector_settings(nats_server.url, db_path, (stream,), interval=0.3,
                                      metrics_address=f"127.0.0.1:{free_port()}", **FAST)
        async with collecting(settings) as collector:
            def aged() -> dict | None:
                got = scrape(collector.metrics_bound)
                verdicts = [s for s in got.get("jetwatch_consumer_verdict", []) if s.labels["verdict"] == "NO_PULLERS"]
                return got if verdicts and got.get("jetwatch_consumer_oldest_unacked_age_seconds") else None

            got = await eventually(aged, message="NO_PULLERS and its age on /metrics")
            scraped = time.time()

            def value(name: str) -> list[float]:
                return [s.value for s in got.get(name, []) if s.labels["stream"] == stream and s.labels["consumer"] == "idle"]

            [unacked] = value("jetwatch_consumer_oldest_unacked_age_seconds")
            [undelivered] = value("jetwatch_consumer_oldest_undelivered_age_seconds")
            assert 0 < unacked <= scraped - published
            assert undelivered == pytest.approx(unacked)
            assert value("jetwatch_consumer_drain_eta_seconds") == []
        await nc.close()

    run(scenario())


def test_full_cardinality_exports_every_consumer(nats_server, db_path, uid, run):
    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        stream = await _idle_and_ok(nc, uid)
        settings = collector_settings(nats_server.url, db_path, (stream,), interval=0.3, metrics_cardinality="all",
                                      metrics_address=f"127.0.0.1:{free_port()}", **FAST)
        async with collecting(settings) as collector:
            def both() -> set[str]:
                got = scrape(collector.metrics_bound)
                return {s.labels["consumer"] for s in got.get("jetwatch_consumer_verdict", [])
                        if s.labels["stream"] == stream} == {"idle", "fine"}

            await eventually(both, message="both consumers on /metrics")
        await nc.close()

    run(scenario())


@contextlib.contextmanager
def prometheus(tmp_path: Path, target: str, rule_files: list[str] = ()) -> Iterator[str]:
    """A real Prometheus scraping `target` every second; yields its base URL."""
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(json.dumps({  # YAML is a superset of JSON
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": list(rule_files),
        "scrape_configs": [{"job_name": "jetwatch", "static_configs": [{"targets": [target]}]}],
    }))
    proc = subprocess.Popen([PROMETHEUS, f"--config.file={config}", f"--web.listen-address=127.0.0.1:{port}",
                             f"--storage.tsdb.path={tmp_path / 'tsdb'}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        yield url
    finally:
        stop_process(proc)


def prom_query(url: str, expr: str) -> list[dict]:
    try:
        with urllib.request.urlopen(f"{url}/api/v1/query?" + urllib.parse.urlencode({"query": expr}), timeout=5) as r:
            return json.loads(r.read())["data"]["result"]
    except OSError:
        return []  # not listening yet


@pytest.mark.skipif(not Path(PROMETHEUS).exists(), reason="Debian's prometheus is installed by `make system-deps`")
def test_a_real_prometheus_scrapes_the_collectors_verdicts(nats_server, db_path, uid, run, tmp_path):
    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        stream = await _idle_and_ok(nc, uid)
        settings = collector_settings(nats_server.url, db_path, (stream,), interval=0.3,
                                      metrics_address=f"127.0.0.1:{free_port()}", **FAST)
        async with collecting(settings) as collector:
            host, port = collector.metrics_bound
            with prometheus(tmp_path, f"{host}:{port}") as url:
                expr = f'jetwatch_consumer_verdict{{stream="{stream}",verdict="NO_PULLERS"}}'
                got = await eventually(lambda: prom_query(url, expr), timeout=60, interval=0.5,
                                       message="the verdict series in Prometheus")
                assert got[0]["metric"]["consumer"] == "idle" and got[0]["value"][1] == "1"
                up = prom_query(url, 'up{job="jetwatch"}')
                assert up and up[0]["value"][1] == "1"
        await nc.close()

    run(scenario())


def test_a_consumer_with_no_recorded_limits_renders_without_limit_series(db_path):
    """A consumer whose config is not stored yet (no max_ack_pending, no max_waiting) still renders:
    its gauges without the limit series (found by the benchmark's synthetic store)."""
    import datetime as dt

    from jetwatch.collectors.judging import judge_cycle
    from jetwatch.health.rules import Thresholds
    from jetwatch.store import writes
    from jetwatch.store.database import Store

    now = dt.datetime(2026, 11, 22, 12, tzinfo=dt.UTC)
    samples = {"ts": [now.isoformat()], "account": ["$G"], "stream": ["S"], "consumer": ["C"], "num_pending": [3],
               "num_ack_pending": [1], "num_waiting": [0], "num_redelivered": [0], "paused": [False]}
    samples.update({k: [None] for k in ("server", "cluster", "domain", "created", "delivered_consumer_seq",
                                        "delivered_stream_seq", "delivered_last_active", "ack_floor_consumer_seq",
                                        "ack_floor_stream_seq", "ack_floor_last_active", "pause_until", "pin_group",
                                        "pinned_id", "pinned_ts", "leader")})
    judged = Store(db_path).write(lambda con: (writes.write_samples(con, ["$G"], samples),
                                               judge_cycle(con, now, Thresholds()))[1])
    exporter = metrics_server.MetricsExporter("all")
    text = exporter.render(cycle_snapshot.Snapshot(at=now, consumers=judged.consumers, pins=cycle_snapshot.PinCounts(),
                                            cycle_buckets=[0] * 10, cycle_sum=0.0, cycles=1, capture_backlog=None,
                                            rejects=0)).decode()
    got = {f.name: f.samples for f in text_string_to_metric_families(text)}
    assert [s.value for s in got["jetwatch_consumer_pending_messages"]] == [3.0]
    assert got["jetwatch_consumer_ack_pending_limit_messages"] == []
    assert [s.value for s in got["jetwatch_consumer_paused"]] == [0.0]


def test_dropped_messages_are_exported_for_an_ok_consumer_under_non_ok_cardinality(db_path):
    """A consumer a client's +TERM left OK still has its drops on /metrics (the drop alert reads
    them), and a consumer without drops gets no series."""
    import datetime as dt

    from jetwatch.collectors.judging import judge_cycle
    from jetwatch.health.rules import Thresholds
    from jetwatch.store import writes
    from jetwatch.store.database import Store

    now = dt.datetime(2026, 11, 22, 12, tzinfo=dt.UTC)
    samples = {"ts": [now.isoformat()] * 2, "account": ["$G"] * 2, "stream": ["S"] * 2, "consumer": ["C", "D"],
               "num_pending": [0, 0], "num_ack_pending": [0, 0], "num_waiting": [0, 0], "num_redelivered": [0, 0],
               "paused": [False, False]}
    samples.update({k: [None] * 2 for k in ("server", "cluster", "domain", "created", "delivered_consumer_seq",
                                            "delivered_stream_seq", "delivered_last_active", "ack_floor_consumer_seq",
                                            "ack_floor_stream_seq", "ack_floor_last_active", "pause_until", "pin_group",
                                            "pinned_id", "pinned_ts", "leader")})
    judged = Store(db_path).write(lambda con: (writes.write_samples(con, ["$G"], samples),
                                               judge_cycle(con, now, Thresholds()))[1])
    drops = cycle_snapshot.DropCounts()
    drops.add([{"kind": "terminated", "account": "$G", "stream": "S", "consumer": "C"}])
    text = metrics_server.MetricsExporter("non_ok").render(cycle_snapshot.Snapshot(
        at=now, consumers=judged.consumers.assign(verdict="OK", cluster="c1"), pins=cycle_snapshot.PinCounts(), drops=drops,
        cycle_buckets=[0] * 10, cycle_sum=0.0, cycles=1, capture_backlog=None, rejects=0)).decode()
    got = {f.name: f.samples for f in text_string_to_metric_families(text)}
    assert not got.get("jetwatch_consumer_verdict")  # OK consumers: no per-consumer series under non_ok
    [dropped] = got["jetwatch_consumer_dropped_messages"]
    assert (dropped.labels["consumer"], dropped.labels["reason"], dropped.labels["cluster"], dropped.value) == (
        "C", "terminated", "c1", 1.0)


def test_an_unknown_cardinality_is_refused_in_words_before_anything_starts(capsys):
    from jetwatch.cli import main

    assert main(["collect", "--metrics-cardinality", "some"]) == 2
    err = capsys.readouterr().err
    assert "--metrics-cardinality: 'some' is not a metrics cardinality" in err and "non_ok" in err


def test_pin_state_and_pin_switch_and_unpin_counters_follow_a_real_pin_story(nats_server, db_path, uid, run):
    """A stalled pinned client (timeout unpin) and an admin unpin: the counters count them by
    reason, and the pin gauges and info name the current holder."""
    from jetwatch.core.jsapi import JetStreamAPI
    from tests.scenario import pin_story

    stream = f"{uid}_PINS"

    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        settings = collector_settings(nats_server.url, db_path, (stream,), interval=0.3, metrics_cardinality="all",
                                      metrics_address=f"127.0.0.1:{free_port()}", **FAST)
        async with collecting(settings) as collector:
            story = await pin_story(nc, api, stream, "work", f"{uid}.work")
            holder = story.pins[-1]

            # The holder comes from the cycle's consumer info, the counters from the advisory loop:
            # two loops, so one scrape may show the new holder before the pin advisory that names
            # it was counted. Wait for all of them in the same scrape.
            def counted() -> dict | None:
                got = scrape(collector.metrics_bound)
                reasons = {s.labels["reason"]: s.value for s in got.get("jetwatch_unpins", []) if s.name.endswith("_total")}
                pinned = {s.labels["pinned_id"] for s in got.get("jetwatch_consumer_pin_info", [])
                          if s.labels["stream"] == stream}
                switches = [s.value for s in got.get("jetwatch_consumer_pin_switches", [])
                            if s.labels["stream"] == stream and s.name.endswith("_total")]
                fleet = [s.value for s in got.get("jetwatch_pin_switches", []) if s.name.endswith("_total")]
                ok = (reasons.get("admin", 0) >= 1 and reasons.get("timeout", 0) >= 1 and pinned == {holder}
                      and switches and switches[0] >= 3 and fleet and fleet[0] >= 3)
                return got if ok else None

            got = await eventually(counted, timeout=30, message="pin counters, switches and the current holder on /metrics")
            switches = [s for s in got["jetwatch_consumer_pin_switches"]
                        if s.labels["stream"] == stream and s.name.endswith("_total")]
            assert len(switches) == 1 and switches[0].labels["group"] == "jobs"
            pinned = [s for s in got["jetwatch_consumer_pinned"] if s.labels["stream"] == stream]
            assert [s.value for s in pinned] == [1.0]
            age = [s.value for s in got["jetwatch_consumer_pin_age_seconds"] if s.labels["stream"] == stream]
            assert age and age[0] >= 0
            for w in story.workers:
                await w.stop()
        await nc.close()

    run(scenario())


def test_unpin_reasons_from_advisories_are_bounded_to_the_known_ones_on_metrics(nats_server, db_path, uid, run):
    """Anyone may publish on the UNPINNED subject: 300 advisories with distinct reasons give the
    reason label three values (`admin`, `timeout`, `other`), not 300 series."""
    stream = f"{uid}_REASONS"

    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid}.>"])
        await make_consumer(api, stream, "w", "pinned_client", timeout_s=30)
        settings = collector_settings(nats_server.url, db_path, (stream,), interval=0.3, metrics_cardinality="all",
                                      metrics_address=f"127.0.0.1:{free_port()}", **FAST)
        subject = f"$JS.EVENT.ADVISORY.CONSUMER.UNPINNED.{stream}.w"
        async with collecting(settings) as collector:
            for i in range(50):  # for consumers that do not exist: counted in the fleet's total only
                await nc.publish(f"$JS.EVENT.ADVISORY.CONSUMER.UNPINNED.{stream}.ghost-{i}", json.dumps({
                    "type": "io.nats.jetstream.advisory.v1.consumer_group_unpinned", "id": f"{uid}-ghost-{i}",
                    "timestamp": "2026-11-22T10:00:00Z", "stream": stream, "consumer": f"ghost-{i}",
                    "group": "jobs", "reason": "admin"}).encode())
            for i, reason in enumerate(["admin", "timeout", *(f"made-up-{i}" for i in range(300))]):
                await nc.publish(subject, json.dumps({
                    "type": "io.nats.jetstream.advisory.v1.consumer_group_unpinned", "id": f"{uid}-{i}",
                    "timestamp": "2026-11-22T10:00:00Z", "stream": stream, "consumer": "w", "group": "jobs",
                    "reason": reason}).encode())
            await nc.flush()

            def counted() -> dict | None:
                got = scrape(collector.metrics_bound)
                total = sum(s.value for s in got.get("jetwatch_unpins", []) if s.name.endswith("_total"))
                return got if total >= 352 else None

            got = await eventually(counted, timeout=30, message="the 352 unpins counted on /metrics")
            fleet = {s.labels["reason"]: s.value for s in got["jetwatch_unpins"] if s.name.endswith("_total")}
            assert fleet == {"admin": 51.0, "timeout": 1.0, "other": 300.0}
            await collector.retain_once()  # forgets the per-consumer counts of consumers not sampled
            assert {k[2] for k in collector.pin_counts.unpins} == {"w"}
            assert collector.pin_counts.fleet_unpins == {"admin": 51, "timeout": 1, "other": 300}
            per_consumer = {s.labels["reason"] for s in got.get("jetwatch_consumer_unpins", [])
                            if s.name.endswith("_total") and s.labels["stream"] == stream}
            assert per_consumer <= {"admin", "timeout", "other"}
        await nc.close()

    run(scenario())


@pytest.mark.parametrize("fleet,expected", [
    # grows to the limit (all), past it (non-OK only), hovers at it (still non-OK only), falls below
    # nine tenths of it (all again)
    ([10, 11, 10, 10, 9, 10], [True, False, False, False, True, True]),
    ([5, 20, 8], [True, False, True]),
])
def test_auto_cardinality_exports_every_consumer_up_to_the_limit_without_flapping_at_it(fleet, expected):
    exporter = metrics.CycleCollector("auto", all_up_to=10)
    assert [exporter.decide_all(n) for n in fleet] == expected
    assert all(metrics.CycleCollector("all", 10).decide_all(n) for n in fleet)
    assert not any(metrics.CycleCollector("non_ok", 10).decide_all(n) for n in fleet)
