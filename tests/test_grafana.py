"""The Grafana dashboard (deploy/grafana/): the committed JSON is what the generator builds, and every
panel's query is valid PromQL, names only metrics the collector declares, and returns series from a
real Prometheus scraping a real collector over the suite's real nats-server. No Grafana runs: the
queries are what Grafana would send, its variables substituted as it substitutes them."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from types import ModuleType
from typing import Any

import nats
import pytest

from jetwatch.core.embedded_server import free_port
from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.demo.workers import PullWorker
from jetwatch.exporters.metrics import METRICS
from tests.helpers import collecting, collector_settings, eventually, make_consumer, make_stream, publish
from tests.test_metrics import FAST, PROMETHEUS, _idle_and_ok, prom_query, prometheus

ROOT = Path(__file__).resolve().parents[1]
GENERATOR = ROOT / "deploy" / "grafana" / "dashboard.py"
COMMITTED = ROOT / "deploy" / "grafana" / "jetwatch.json"
PROMTOOL = "/usr/bin/promtool"
REGENERATE = "python deploy/grafana/dashboard.py > deploy/grafana/jetwatch.json"

# Grafana's own variables, as it fills them in before a query reaches Prometheus.
BUILT_IN = {"__rate_interval": "1m", "__interval": "1m", "__range": "1h"}
VARIABLE = re.compile(r"\$\{(\w+)\}|\$(\w+)")
METRIC = re.compile(r"jetwatch_[a-z_]+")
LABEL_VALUES = re.compile(r"label_values\((?P<selector>.+),\s*(?P<label>\w+)\)")


def generator() -> ModuleType:
    """deploy/grafana/dashboard.py, imported from its path (deploy/ is not a package)."""
    spec = importlib.util.spec_from_file_location("jetwatch_grafana_dashboard", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def committed() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(COMMITTED.read_text())
    return loaded


def panel_queries() -> list[tuple[str, str]]:
    queries: list[tuple[str, str]] = generator().queries()
    return queries


def query_variables() -> list[dict[str, Any]]:
    return [v for v in committed()["templating"]["list"] if v["type"] == "query"]


def variable_selectors() -> list[tuple[str, str, str]]:
    """(variable, series selector, label) of each `label_values(selector, label)` variable."""
    out = []
    for v in query_variables():
        found = LABEL_VALUES.fullmatch(v["query"])
        assert found, f"variable {v['name']}: {v['query']!r} is not label_values(selector, label)"
        out.append((v["name"], found["selector"], found["label"]))
    return out


def substituted(expr: str) -> str:
    """`expr` as Grafana sends it with every variable at All (its allValue) and its own intervals."""
    values = {**BUILT_IN, **{v["name"]: v["allValue"] for v in query_variables()}}

    def value(found: re.Match[str]) -> str:
        name = found[1] or found[2]
        assert name in values, f"{expr!r} uses ${name}, which the test does not know how Grafana fills in"
        return values[name]

    return VARIABLE.sub(value, expr)


def declared_series() -> set[str]:
    """Every series name /metrics can write: prometheus_client adds _total to counters, _info to
    info metrics, and writes a histogram as its _bucket, _sum and _count."""
    names = set()
    for m in METRICS:
        names.add(m.exposed)
        if m.type == "histogram":
            names.update(m.name + suffix for suffix in ("_bucket", "_sum", "_count"))
    return names


def test_the_committed_dashboard_is_what_the_generator_builds_now():
    """A hand edit of jetwatch.json, or a generator changed without regenerating, fails here."""
    out = subprocess.run([sys.executable, str(GENERATOR)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout == COMMITTED.read_text(), f"deploy/grafana/jetwatch.json is stale: {REGENERATE}"


def test_the_dashboard_is_jetwatchs_with_chained_variables_and_rates_over_the_rate_interval():
    board = committed()
    assert (board["title"], board["uid"], board["tags"], board["refresh"], board["time"]) == (
        "jetwatch", "jetwatch", ["nats", "jetstream", "jetwatch"], "30s", {"from": "now-1h", "to": "now"})
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    chain = ["cluster", "account", "stream", "consumer"]
    assert [v["name"] for v in query_variables()] == chain
    for i, name in enumerate(chain):
        v = variables[name]
        assert (v["multi"], v["includeAll"], v["allValue"]) == (True, True, ".*"), name
        assert all(f'{before}=~"${before}"' in v["query"] for before in chain[:i]), (name, v["query"])
    for p in board["panels"]:
        for t in p.get("targets", []):
            assert t["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
            ranges = re.findall(r"\[([^\]]*)\]", t["expr"])
            assert all(r == "$__rate_interval" for r in ranges), (p["title"], t["expr"])


def test_every_panel_says_what_it_shows_and_the_per_consumer_ones_when_ok_consumers_are_not_exported():
    panels = [p for p in committed()["panels"] if p["type"] != "row"]
    assert len({p["id"] for p in committed()["panels"]}) == len(committed()["panels"])
    for p in panels:
        assert len(p.get("description", "")) > 60, f"{p['title']}: say what it shows and what to do"
        if any("jetwatch_consumer_" in t["expr"] for t in p["targets"]):
            assert "--metrics-all-up-to" in p["description"] and "`non_ok`" in p["description"], p["title"]


def test_every_metric_a_query_names_is_one_the_collector_declares():
    named = {(title, name) for title, expr in panel_queries() for name in METRIC.findall(expr)}
    named |= {(f"variable {v}", name) for v, selector, _ in variable_selectors() for name in METRIC.findall(selector)}
    unknown = sorted((title, name) for title, name in named if name not in declared_series())
    assert named and not unknown, f"not on /metrics: {unknown}"
    # Every panel names at least one metric: a panel without one would show nothing from jetwatch.
    assert {title for title, _ in panel_queries()} <= {title for title, _ in named}


@pytest.mark.skipif(not Path(PROMTOOL).exists(), reason="Debian's promtool is installed by `make system-deps`")
def test_every_panel_query_is_valid_promql(tmp_path):
    """promtool has no PromQL check of its own: the queries, substituted, become recording rules,
    whose expressions `promtool check rules` parses; so do the variables' selectors."""
    exprs = [(title, substituted(expr)) for title, expr in panel_queries()]
    exprs += [(f"variable {v}", substituted(selector)) for v, selector, _ in variable_selectors()]
    rules = [{"record": f"grafana_query:{i}", "expr": expr} for i, (_, expr) in enumerate(exprs)]
    path = tmp_path / "grafana-queries.yml"
    path.write_text(json.dumps({"groups": [{"name": "grafana", "rules": rules}]}))  # YAML is a superset of JSON
    out = subprocess.run([PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    listing = "\n".join(f"  {i}: {title}: {expr}" for i, (title, expr) in enumerate(exprs))
    assert out.returncode == 0, f"{out.stdout}{out.stderr}\nthe rules by index:\n{listing}"
    assert f"SUCCESS: {len(rules)} rules found" in out.stdout, out.stdout


def prom_range(url: str, expr: str, start: float, end: float) -> list[dict]:
    """What a time series panel draws: `expr` evaluated every second from `start` to `end`."""
    query = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": 1})
    with urllib.request.urlopen(f"{url}/api/v1/query_range?{query}", timeout=10) as r:
        result: list[dict] = json.loads(r.read())["data"]["result"]
        return result


def prom_label_values(url: str, selector: str, label: str) -> list[str]:
    """What Grafana lists for label_values(selector, label): the label's values on the matching series."""
    query = urllib.parse.urlencode({"match[]": selector})
    try:
        with urllib.request.urlopen(f"{url}/api/v1/label/{label}/values?{query}", timeout=5) as r:
            values: list[str] = json.loads(r.read())["data"]
            return values
    except OSError:
        return []  # not listening yet


async def _limited(nc: Any, api: JetStreamAPI, uid: str) -> str:
    """A stream whose max_age removes what `behind` has not processed: three messages nobody pulls,
    which the limit will remove unprocessed (time to loss: max_age less their age)."""
    stream = f"{uid}_LOSS"
    await make_stream(api, stream, [f"loss.{uid}.>"], max_age=600 * 10**9)
    await make_consumer(api, stream, "behind")
    await publish(nc, f"loss.{uid}.x", 3)
    return stream


async def _moved_pin(nc: Any, api: JetStreamAPI, uid: str) -> PullWorker:
    """A pinned_client consumer whose worker takes the pin, loses it to an operator's unpin and
    takes it again: one pin move, counted by cause once the cause is settled. The worker keeps
    running (the caller stops it), so the group's failover readiness is read from a live holder."""
    stream = f"{uid}_PIN"
    await make_stream(api, stream, [f"pin.{uid}.>"])
    await make_consumer(api, stream, "work", "pinned_client", timeout_s=30)
    worker = PullWorker(nc, stream, "work", "jobs", name="a", expires_s=0.5).start()
    await publish(nc, f"pin.{uid}.x", 3)
    first = await eventually(lambda: worker.pin_id, message="the worker pinned")
    await api.unpin(stream, "work", "jobs")
    await publish(nc, f"pin.{uid}.x", 3)
    await eventually(lambda: worker.pin_id not in (None, first), message="the worker pinned again after the unpin")
    return worker


async def _every_query_answered(url: str, queries: list[tuple[str, str]]) -> dict[str, list[dict]]:
    """Each query's answer, once every one has a series (Prometheus scrapes every second, and a
    rate needs two scrapes); on timeout, the panels still without one."""
    missing: list[str] = []

    def all_answered() -> dict[str, list[dict]] | None:
        got = {expr: prom_query(url, expr) for _, expr in queries}
        missing[:] = [f"{title}: {expr}" for title, expr in queries if not got[expr]]
        return None if missing else got

    try:
        return await eventually(all_answered, timeout=150, interval=1.0, message="a series for every panel's query")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; no series yet for:\n" + "\n".join(missing)) from None


def _the_panels_show_the_workload(url: str, queries: list[tuple[str, str]], got: dict[str, list[dict]],
                                  loss_stream: str, began: float) -> None:
    def answers(title: str) -> list[list[dict]]:
        return [got[expr] for t, expr in queries if t == title]

    for answer in answers("Consumers not OK now"):
        named = {r["metric"]["consumer"] for r in answer}
        assert {"idle", "behind"} <= named and "fine" not in named, named
    [[loss]] = answers("Time to loss")
    assert (loss["metric"]["stream"], loss["metric"]["consumer"]) == (loss_stream, "behind")
    assert 0 < float(loss["value"][1]) <= 600
    # Drawn over the test's span, the panel shows the unpin's move by its cause.
    [expr] = [expr for title, expr in queries if title == "Pin moves by cause"]
    shown = {r["metric"]["cause"]: max(float(v) for _, v in r["values"])
             for r in prom_range(url, expr, began, time.time())}
    assert shown and max(shown.values()) >= 1, f"the unpin's move not shown: {shown}"
    [ready] = answers("Failover readiness of pinned groups")
    assert {r["metric"]["readiness"]: r["value"][1] for r in ready}["no_standby"] == "1", ready  # one worker
    for name, selector, label in variable_selectors():
        assert prom_label_values(url, substituted(selector), label), f"variable {name} lists nothing: {selector}"
    consumers = prom_label_values(url, substituted(variable_selectors()[-1][1]), "consumer")
    assert {"idle", "behind"} <= set(consumers), consumers


@pytest.mark.skipif(not Path(PROMETHEUS).exists(), reason="Debian's prometheus is installed by `make system-deps`")
def test_every_panel_query_returns_series_from_a_real_prometheus_scraping_a_real_collector(
        nats_server, db_path, uid, run, tmp_path):
    """The workload makes every panel's series exist, as they would in production: `idle` has work
    and nobody pulling (not OK, so its per-consumer series are exported), `behind` the same on a
    stream whose max_age projects a loss, and a pinned consumer's pin is moved by an operator's
    unpin. Every query, as Grafana would send it with every variable at All, then returns a series,
    and every variable lists the consumers it filters."""
    queries = [(title, substituted(expr)) for title, expr in panel_queries()]

    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        streams = (await _idle_and_ok(nc, uid), await _limited(nc, api, uid), f"{uid}_PIN")
        settings = collector_settings(nats_server.url, db_path, streams, interval=0.3, deploy_window=1.0,
                                      metrics_address=f"127.0.0.1:{free_port()}", **FAST)
        async with collecting(settings) as collector:
            worker = await _moved_pin(nc, api, uid)  # after the collector started: it counts what it captures
            try:
                host, port = collector.metrics_bound
                began = time.time()
                with prometheus(tmp_path, f"{host}:{port}") as url:
                    got = await _every_query_answered(url, queries)
                    _the_panels_show_the_workload(url, queries, got, streams[1], began)
            finally:
                await worker.stop()
        await nc.close()

    run(scenario())
