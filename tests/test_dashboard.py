"""The dashboard's pages under Streamlit's AppTest, on a store the real collector filled."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pandas as pd
from streamlit.testing.v1 import AppTest

from jetwatch.collectors.judging import judge_cycle
from jetwatch.dashboard.tables import link_target
from jetwatch.health.rules import Thresholds
from jetwatch.store import writes
from jetwatch.store.database import Store
from tests.conftest import CONSUMER, IDLE_STREAM, STREAM

APP = str(Path(__file__).resolve().parents[1] / "dashboard" / "app.py")


def run_app(page: str | None = None, **query: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    if page:
        at.switch_page(page).run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def frame(at: AppTest, column: str, index: int = 0) -> pd.DataFrame:
    """The index-th table on the page that has `column` (AppTest finds tables by content, not key)."""
    found = []
    for element in at.dataframe:
        value = element.value
        value = value.data if hasattr(value, "data") else value  # a pandas Styler
        if column in value.columns:
            found.append(value)
    assert len(found) > index, f"no table with column {column!r}"
    return found[index]


def consumers(table: pd.DataFrame) -> pd.Series:
    """The consumer names of a table whose Consumer column links to each consumer's page."""
    return pd.Series([link_target(u)["consumer"] for u in table["Consumer"]], index=table.index, dtype=object)


def texts(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption] + [w.value for w in at.warning]
    parts += [i.value for i in at.info] + [h.value for h in at.subheader] + [t.value for t in at.title]
    return "\n".join(str(p) for p in parts)


def test_fleet_lists_every_consumer_worst_first_with_verdict_and_reason(filled_db, app_env):
    app_env(filled_db)
    at = run_app()
    table = frame(at, "Verdict")
    assert set(consumers(table)) == {CONSUMER, "idle"}
    assert list(table["Verdict"])[0] == "NO_PULLERS"
    idle = table[consumers(table) == "idle"].iloc[0]
    assert idle["Why"].startswith("5 messages pending, nothing in flight and no client has pulled since")
    assert idle["Stream"] == IDLE_STREAM
    assert "Data as of" in texts(at)
    assert "NO_PULLERS" in texts(at)


def test_fleet_says_how_old_the_oldest_work_is_and_when_it_drains_in_words(filled_db, app_env):
    """`idle` holds five messages nobody pulled: its oldest unacked age is the one the collector
    stored (read from the stream), said as the Consumer page says it ("15 min 10 s", never a bare
    "910"), and its ETA says in words why there is none ("no pullers", never "Infinity")."""
    from jetwatch.dashboard.text import duration

    app_env(filled_db)
    at = run_app()
    table = frame(at, "Oldest unacked")
    idle = table[consumers(table) == "idle"].iloc[0]
    stored = Store(filled_db).read(lambda con: con.execute(
        "SELECT oldest_unacked_age_seconds, oldest_unacked_age_kind FROM consumer_latest WHERE consumer = 'idle'"
    ).fetchone())
    assert stored[0] > 0 and idle["Oldest unacked"] == duration(stored[0])
    assert idle["Age is"] == stored[1] == "exact"
    assert idle["Drain ETA"] == "no pullers"
    assert not [h for h in table.columns if "(s)" in h]  # no column of bare seconds
    assert not [v for v in table.to_numpy().ravel() if str(v).lower() in ("inf", "infinity")]


def test_fleet_selection_is_ticked_in_every_new_table_and_its_panel_reads_the_same_row(filled_db, app_env):
    """The table widget is new whenever its rows or their order change (a refresh that re-sorted
    them): it is drawn with the chosen consumer's row ticked, and the panel below says the row's
    verdict and reason from the same read."""
    import json

    from jetwatch.dashboard import selection

    app_env(filled_db)
    at = run_app()
    from jetwatch.core.settings import Settings
    from jetwatch.dashboard import stores

    table = frame(at, "Verdict")
    row = int((consumers(table) == "idle").to_numpy().nonzero()[0][0])
    (cluster,) = [cs.cluster for cs in stores.identify(Settings({"db": filled_db, "dbs": ()}))]
    at.session_state[selection.SELECTED] = ("$G", IDLE_STREAM, "idle", cluster)
    at.run()
    grid = next(d for d in at.dataframe if "Verdict" in getattr(d.value, "data", d.value).columns)
    assert json.loads(grid.proto.selection_default or "{}").get("selection", {}).get("rows") == [row]
    table = frame(at, "Verdict")
    assert table[" "].tolist()[row] == "▶"
    panel = "\n".join(m.value for m in at.markdown)
    assert f"**{IDLE_STREAM.replace('_', chr(92) + '_')} / idle**" in panel and "Next step:" in panel


def test_fleet_filters_by_verdict_and_search(filled_db, app_env):
    app_env(filled_db)
    at = run_app()
    at.multiselect(key="fleet_verdict").set_value(["NO_PULLERS"]).run()
    table = frame(at, "Verdict")
    assert list(consumers(table)) == ["idle"]
    at.multiselect(key="fleet_verdict").set_value([]).run()
    at.text_input(key="fleet_search").input("<i_").run()
    table = frame(at, "Verdict")
    assert list(consumers(table)) == [CONSUMER]


def test_fleet_warns_when_the_collector_data_is_stale(filled_db, app_env):
    app_env(filled_db, stale_after="1ms")
    at = run_app()
    assert any("Data is stale" in w.value for w in at.warning)


def test_consumer_deep_link_opens_its_page_with_pin_history(filled_db, app_env):
    app_env(filled_db)
    at = run_app("views/consumer.py", stream=STREAM, consumer=CONSUMER)
    assert at.selectbox(key="consumer_pick").value[1:] == (STREAM, CONSUMER)
    shown = texts(at)
    assert "H\\<b\\&x\\_weird\\-name\\_1 / \\<i\\_c\\-1" in shown  # literal text, never markup
    advisories = frame(at, "Advisory")
    assert {"consumer_group_pinned", "consumer_group_unpinned"} <= set(advisories["Advisory"])
    assert set(advisories["Reason"]) - {""} == {"timeout", "admin"}
    config = frame(at, "Ack wait")
    assert config["Priority policy"].iloc[0] == "pinned_client" and config["Priority groups"].iloc[0] == "jobs"


def test_a_consumer_without_a_pin_group_shows_its_policy_not_a_pin_holder_of_nobody(filled_db, app_env):
    """A pin holder of "nobody" reads as a group that lost its holder: only a pinned_client group
    has the tile; any other consumer says its priority policy there."""
    app_env(filled_db)
    labels = lambda at: {m.label: m.value for m in at.metric}  # noqa: E731
    plain = labels(run_app("views/consumer.py", stream=IDLE_STREAM, consumer="idle"))
    assert "Pin holder" not in plain and plain["Priority policy"] == "none", plain
    pinned = labels(run_app("views/consumer.py", stream=STREAM, consumer=CONSUMER))
    assert "Pin holder" in pinned and "Priority policy" not in pinned, pinned


def test_pins_page_shows_each_switch_with_its_reason(filled_db, app_env):
    app_env(filled_db)
    at = run_app("views/pins.py")
    events = frame(at, "Event")
    mine = events[consumers(events) == CONSUMER]
    assert list(mine["Event"])[::-1] == ["pinned", "unpinned", "pinned", "unpinned", "pinned"]  # newest first
    assert set(mine["Reason"]) - {""} == {"timeout", "admin"}
    summary = frame(at, "Switches per hour")
    row = summary[consumers(summary) == CONSUMER].iloc[0]
    assert row["Switches"] == 3
    sessions = frame(at, "End reason")
    assert list(sessions[consumers(sessions) == CONSUMER]["End reason"])[::-1] == ["timeout", "admin", ""]
    at.multiselect(key="pins_reason").set_value(["admin"]).run()
    assert set(consumers(frame(at, "Event"))) == {CONSUMER}


def test_every_page_is_sensible_with_no_store(tmp_path, app_env):
    app_env(str(tmp_path / "absent.duckdb"))
    at = run_app()
    assert "No store yet" in texts(at)
    for page in ("views/consumer.py", "views/pins.py", "views/audit.py"):
        at.switch_page(page).run()
        assert not at.exception, (page, [e.message for e in at.exception])


def test_every_page_is_sensible_with_an_empty_store(tmp_path, app_env):
    db = str(tmp_path / "empty.duckdb")
    Store(db).migrate()
    app_env(db)
    at = run_app()
    assert "No consumers yet" in texts(at)
    for page in ("views/consumer.py", "views/pins.py", "views/audit.py"):
        at.switch_page(page).run()
        assert not at.exception, (page, [e.message for e in at.exception])


def _synthetic_fleet(db: str, consumers: int, cycles: int) -> None:
    now = dt.datetime.now(dt.UTC)
    for cycle in range(cycles):
        ts = (now - dt.timedelta(seconds=10 * (cycles - cycle))).isoformat()
        n = consumers
        samples = {
            "ts": [ts] * n, "server": ["s"] * n, "cluster": [None] * n, "domain": [None] * n,
            "account": ["$G"] * n, "stream": [f"S{i // 100}" for i in range(n)],
            "consumer": [f"c{i}" for i in range(n)], "created": [None] * n,
            "num_pending": [(i % 7) * cycle for i in range(n)], "num_ack_pending": [i % 3 for i in range(n)],
            "num_waiting": [1] * n, "num_redelivered": [0] * n,
            "delivered_consumer_seq": [cycle * 10] * n, "delivered_stream_seq": [cycle * 10] * n,
            "delivered_last_active": [None] * n, "ack_floor_consumer_seq": [cycle * 10] * n,
            "ack_floor_stream_seq": [cycle * 10] * n, "ack_floor_last_active": [None] * n,
            "paused": [False] * n, "pause_until": [None] * n, "pin_group": [None] * n,
            "pinned_id": [None] * n, "pinned_ts": [None] * n, "leader": [None] * n,
        }
        at = dt.datetime.fromisoformat(ts)

        def cycle_tx(con, samples=samples, at=at) -> None:  # as the collector's cycle: write, then judge
            writes.write_samples(con, ["$G"], samples)
            judge_cycle(con, at, Thresholds(health_min_span=0.5))

        Store(db).write(cycle_tx)


def test_fleet_with_ten_thousand_consumers_renders(tmp_path, app_env):
    db = str(tmp_path / "big.duckdb")
    _synthetic_fleet(db, 10_000, 8)
    app_env(db)
    at = run_app()
    table = frame(at, "Verdict")
    assert len(table) == 100  # one page; the badges and the caption count the whole fleet
    assert "10,000 in all" in "\n".join(c.value for c in at.caption)
    badges = next(m.value for m in at.markdown if "-badge[" in m.value)
    assert "LAGGING]" in badges and set(table["Verdict"]) <= {"OK", "LAGGING", "COLLECTING"}
    at.multiselect(key="fleet_verdict").set_value(["LAGGING"]).run()
    assert set(frame(at, "Verdict")["Verdict"]) == {"LAGGING"}


def test_audit_page_lists_actions(tmp_path, app_env):
    import datetime as dt

    from jetwatch.store import audit

    db = str(tmp_path / "audit.duckdb")
    audit.write(Store(db), audit.AuditRow(dt.datetime.now(dt.UTC), "ana", "cli", "unpin", "$G", "S", "C",
                                          "jobs", "{}", "ok", "{}", "a1", "outcome"))
    app_env(db)
    at = run_app("views/audit.py")
    log = frame(at, "Actor")
    assert list(log["Actor"]) == ["ana"]
    assert list(log["Summary"]) == ["ana unpinned S / C: ok"]


def test_a_store_held_too_long_is_an_error_in_words_not_a_traceback(filled_db, app_env, tmp_path):
    import subprocess
    import sys

    db = str(tmp_path / "held.duckdb")
    Store(db).migrate()
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys; c = duckdb.connect(sys.argv[1]); "
                               "print('held', flush=True); sys.stdin.readline()", db],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        app_env(db, lock_timeout="0.3s")
        for page in (None, "views/consumer.py", "views/pins.py", "views/audit.py"):
            at = run_app(page)
            assert any("stayed locked by another process" in e.value for e in at.error), page
    finally:
        holder.stdin.write("\n")
        holder.stdin.close()
        holder.wait(10)


def test_fleet_shows_since_for_each_verdict_and_the_recent_changes(filled_db, app_env):
    app_env(filled_db)
    at = run_app()
    table = frame(at, "Verdict")
    idle = table[consumers(table) == "idle"].iloc[0]
    assert idle["Since (UTC)"].endswith("ago)")
    changes = frame(at, "To")
    mine = changes[consumers(changes) == "idle"]
    assert list(mine["To"])[:2] == ["NO_PULLERS", "COLLECTING"]  # newest first
    assert list(mine["From"])[-1] == "(new)"


def test_consumer_page_draws_its_verdict_history_as_a_band_over_the_charts(filled_db, app_env):
    import json

    app_env(filled_db)
    at = run_app("views/consumer.py", stream=IDLE_STREAM, consumer="idle")
    gauges = next(c for c in at.get("plotly_chart") if "consumer_gauges" in str(c.proto.id) or
                  "pending (not yet delivered)" in c.proto.spec)
    spec = json.loads(gauges.proto.spec)
    bands = [s for s in spec["layout"].get("shapes", []) if s.get("type") == "rect"]
    labels = [a["text"] for a in spec["layout"].get("annotations", [])]
    assert bands, "verdict spans drawn behind the charts"
    assert "NO_PULLERS" in labels and "COLLECTING" in labels
    assert "Behind the charts: the verdicts the collector judged" in texts(at)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Drain ETA"] == "no pullers"
    assert metrics["Oldest unacked"] != "none" and metrics["Oldest unacked"] == metrics["Oldest undelivered"]


def test_consumer_tiles_hold_a_short_value_and_say_the_rest_beside_it(filled_db, app_env):
    """A tile's value is cut with an ellipsis when it does not fit ("5 min 56 s (esti…"): each
    value is a number, a duration or a state in a few words, and qualifiers (estimate, range,
    the whole pin id) go to the label, the caption or the help."""
    app_env(filled_db)
    for stream, consumer in ((IDLE_STREAM, "idle"), (STREAM, CONSUMER)):
        at = run_app("views/consumer.py", stream=stream, consumer=consumer)
        values = {m.label: m.value for m in at.metric}
        assert values, "the consumer's tiles"
        for label, value in values.items():
            assert len(value) <= 12 and "(" not in value, (label, value)


def test_fleet_says_in_words_what_a_collector_that_never_finished_a_cycle_has_not_counted(nats_server, db_path,
                                                                                          app_env):
    """A collector whose monitoring port never answers writes its status (the error) with no cycle,
    so the counts it stores are NULL: the sidebar says they are unknown instead of failing."""
    import asyncio

    from jetwatch.core.embedded_server import free_port
    from tests.helpers import collector_settings, eventually, rows, running

    store = Store(db_path)
    nowhere = f"http://127.0.0.1:{free_port()}"  # nothing listens there

    async def collect() -> None:
        settings = collector_settings(nats_server.url, db_path, ("NONE",), monitor_url=(nowhere,),
                                      request_timeout=0.5)
        async with running(settings) as (collector, _):
            await eventually(lambda: store.exists() and rows(store, "SELECT last_error FROM collector_status "
                                                                    "WHERE last_error IS NOT NULL"),
                             message="a status row for the failed cycles")
            assert collector.cycles == 0

    asyncio.run(collect())
    assert rows(store, "SELECT last_cycle_at, cycle_seconds, streams, consumers FROM collector_status") == [
        (None, None, None, None)]
    app_env(db_path)
    at = run_app()
    sidebar = "\n".join(str(c.value) for c in at.sidebar.caption)
    assert "no cycle finished yet" in sidebar, sidebar
    assert "consumers and streams unknown" in sidebar, sidebar
    assert any("no JSZ report came back" in str(e.value) for e in at.sidebar.error)
