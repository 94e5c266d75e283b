"""Alerts: the shipped Prometheus rules pass promtool, match the collector's own alert
declaration, and `collect --alertmanager` drives a real Alertmanager end to end."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import nats
import pytest
import yaml

from jetwatch.core.embedded_server import free_port
from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.core.pin_announce import PinAnnouncer
from jetwatch.demo.workers import PullWorker
from jetwatch.exporters import alertmanager as poster
from jetwatch.store.database import Store
from tests.helpers import (
    collecting,
    collector_settings,
    eventually,
    make_consumer,
    make_stream,
    publish,
    rows,
    running,
    stop_process,
    wait_until,
)
from tests.test_metrics import PROMETHEUS, prom_query, prometheus

RULES_DIR = Path(__file__).resolve().parents[1] / "deploy" / "prometheus"
RULES = RULES_DIR / "jetwatch-rules.yml"
ALERTMANAGER = "/usr/bin/prometheus-alertmanager"


def test_promtool_accepts_the_rules():
    out = subprocess.run(["promtool", "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_promtool_unit_tests_of_the_rules_pass():
    out = subprocess.run(["promtool", "test", "rules", "jetwatch-rules.test.yml"], cwd=RULES_DIR,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def _consumer_rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [r for g in groups for r in g["rules"] if "alert" in r and "jetwatch_consumer_verdict" in r["expr"]]


def test_the_rules_alert_on_exactly_the_verdicts_the_collector_alerts_on():
    """Prometheus rules and direct alerts are two renderings of one declaration."""
    from_rules = set()
    for rule in _consumer_rules():
        matcher = rule["expr"].split('verdict=~"' if "=~" in rule["expr"] else 'verdict="')[1].split('"')[0]
        from_rules.add((rule["alert"], tuple(matcher.split("|")), rule["labels"]["severity"]))
    declared = {(a.name, a.verdicts, a.severity) for a in poster.CONSUMER_ALERTS}
    assert from_rules == declared


def _series_labels(series: str) -> dict[str, str]:
    """The labels of a promtool input series ('name{a="x",b="y"}'); an empty one is no label."""
    return {k: v for k, v in re.findall(r'(\w+)="([^"]*)"', series) if v}


def _pin_holders(case: dict[str, Any]) -> dict[tuple[str, ...], str]:
    """(cluster, account, stream, consumer, group) -> the `pin_holder` of the case's pin info series."""
    out = {}
    for s in case["input_series"]:
        if s["series"].startswith("jetwatch_consumer_pin_info{"):
            lab = _series_labels(s["series"])
            out[tuple(lab.get(k, "") for k in ("cluster", "account", "stream", "consumer", "group"))] = lab["pin_holder"]
    return out


def test_direct_alert_annotations_are_the_rules_annotations_for_the_same_labels():
    """The promtool test's expected annotations (what Prometheus renders from the rule
    templates) equal what the collector sends to Alertmanager for the same labels, and the same
    pin holder where the consumer's pin info names one."""
    cases = yaml.safe_load((RULES_DIR / "jetwatch-rules.test.yml").read_text())["tests"]
    checked = named = 0
    for case in cases:
        holders = _pin_holders(case)
        for check in case["alert_rule_test"]:
            for exp in check.get("exp_alerts", []):
                labels = exp["exp_labels"]
                if "verdict" not in labels:
                    continue
                alert = poster.BY_VERDICT[labels["verdict"]]
                ours = poster.labels_for(alert, labels["verdict"], labels.get("cluster", ""), labels["account"],
                                           labels["stream"], labels["consumer"], labels.get("group", ""))
                assert ours == labels
                holder = holders.get(tuple(labels.get(k, "") for k in ("cluster", "account", "stream", "consumer",
                                                                       "group")), "")
                assert poster.annotations_for(ours, "http://127.0.0.1:8501/", holder) == exp["exp_annotations"]
                checked += 1
                named += bool(holder)
    assert checked >= 3 and named >= 2


# -- end to end against a real Alertmanager ------------------------------------------------------

class Webhook:
    """Alertmanager's webhook receiver: a local HTTP server that keeps every notification."""

    def __init__(self) -> None:
        self.notifications: list[tuple[float, dict[str, Any]]] = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                hook.notifications.append((time.monotonic(), json.loads(body)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def alerts(self, stream: str) -> list[tuple[float, str, dict[str, Any]]]:
        """(arrival, status, alert) for each alert of `stream` in each notification."""
        return [(t, a["status"], a) for t, n in list(self.notifications) for a in n["alerts"]
                if a["labels"].get("stream") == stream]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextlib.contextmanager
def alertmanager(tmp_path: Path, webhook_url: str) -> Iterator[str]:
    port = free_port()
    config = tmp_path / "alertmanager.yml"
    config.write_text(json.dumps({
        "route": {"receiver": "hook", "group_by": ["alertname", "stream", "consumer", "verdict"],
                  "group_wait": "0s", "group_interval": "1s", "repeat_interval": "1h"},
        "receivers": [{"name": "hook", "webhook_configs": [{"url": webhook_url, "send_resolved": True}]}],
    }))
    proc = subprocess.Popen([ALERTMANAGER, f"--config.file={config}", f"--storage.path={tmp_path / 'am'}",
                             f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise AssertionError("Alertmanager did not become ready") from None
                time.sleep(0.1)
        yield url
    finally:
        stop_process(proc)


def _active(url: str, stream: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{url}/api/v2/alerts?active=true", timeout=5) as r:
        return [a for a in json.loads(r.read()) if a["labels"].get("stream") == stream]


@pytest.mark.skipif(not Path(ALERTMANAGER).exists(), reason="Debian's prometheus-alertmanager: `make system-deps`")
def test_a_stalled_pinned_worker_fires_one_alert_a_restart_keeps_it_and_recovery_resolves_it(
        nats_server, db_path, uid, run, tmp_path):
    stream = f"{uid}_ALERT"
    store = Store(db_path)
    hook = Webhook()

    async def scenario(am_url: str) -> None:
        nc = await nats.connect(nats_server.url, name="stuck")
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid}.>"])
        await make_consumer(api, stream, "work", "pinned_client", timeout_s=60, ack_wait=int(300e9))
        worker = PullWorker(nc, stream, "work", "jobs", name="stuck",  # it says who holds the pin
                            announcer=PinAnnouncer(nc, stream, "work", group="jobs", version="2.0.1")).start()
        settings = collector_settings(nats_server.url, db_path, (stream,), interval=0.3, health_window=10.0,
                                      health_min_samples=3, health_min_span=1.0, alert_after=0.0,
                                      alertmanager=am_url, dashboard_url="http://dash.example:8501/",
                                      monitor_url=(nats_server.monitor_url,))
        interval = settings.interval
        cycles: list[tuple[float, bool]] = []  # (end of the cycle's exports, judged STALLED in it)

        async def record(collector, judged, seconds) -> None:
            cycles.append((time.monotonic(), "STALLED" in set(judged.changes["to_verdict"])))

        try:
            async with collecting(settings) as first:
                first.cycle_hooks.append(record)
                for n in (1, 2):  # the pinned worker acknowledges while jetwatch watches: its rhythm
                    await publish(nc, f"{uid}.x", 1)
                    await eventually(lambda n=n: worker.stats.acked >= n, message=f"ack {n}")
                    await eventually(lambda c=first.cycles: first.cycles >= c + 2, message="two cycles")
                worker.acking = False  # then keeps pulling and acknowledges nothing more: STALLED
                await publish(nc, f"{uid}.x", 5)
                got = await eventually(lambda: [a for a in hook.alerts(stream) if a[1] == "firing"], timeout=40,
                                       message="the STALLED alert at the webhook")
            fired_at_hook, _, alert = got[0]
            assert alert["labels"]["alertname"] == "JetwatchConsumerUnhealthy"
            assert alert["labels"]["verdict"] == "STALLED" and alert["labels"]["group"] == "jobs"
            assert alert["annotations"]["runbook_url"] == (
                f"http://dash.example:8501/consumer?account=%24G&stream={stream}&consumer=work&cluster=default")
            assert alert["annotations"]["description"].endswith(" The pin is held by stuck · verified."), alert

            change_at = rows(store, "SELECT max(ts) FROM verdict_changes WHERE stream = ? AND to_verdict = 'STALLED'",
                             [stream])[0][0]
            starts = _active(am_url, stream)[0]["startsAt"]

            # A restart: the new collector sends the same alert; Alertmanager keeps one, notifies nobody.
            async with collecting(settings) as again:
                await eventually(lambda: again.alertmanager.posts >= 5, timeout=30, message="five posts after restart")
                active = _active(am_url, stream)
                assert len(active) == 1 and active[0]["startsAt"] == starts, "the same alert, not a new one"
                assert [a[1] for a in hook.alerts(stream)] == ["firing"], "no second notification"

                await worker.ack_held()
                worker.acking = True  # recovered
                await eventually(lambda: [a for a in hook.alerts(stream) if a[1] == "resolved"], timeout=40,
                                 message="the resolved notification")
            statuses = [a[1] for a in hook.alerts(stream)]
            assert statuses == ["firing", "resolved"], statuses
            assert _active(am_url, stream) == []
            # Cause to arrival: from the cycle whose samples turned the verdict STALLED (judged and
            # posted in that same cycle) to the webhook's receipt, in cycles and seconds.
            cause = next(i for i, (_, stalled) in enumerate(cycles) if stalled)
            later = sum(1 for t, _ in cycles[cause + 1:] if t < fired_at_hook)
            assert later <= 2, "a verdict change reaches Alertmanager within 2 cycles"
            print(f"\nALERT LATENCY: STALLED judged at {change_at}; webhook got it {later} cycle(s) after the "
                  f"cycle that judged it, {fired_at_hook - cycles[cause][0]:+.3f}s after that cycle's exports "
                  f"(interval {interval}s)")
        finally:
            await worker.stop()
            await nc.close()

    try:
        with alertmanager(tmp_path, hook.url) as am_url:
            run(scenario(am_url))
    finally:
        hook.close()


def test_an_unreachable_alertmanager_never_delays_sampling_and_is_reported(nats_server, db_path, uid, run):
    """Posting runs beside the cycle: with an Alertmanager that accepts connections and never
    answers, cycles keep their pace and the failure is said where the on-call engineer looks
    (the collector's last error)."""
    import socket

    stream = f"{uid}_NOAM"
    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    hole.listen(16)  # never accepted: every request hangs until the client's timeout

    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid}.>"])
        await make_consumer(api, stream, "idle")
        await publish(nc, f"{uid}.x", 2)
        dead = f"http://127.0.0.1:{hole.getsockname()[1]}"
        settings = collector_settings(nats_server.url, db_path, (stream,), interval=0.3, health_window=3.0,
                                      health_min_samples=3, health_min_span=1.0, alert_after=0.0, alertmanager=dead)
        async with collecting(settings) as collector:
            await eventually(lambda: collector.outputs.alert_post is not None and not collector.outputs.alert_post.done(),
                             timeout=30, message="a post to the dead Alertmanager under way")
            hanging, cycles = collector.outputs.alert_post, collector.cycles
            await eventually(hanging.done, timeout=30, message="the hanging post ends at the client's timeout")
            assert collector.cycles >= cycles + 2, "cycles went on while the post hung (a blocking post allows none)"
            await eventually(lambda: collector.last_error is not None and "Alertmanager" in collector.last_error[0],
                             timeout=30, message="the alerting failure reported")
        await nc.close()

    try:
        run(scenario())
    finally:
        hole.close()


class Trickler:
    """An Alertmanager that accepts the connection, reads the post, and then answers one byte a
    second: no read ever waits long enough for a socket timeout, so only a total deadline ends it."""

    def __init__(self, every_s: float = 1.0, at_most: int = 40) -> None:
        import socket

        self.every_s, self.at_most = every_s, at_most
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.stopped = threading.Event()
        self.accepted = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    def _trickle(self, conn: Any) -> None:
        with conn:
            try:
                conn.recv(65536)
                for byte in b"HTTP/1.1 200 OK\r\n"[:1] * self.at_most:
                    if self.stopped.wait(self.every_s):
                        return
                    conn.sendall(bytes([byte]))
            except OSError:
                return

    def close(self) -> None:
        self.stopped.set()
        self.listener.close()


def _trickled_collector(nats_server: Any, db_path: str, uid: str, stream: str, trickler: Trickler) -> Any:
    return collector_settings(nats_server.url, db_path, (stream,), interval=0.3, health_window=3.0,
                              health_min_samples=3, health_min_span=1.0, alert_after=0.0,
                              alertmanager=trickler.url)


async def _idle_consumer(nc: Any, uid: str, stream: str) -> None:
    api = JetStreamAPI(nc)
    await make_stream(api, stream, [f"{uid}.>"])
    await make_consumer(api, stream, "idle")
    await publish(nc, f"{uid}.x", 2)


def test_a_trickling_alertmanager_fails_the_post_at_its_deadline_and_says_so_in_the_collector_status(
        nats_server, db_path, uid, run):
    """One byte every second keeps every socket read alive: the post still ends at its total
    deadline, and the failure is in the collector's error and its status row in the store (the
    sidebar, `jetwatch status`), instead of "previous post still under way" in the log forever."""
    stream = f"{uid}_TRICKLE"
    trickler = Trickler()

    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        await _idle_consumer(nc, uid, stream)
        async with collecting(_trickled_collector(nats_server, db_path, uid, stream, trickler)) as collector:
            await eventually(lambda: collector.outputs.alert_post is not None, timeout=30, message="a post under way")
            await eventually(lambda: collector.last_error is not None and "Alertmanager" in collector.last_error[0],
                             timeout=20, message="the post's failure said in the collector's error")
            assert "did not answer within" in collector.last_error[0], collector.last_error

            def stored_error() -> str | None:
                got = rows(Store(db_path), "SELECT last_error FROM collector_status")
                return got[0][0] if got and got[0][0] and "Alertmanager" in got[0][0] else None

            await eventually(stored_error, timeout=20, message="the failure in collector_status.last_error")
            await eventually(lambda: trickler.accepted >= 2, timeout=20,
                             message="the next cycle posts again once the first post gave up")
        await nc.close()

    try:
        run(scenario())
    finally:
        trickler.close()


def test_shutdown_does_not_wait_for_a_post_to_a_trickling_alertmanager(nats_server, db_path, uid, run):
    """SIGTERM (the collector's stop) while a post trickles: the collector stops at once, the post cut."""
    stream = f"{uid}_TRICKSTOP"
    trickler = Trickler()

    async def scenario() -> float:
        nc = await nats.connect(nats_server.url)
        await _idle_consumer(nc, uid, stream)
        async with running(_trickled_collector(nats_server, db_path, uid, stream, trickler)) as (collector, task):
            await eventually(lambda: collector.outputs.alert_post is not None and not collector.outputs.alert_post.done()
                             and trickler.accepted > 0, timeout=30, message="a post under way")
            began = time.monotonic()
            collector._stop.set()
            await asyncio.wait_for(task, 60)
            took = time.monotonic() - began
        await nc.close()
        return took

    try:
        took = run(scenario())
    finally:
        trickler.close()
    assert took < 2.0, f"the collector took {took:.1f}s to stop behind a post to a trickling Alertmanager"


@pytest.mark.parametrize("content_length", [None, 3 << 30], ids=["unannounced", "announced"])
def test_an_alertmanager_that_floods_its_reply_is_read_up_to_a_few_kib_and_said(content_length):
    """An "Alertmanager" that answers the post 200 and then sends hundreds of MiB fast, within the
    deadline: the reply is read up to a few KiB and no further, and the post fails in words that
    name the URL and the cap (the alerts are re-sent next cycle)."""
    from tests.helpers import Flood

    flood = Flood(256 << 20, content_length)
    try:
        client = poster.AlertmanagerClient(flood.url, 0.0, "http://127.0.0.1:8501/", 1.0, timeout_s=60.0)
        alert = {"labels": {"alertname": "JetwatchConsumerUnhealthy"}, "annotations": {},
                 "startsAt": "2026-01-01T00:00:00Z", "endsAt": "2026-01-01T01:00:00Z"}
        with pytest.raises(OSError) as failed:
            client.post([alert])
        said = str(failed.value)
        assert f"Alertmanager at {flood.url}/api/v2/alerts" in said and "the cap of 4,096 bytes" in said, said
        assert "re-sent next cycle" in said and client.posts == 0
        wait_until(lambda: len(flood.sent) == 1, message="the flood's connection ended")
        assert flood.sent[0] < 32 << 20, f"{flood.sent[0]:,} bytes read of a reply capped at 4 KiB"
    finally:
        flood.close()


# -- the drop alert, from a real server through a real Prometheus with the shipped rules --------

@pytest.mark.skipif(not Path(PROMETHEUS).exists(), reason="Debian's prometheus is installed by `make system-deps`")
def test_a_terminated_message_fires_the_drop_alert_in_a_real_prometheus_with_the_shipped_rules(
        nats_server, db_path, uid, run, tmp_path):
    """A client terminates one message (+TERM) of a consumer that otherwise keeps up; the collector
    runs on its default cardinality. Prometheus, loading deploy/prometheus/jetwatch-rules.yml,
    fires JetwatchConsumerDroppedMessages for that consumer and reason, and for no other consumer."""
    stream = f"{uid}_DROPALERT"

    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid.lower()}.dropalert.>"])
        await make_consumer(api, stream, "billing", max_deliver=5)
        await make_consumer(api, stream, "quiet")
        await nc.request(f"{uid.lower()}.dropalert.invoice", b"unparseable", timeout=5)
        settings = collector_settings(nats_server.url, db_path, (stream,), interval=0.3,
                                      metrics_address=f"127.0.0.1:{free_port()}")
        async with collecting(settings) as collector:
            host, port = collector.metrics_bound
            with prometheus(tmp_path, f"{host}:{port}", [str(RULES)]) as url:
                await eventually(lambda: prom_query(url, 'jetwatch_consumers'), timeout=60, interval=0.5,
                                 message="Prometheus scraping the collector")
                sub = await nc.jetstream().pull_subscribe_bind("billing", stream)
                [msg] = await sub.fetch(1, timeout=5)
                await nc.publish(msg.reply, b"+TERM schema v1 is not supported")
                await nc.flush()
                expr = f'ALERTS{{alertname="JetwatchConsumerDroppedMessages",alertstate="firing",stream="{stream}"}}'
                got = await eventually(lambda: prom_query(url, expr), timeout=60, interval=0.5,
                                       message="the drop alert firing in Prometheus")
                assert [(a["metric"]["consumer"], a["metric"]["reason"], a["metric"]["severity"]) for a in got] == [
                    ("billing", "terminated", "warning")]
                await sub.unsubscribe()
        await nc.close()

    run(scenario())
