"""Beyond one collector: two real single-node servers, a collector each (`--cluster a`, `--cluster b`),
each into its own store, watched as one fleet by the dashboard, the pipeline and the actions."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import nats
import pandas as pd
import pytest
import streamlit as st

from jetwatch.core.embedded_server import NatsServer, free_port
from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.core.settings import Settings
from jetwatch.dashboard import stores
from jetwatch.dashboard.tables import link_target
from jetwatch.store.clusters import identity
from jetwatch.store.database import Store
from tests.helpers import (
    OPERATOR_PASSWORD,
    clean_env,
    make_consumer,
    make_stream,
    operators_file,
    publish,
    rows,
    wait_until,
)
from tests.test_dashboard import frame, run_app

STREAM = "ORDERS"
SHARED = "work"  # the same consumer name in both clusters
ONLY = {"a": "only_a", "b": "only_b"}


async def _fill(url: str, cluster: str) -> None:
    nc = await nats.connect(url)
    api = JetStreamAPI(nc)
    await make_stream(api, STREAM, ["orders.>"])
    await make_consumer(api, STREAM, SHARED)
    await make_consumer(api, STREAM, ONLY[cluster])
    await publish(nc, "orders.new", 3)
    await nc.close()


async def _paused(url: str, consumer: str) -> bool:
    nc = await nats.connect(url)
    try:
        return bool((await JetStreamAPI(nc).consumer_info(STREAM, consumer)).get("paused"))
    finally:
        await nc.close()


def collect(server: NatsServer, cluster: str, db: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "jetwatch.cli", "collect", "--server", server.url, "--db", str(db),
                             "--cluster", cluster, "--interval", "0.3s", "--include-streams", STREAM],
                            env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _sampled(db: Path) -> bool:
    store = Store(db)
    if not store.exists():
        return False
    try:
        return (len(rows(store, "SELECT * FROM consumer_latest")) == 2
                and bool(rows(store, "SELECT * FROM collector_status WHERE server_url IS NOT NULL")))
    except Exception:  # held by the collector this instant
        return False


# One worker runs this module, so the two servers and their stores (`fleet`) are made once.
pytestmark = pytest.mark.xdist_group("fleet")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """Two servers, each sampled by its own collector into its own store in one directory; the
    collectors are stopped once both stores hold every consumer (the pages read files, not servers)."""
    base = tmp_path_factory.mktemp("clusters")
    servers = {c: NatsServer(store_dir=base / f"nats-{c}" / "js", monitor_port=free_port()).start() for c in "ab"}
    stores_dir = base / "stores"
    stores_dir.mkdir()
    dbs = {c: stores_dir / f"{c}.duckdb" for c in "ab"}
    try:
        for c, server in servers.items():
            asyncio.run(_fill(server.url, c))
        collectors = [collect(servers[c], c, dbs[c]) for c in "ab"]
        try:
            for c in "ab":
                wait_until(lambda c=c: _sampled(dbs[c]), timeout=60, message=f"cluster {c}'s store filled")
        finally:
            for proc in collectors:
                proc.send_signal(signal.SIGTERM)
                proc.wait(30)
        yield {"servers": servers, "dbs": dbs, "dir": stores_dir, "base": base}
    finally:
        for server in servers.values():
            server.stop()


@pytest.fixture
def dash(monkeypatch):
    for k in list(os.environ):
        if k.startswith("JETWATCH_"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("JETWATCH_STALE_AFTER", "1h")
    st.cache_data.clear()
    yield monkeypatch
    st.cache_data.clear()




def _direct(fleet) -> set[tuple[str, str, str]]:
    """(cluster, stream, consumer) read straight from each file, its cluster from the file itself."""
    out = set()
    for db in fleet["dbs"].values():
        store = Store(db)
        cluster = rows(store, "SELECT value FROM store_meta WHERE key = 'cluster'")[0][0]
        out |= {(cluster, s, c) for s, c in rows(store, "SELECT stream, consumer FROM consumer_latest")}
    return out


def _shown(table: pd.DataFrame) -> set[tuple[str, str, str]]:
    return {(cl, s, link_target(u)["consumer"]) for cl, s, u in zip(table["Cluster"], table["Stream"], table["Consumer"])}


def test_each_store_records_its_cluster(fleet):
    assert {c: identity(Store(db)).cluster for c, db in fleet["dbs"].items()} == {"a": "a", "b": "b"}
    ident = identity(Store(fleet["dbs"]["b"]))
    assert ident.claimed and ident.server_url == fleet["servers"]["b"].url


def test_the_fleet_shows_both_clusters_consumers_and_filters_by_cluster(fleet, dash):
    dash.setenv("JETWATCH_DBS", str(fleet["dir"]))  # a directory of stores
    at = run_app()
    table = frame(at, "Cluster")
    assert _shown(table) == _direct(fleet)
    # the same consumer name in both clusters stays two rows, each linking to its own cluster
    same = table[[link_target(u)["consumer"] == SHARED for u in table["Consumer"]]]
    assert sorted(same["Cluster"]) == ["a", "b"]
    assert sorted(link_target(u)["cluster"] for u in same["Consumer"]) == ["a", "b"]

    at.multiselect(key="fleet_cluster").set_value(["b"]).run()
    filtered = frame(at, "Consumer")
    assert _shown(filtered.assign(Cluster="b")) == {k for k in _direct(fleet) if k[0] == "b"}
    assert "Cluster" not in filtered.columns or set(filtered["Cluster"]) == {"b"}
    assert any("of 4 consumers shown" in c.value and c.value.startswith("2 ") for c in at.caption)


def test_one_store_reads_as_before_clusters(fleet, dash):
    dash.setenv("JETWATCH_DB", str(fleet["dbs"]["a"]))
    at = run_app()
    table = frame(at, "Consumer")
    assert "Cluster" not in table.columns
    assert not [m for m in at.multiselect if m.key == "fleet_cluster"]
    assert {link_target(u)["consumer"] for u in table["Consumer"]} == {SHARED, ONLY["a"]}


def test_the_consumer_page_reads_the_store_its_link_names(fleet, dash):
    dash.setenv("JETWATCH_DBS", f"{fleet['dbs']['a']},{fleet['dbs']['b']}")
    at = run_app("views/consumer.py", cluster="b", stream=STREAM, consumer=ONLY["b"])
    assert at.selectbox(key="consumer_cluster").value == "b"
    assert at.selectbox(key="consumer_pick").value[1:] == (STREAM, ONLY["b"])
    # the picker offers cluster b's consumers only: a's own consumer is not among them
    assert {o for o in at.selectbox(key="consumer_pick").options if ONLY["a"] in o} == set()


def _dashboard_on_copies(fleet, dash, tmp_path) -> dict[str, Path]:
    """The dashboard over copies of both clusters' stores (a test's actions write to its own),
    with operator "ana" able to act."""
    dbs = {c: tmp_path / f"{c}.duckdb" for c in "ab"}
    for c, db in dbs.items():
        shutil.copy(fleet["dbs"][c], db)
    dash.setenv("JETWATCH_DBS", f"{dbs['a']},{dbs['b']}")
    dash.setenv("JETWATCH_OPERATORS_FILE", operators_file(tmp_path, "ana"))
    dash.setenv("JETWATCH_DATA_DIR", str(tmp_path))
    return dbs


def test_a_pause_on_cluster_bs_consumer_reaches_server_b_and_not_a(fleet, dash, tmp_path):
    """The dashboard is given no server at all: the action goes where cluster b's collector said
    it sampled, and its audit rows go into b's store."""
    dbs = _dashboard_on_copies(fleet, dash, tmp_path)
    urls = {c: s.url for c, s in fleet["servers"].items()}
    assert not asyncio.run(_paused(urls["a"], SHARED)) and not asyncio.run(_paused(urls["b"], SHARED))
    at = run_app("views/consumer.py", cluster="b", stream=STREAM, consumer=SHARED)
    at.text_input(key="op_name").input("ana")
    at.text_input(key="op_secret").input(OPERATOR_PASSWORD)
    at.button(key="op_enable").click().run()
    at.button(key="action_pause").click().run()
    shown = [c.value.replace("\\", "") for c in at.caption]  # the caption escapes Markdown
    assert any("cluster b" in c and urls["b"].split("//")[1] in c for c in shown), shown
    at.button(key="action_confirm").click().run()
    assert not at.exception
    assert at.session_state["action_result"].ok, at.session_state["action_result"].message
    try:
        assert asyncio.run(_paused(urls["b"], SHARED))
        assert not asyncio.run(_paused(urls["a"], SHARED))
        audited = "SELECT action, stream, consumer, outcome FROM audit WHERE phase = 'outcome'"
        assert rows(Store(dbs["b"]), audited) == [("pause", STREAM, SHARED, "ok")]
        assert rows(Store(dbs["a"]), "SELECT * FROM audit") == []
        actions, _ = stores.audit_actions(stores.identify(Settings({"dbs": (str(dbs["a"]), str(dbs["b"]))})))
        assert list(zip(actions["cluster"], actions["action"])) == [("b", "pause")]
        assert "pause" in " ".join(frame(run_app("views/audit.py"), "Summary")["Summary"])
    finally:
        async def resume() -> None:
            nc = await nats.connect(urls["b"])
            await JetStreamAPI(nc).pause(STREAM, SHARED, None)
            await nc.close()
        asyncio.run(resume())


def test_a_result_banner_shows_on_its_own_clusters_consumer_only(fleet, dash, tmp_path):
    """A real pause of cluster a's consumer `work`: its banner is on a's page of `work`, not on
    b's consumer of the same name, and the Fleet names its cluster. (A pause: Resume is offered
    only on a paused consumer.)"""
    dbs = _dashboard_on_copies(fleet, dash, tmp_path)
    at = run_app("views/consumer.py", cluster="a", stream=STREAM, consumer=SHARED)
    at.text_input(key="op_name").input("ana")
    at.text_input(key="op_secret").input(OPERATOR_PASSWORD)
    at.button(key="op_enable").click().run()
    at.button(key="action_pause").click().run()
    at.button(key="action_confirm").click().run()
    assert not at.exception
    assert at.session_state["action_result"].ok, at.session_state["action_result"].message
    try:
        _banner_follows_its_cluster(at, dbs)
    finally:
        async def resume() -> None:
            nc = await nats.connect(fleet["servers"]["a"].url)
            await JetStreamAPI(nc).pause(STREAM, SHARED, None)
            await nc.close()
        asyncio.run(resume())


def _banner_follows_its_cluster(at, dbs) -> None:
    assert rows(Store(dbs["a"]), "SELECT action, outcome FROM audit WHERE phase = 'outcome'") == [("pause", "ok")]

    def banners() -> list[str]:
        return [str(a.value).replace("\\", "") for a in list(at.success) + list(at.error)
                if str(a.value).startswith("pause ")]

    assert [b.split(":")[0] for b in banners()] == [f"pause {STREAM} / {SHARED} (account $G)"]
    at.selectbox(key="consumer_cluster").set_value("b").run()
    assert not at.exception
    assert at.selectbox(key="consumer_pick").value[1:] == (STREAM, SHARED)  # b's consumer of the same name
    assert banners() == []
    at.selectbox(key="consumer_cluster").set_value("a").run()
    assert len(banners()) == 1
    at.switch_page("views/fleet.py").run()
    assert [b.split(":")[0] for b in banners()] == [f"pause {STREAM} / {SHARED} (cluster a, account $G)"]


def test_server_for_overrides_where_a_clusters_actions_go():
    cs = stores.ClusterStore("b", "/x/b.duckdb", "nats://reported:4222")
    assert stores.server_for(Settings({"server": "nats://own:4222"}), cs) == "nats://reported:4222"
    mapped = Settings({"server_for": ("b=nats://mapped:4222",)})
    assert stores.server_for(mapped, cs) == "nats://mapped:4222"
    acting = stores.acting(mapped, cs, several=True)
    assert (acting.server, acting.db, acting.cluster) == ("nats://mapped:4222", "/x/b.duckdb", "b")
    assert stores.server_for(Settings({"server": "nats://own:4222"}),
                             stores.ClusterStore("c", "/x/c.duckdb", None)) == "nats://own:4222"


def test_a_collector_refuses_a_store_of_another_cluster(fleet):
    db = fleet["dbs"]["a"]
    before = rows(Store(db), "SELECT count(*), max(ts) FROM samples")
    done = subprocess.run([sys.executable, "-m", "jetwatch.cli", "collect", "--server", fleet["servers"]["b"].url,
                           "--db", str(db), "--cluster", "b"], capture_output=True, text=True, env=clean_env(),
                          timeout=60)
    assert done.returncode != 0
    assert "belongs to cluster 'a'" in done.stderr and "--cluster a" in done.stderr and "Traceback" not in done.stderr
    assert rows(Store(db), "SELECT count(*), max(ts) FROM samples") == before
    assert identity(Store(db)).cluster == "a"


def test_two_stores_of_one_cluster_are_refused_in_words(fleet, tmp_path):
    for name in ("one", "two"):
        shutil.copy(fleet["dbs"]["a"], tmp_path / f"{name}.duckdb")
    with pytest.raises(stores.DuplicateCluster, match="both belong to cluster 'a'"):
        stores.identify(Settings({"dbs": (str(tmp_path),)}))


@pytest.mark.spark
@pytest.mark.timeout(900)  # a Spark run (its own limit is 600 s): minutes on a loaded 2-core machine, as in test_pipeline_e2e
def test_one_pipeline_run_over_both_stores_gives_each_cluster_its_own_results(fleet, tmp_path):
    dbs = {c: tmp_path / f"{c}.duckdb" for c in "ab"}
    for c, db in dbs.items():
        shutil.copy(fleet["dbs"][c], db)
    data = tmp_path / "data"
    done = subprocess.run([sys.executable, "-m", "jetwatch.cli", "pipeline", "run", "--dbs", f"{dbs['a']},{dbs['b']}",
                           "--data-dir", str(data), "--since", "2h", "--health-min-span", "1s", "--master", "local[1]",
                           "--spark-nice", "0"],
                          capture_output=True, text=True, env=clean_env(), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    archive = data / "pipeline" / "archive" / "samples"
    assert {p.name for p in archive.glob("date=*/hour=*/cluster=*")} == {"cluster=a", "cluster=b"}
    for c, db in dbs.items():
        store = Store(db)
        sampled = {r[0] for r in rows(store, "SELECT DISTINCT consumer FROM samples")}
        assert {r[0] for r in rows(store, "SELECT DISTINCT consumer FROM rollups WHERE granularity = '1m'")} == sampled
        assert {r[0] for r in rows(store, "SELECT DISTINCT consumer FROM verdict_history")} == sampled
        assert sampled == {SHARED, ONLY[c]}
        assert rows(store, "SELECT outcome FROM pipeline_runs") == [("ok",)]
    # each cluster's rollups are its own samples' (the shared name is not summed over clusters)
    for db in dbs.values():
        [(rolled, raw)] = rows(Store(db), "SELECT (SELECT sum(samples) FROM rollups WHERE granularity = '1m' "
                                          "AND consumer = ?), (SELECT count(*) FROM samples WHERE consumer = ?)",
                               [SHARED, SHARED])
        assert rolled == raw


def test_the_pins_and_audit_pages_open_over_every_cluster(fleet, dash):
    dash.setenv("JETWATCH_DBS", str(fleet["dir"]))
    for page in ("views/pins.py", "views/audit.py"):
        at = run_app(page)
        assert not at.exception


def test_metrics_series_carry_the_collectors_cluster(fleet, tmp_path):
    """/metrics of cluster b's collector: every consumer series says cluster b (the label the
    fleet's dashboards and alerts group by), whatever the server calls its own cluster."""
    from tests.helpers import collecting, collector_settings, eventually
    from tests.test_metrics import scrape

    settings = collector_settings(fleet["servers"]["b"].url, str(tmp_path / "b.duckdb"), (STREAM,), cluster="b",
                                  metrics_address=f"127.0.0.1:{free_port()}", metrics_cardinality="all")

    async def main() -> None:
        async with collecting(settings) as collector:
            got = await eventually(lambda: (lambda m: m if m.get("jetwatch_consumer_pending_messages") else None)(
                scrape(collector.metrics_bound)), message="consumer series on /metrics")
            series = got["jetwatch_consumer_pending_messages"]
            assert {(s.labels["cluster"], s.labels["consumer"]) for s in series} == {("b", SHARED), ("b", ONLY["b"])}
            # its freshness too: the collector alert names the cluster whose data went stale
            assert [s.labels for s in got["jetwatch_collector_last_cycle_timestamp_seconds"]] == [{"cluster": "b"}]

    asyncio.run(main())
