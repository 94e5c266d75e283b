"""The on-call pages answer what is wrong, where, since when and what to do, under
AppTest on stores written by the collector's own write and judge path."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from typing import Any

import pandas as pd

from jetwatch.collectors.judging import judge_cycle
from jetwatch.dashboard.operator import dismiss_key
from jetwatch.health.rules import Thresholds
from jetwatch.store import writes
from jetwatch.store.database import Store
from tests.conftest import IDLE_STREAM
from tests.test_dashboard import consumers, frame, run_app, texts

State = Callable[[int], dict[str, Any]]  # cycle number -> sample fields that differ from an idle consumer


def _sample(ts: str, account: str, stream: str, consumer: str, **fields: Any) -> dict[str, Any]:
    base = {"ts": ts, "server": "s", "cluster": None, "domain": None, "account": account, "stream": stream,
            "consumer": consumer, "created": None, "num_pending": 0, "num_ack_pending": 0, "num_waiting": 1,
            "num_redelivered": 0, "delivered_consumer_seq": 0, "delivered_stream_seq": 0,
            "delivered_last_active": None, "ack_floor_consumer_seq": 0, "ack_floor_stream_seq": 0,
            "ack_floor_last_active": None, "paused": False, "pause_until": None, "pin_group": None,
            "pinned_id": None, "pinned_ts": None, "leader": None}
    base.update(fields)
    return base


def write_store(db: str, consumers_: dict[tuple[str, str, str], State], cycles: int, step_s: float = 10.0,
                end: dt.datetime | None = None, policies: dict[tuple[str, str, str], str] | None = None) -> dt.datetime:
    """`cycles` collector cycles `step_s` apart ending at `end` (now), each written and judged as the
    collector does; returns the first cycle's time."""
    end = end or dt.datetime.now(dt.UTC)
    first = end - dt.timedelta(seconds=step_s * (cycles - 1))
    accounts = sorted({k[0] for k in consumers_})
    configs = [{"ts": first.isoformat(), "account": a, "stream": s, "consumer": c, "created": None,
                "config_hash": "h", "is_pull": True, "filtered": False, "ack_policy": "explicit", "max_waiting": 512,
                "max_ack_pending": 1000, "ack_wait_ns": 30 * 10**9, "max_deliver": -1,
                "priority_policy": (policies or {}).get((a, s, c)),
                "priority_groups": ["jobs"] if (policies or {}).get((a, s, c)) else None,
                "priority_timeout_ns": None, "config_json": "{}"} for a, s, c in consumers_]
    Store(db).write(lambda con: writes.write_configs(con, configs))
    for cycle in range(cycles):
        at = first + dt.timedelta(seconds=step_s * cycle)
        rows = [_sample(at.isoformat(), a, s, c, **state(cycle)) for (a, s, c), state in consumers_.items()]
        samples = {k: [r[k] for r in rows] for k in rows[0]}

        def tx(con, samples=samples, at=at) -> None:
            writes.write_samples(con, accounts, samples)
            judge_cycle(con, at, Thresholds(health_min_span=0.5, health_window=60))

        Store(db).write(tx)
    return first


def working(cycle: int) -> dict[str, Any]:
    return {"delivered_consumer_seq": 10 * cycle, "delivered_stream_seq": 10 * cycle,
            "ack_floor_consumer_seq": 10 * cycle, "ack_floor_stream_seq": 10 * cycle}


def nobody_pulls(cycle: int) -> dict[str, Any]:
    return {"num_pending": 5, "num_waiting": 0}


def fleet_badges(at) -> str:
    return next(m.value for m in at.markdown if "-badge[" in m.value or "no consumer matches" in m.value)


# -- Fleet: headers, counts under filters, cells, account column -------------------------------

def test_fleet_headers_are_words_with_units(filled_db, app_env):
    app_env(filled_db)
    table = frame(run_app(), "Verdict")
    assert {"Verdict", "Stream", "Consumer", "Since (UTC)", "Why", "Pending (msgs)", "In flight / max",
            "Pulls waiting / max", "Pin holder", "Pinned for"} <= set(table.columns)
    assert not [c for c in table.columns if "_" in c]
    # A figure averaged over the health window says so, beside reasons about the last seconds.
    assert {"Acks/s (last 5 min)", "Redeliveries/s (last 5 min)"} <= set(table.columns), list(table.columns)


def test_fleet_verdict_counts_follow_the_filters(filled_db, app_env):
    app_env(filled_db)
    at = run_app()
    everything = fleet_badges(at)
    assert everything.count("-badge[") == 2  # the idle consumer and the pinned one differ
    at.multiselect(key="fleet_verdict").set_value(["NO_PULLERS"]).run()
    assert fleet_badges(at) == ":red-badge[NO_PULLERS] 1"
    at.multiselect(key="fleet_verdict").set_value([]).run()
    at.text_input(key="fleet_search").input("no such consumer").run()
    assert "no consumer matches the filters" in fleet_badges(at)


def test_fleet_cells_never_read_none(filled_db, app_env):
    app_env(filled_db)
    table = frame(run_app(), "Verdict")
    for column in table.columns:
        for value in table[column]:
            assert value is not None and str(value) not in ("None", "nan", "NaT", "<NA>"), (column, value)


def test_fleet_consumer_name_links_to_its_page(filled_db, app_env):
    app_env(filled_db)
    at = run_app()
    table = frame(at, "Verdict")
    idle = table[consumers(table) == "idle"].iloc[0]
    assert idle["Consumer"].startswith("consumer?") and f"stream={IDLE_STREAM}" in idle["Consumer"]
    element = next(d for d in at.dataframe if d.key and d.key.startswith("fleet_table"))
    config = json.loads(element.proto.columns)
    assert config["Consumer"]["type_config"]["type"] == "link"
    assert all(config[c].get("pinned") for c in ("Verdict", "Stream", "Consumer"))


def test_fleet_shows_the_account_column_only_with_several_accounts(tmp_path, app_env):
    one, two = str(tmp_path / "one.duckdb"), str(tmp_path / "two.duckdb")
    write_store(one, {("A", "S", "c1"): working, ("A", "S", "c2"): working}, cycles=4)
    write_store(two, {("A", "S", "c1"): working, ("B", "S", "c1"): working}, cycles=4)
    app_env(one)
    assert "Account" not in frame(run_app(), "Verdict").columns
    app_env(two)
    table = frame(run_app(), "Verdict")
    assert sorted(table["Account"]) == ["A", "B"]


# -- Since when, and what to do --------------------------------------------------------------

def rows_of(db: str, text: str, params: list[Any]) -> list[tuple[Any, ...]]:
    from tests.helpers import rows
    return rows(Store(db), text, params)


def test_no_pullers_says_since_when_nobody_pulled_not_the_window_length(tmp_path, app_env):
    db = str(tmp_path / "quiet.duckdb")

    def stops_pulling(cycle: int) -> dict[str, Any]:
        return working(cycle) if cycle < 10 else {**working(9), "num_pending": 5, "num_waiting": 0}

    first = write_store(db, {("A", "ORDERS", "archive"): stops_pulling}, cycles=40)
    last_pull = first + dt.timedelta(seconds=90)  # cycle 9: its delivered sequence still moved
    app_env(db, health_window="60s")
    at = run_app()
    row = frame(at, "Verdict").iloc[0]
    assert row["Verdict"] == "NO_PULLERS"
    assert row["Why"].startswith(f"5 messages pending, nothing in flight and no client has pulled since "
                                 f"{last_pull:%H:%M:%S} UTC (")
    assert "60s" not in row["Why"] and "ago)" in row["Why"]
    since = pd.Timestamp(rows_of(db, "SELECT since FROM verdicts_current WHERE consumer = 'archive'", [])[0][0])
    assert since == pd.Timestamp(last_pull)  # the incident's start, not when it was named
    assert f"{since.tz_convert('UTC'):%H:%M:%S}" in row["Since (UTC)"] or f"{since:%m-%d %H:%M}" in row["Since (UTC)"]
    assert row["Next step"].startswith("5 messages wait, nothing is in flight and no client pulls: start the "
                                       "consumer's workers")

    at.switch_page("views/consumer.py").run()  # no deep link: the first consumer
    shown = texts(at).replace("\\", "")  # Markdown escapes
    assert f"since {since.tz_convert('UTC'):%Y-%m-%d %H:%M:%S} UTC (" in shown  # the verdict, absolute and an age
    assert f"no client has pulled since {last_pull:%H:%M:%S} UTC" in shown
    assert "Next step:" in shown and "Data as of" in shown


def _stalled_store(db: str) -> None:
    pin = "x3jkSMKG5bo5V7Sg9n1AbC"

    def stalled(cycle: int) -> dict[str, Any]:
        return {**working(3), "num_ack_pending": 20, "num_pending": 0, "pin_group": "jobs", "pinned_id": pin,
                "pinned_ts": (dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)).isoformat()}

    write_store(db, {("A", "ORDERS", "fulfilment"): stalled, ("A", "EVENTS", "notify"): lambda c: {
        **working(3), "num_ack_pending": 20, "num_pending": 0}}, cycles=12,
        policies={("A", "ORDERS", "fulfilment"): "pinned_client"})


def test_a_stalled_pinned_consumer_says_unpin_or_restart_and_shows_its_pin_tail(tmp_path, app_env):
    db = str(tmp_path / "stalled.duckdb")
    _stalled_store(db)
    app_env(db, health_window="60s")
    table = frame(run_app(), "Verdict")
    pinned = table[consumers(table) == "fulfilment"].iloc[0]
    assert pinned["Verdict"] == "STALLED"
    assert pinned["Next step"] == ("the pinned client holds 20 messages and acks none: unpin to hand the work to a "
                                   "waiting client (the messages are redelivered to it), then restart or inspect the "
                                   "stuck one")
    assert pinned["Pin holder"] == "unannounced …9n1AbC"  # no worker announced this pin
    plain = table[consumers(table) == "notify"].iloc[0]
    assert plain["Verdict"] == "STALLED" and plain["Next step"].startswith(
        "a client holds 20 messages and has done nothing with them past ack_wait")


def test_a_drain_that_cannot_finish_warns_first_and_hand_off_needs_a_pin(tmp_path, app_env):
    from tests.helpers import operators_file
    from tests.test_security_dashboard import login

    db = str(tmp_path / "stalled.duckdb")
    _stalled_store(db)
    app_env(db, health_window="60s", operators_file=operators_file(tmp_path, "ana"), server="nats://127.0.0.1:1")
    at = login(run_app("views/consumer.py", account="A", stream="ORDERS", consumer="fulfilment"))
    assert not at.exception, [e.message for e in at.exception]
    assert at.button(key="action_drain").disabled  # STALLED: in-flight work is not falling
    assert any("a drain waits for it and would time out" in w.value for w in at.warning)
    assert at.selectbox(key="drain_then").options[0] == "handoff"  # a pinned group: hand-off first
    at.checkbox(key="drain_anyway").check().run()
    assert not at.button(key="action_drain").disabled

    at.query_params["stream"], at.query_params["consumer"] = "EVENTS", "notify"
    at = login(run_app("views/consumer.py", account="A", stream="EVENTS", consumer="notify"))
    assert "handoff" not in at.selectbox(key="drain_then").options  # no priority group: nothing to hand off
    assert at.selectbox(key="drain_then").value == "resume"
    assert not [b for b in at.button if b.key == "action_unpin"]


# -- Result banners -------------------------------------------------------------------------

def test_a_result_banner_belongs_to_its_consumer_shows_the_drain_as_it_ended_and_can_be_dismissed(tmp_path, app_env):
    from jetwatch import sql
    from jetwatch.actions.operations import ActionResult, Target
    from jetwatch.core.settings import DEFAULT_CLUSTER

    db = str(tmp_path / "stalled.duckdb")
    _stalled_store(db)  # one store no collector claimed: the default cluster's
    started = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=6)
    Store(db).write(lambda con: con.execute(sql.query("upsert_drain"), [
        "d1", started, started + dt.timedelta(seconds=60), "ana", "A", "ORDERS", "fulfilment", "resume", "timed_out",
        20, 20, "timed out after 60s with 20 still in flight"]))
    results = {(DEFAULT_CLUSTER, "ORDERS", "fulfilment"): ActionResult("drain", Target("A", "ORDERS", "fulfilment"), True,
                                                      "drain d1 started; it runs on if this page closes", None,
                                                      {"drain_id": "d1"})}
    app_env(db, health_window="60s")

    at = AppTest_with(results, stream="EVENTS", consumer="notify")
    assert not [t for t in texts_of_alerts(at) if "drain" in t]  # never on another consumer's page

    at = AppTest_with(results, stream="ORDERS", consumer="fulfilment")
    [banner] = [t for t in texts_of_alerts(at) if "drain" in t]
    assert banner.startswith("drain ORDERS / fulfilment (account A): drain d1 started")
    assert banner.endswith("now timed out: timed out after 60s with 20 still in flight")  # its final state
    assert any(e.value.replace("\\", "").startswith("drain ORDERS / fulfilment") for e in at.error)  # red: it failed
    at.button(key=dismiss_key("drain", ("default", "ORDERS", "fulfilment"))).click().run()
    assert not [t for t in texts_of_alerts(at) if "drain" in t]


def test_a_finished_drains_banner_and_progress_go_once_it_has_ended_a_while_ago(tmp_path, app_env):
    """A drain that ended 30 minutes ago is history (the Audit page keeps it): its result banner
    and its progress box are gone, on the Consumer page and the Fleet. One that ended a minute ago
    still shows, naming its drain by a short id, not the 32-hex one."""
    from jetwatch import sql
    from jetwatch.actions.operations import ActionResult, Target
    from jetwatch.core.settings import DEFAULT_CLUSTER

    db = str(tmp_path / "stalled.duckdb")
    _stalled_store(db)
    now = dt.datetime.now(dt.UTC)
    old, recent = "0ld" + "0" * 29, "5e1f2a3b" + "c" * 24
    for drain_id, consumer, ended in ((old, "fulfilment", now - dt.timedelta(minutes=30)),
                                      (recent, "notify", now - dt.timedelta(minutes=1))):
        stream = "ORDERS" if consumer == "fulfilment" else "EVENTS"
        Store(db).write(lambda con, d=drain_id, c=consumer, e=ended, st_=stream: con.execute(sql.query("upsert_drain"), [
            d, e - dt.timedelta(seconds=20), e, "ana", "A", st_, c, "resume", "done", 3, 0, "drained: 0 in flight"]))
    results = {(DEFAULT_CLUSTER, "ORDERS", "fulfilment"): ActionResult(
        "drain", Target("A", "ORDERS", "fulfilment"), True, f"drain {old} started; it runs on if this page closes",
        None, {"drain_id": old})}
    app_env(db, health_window="60s")

    at = AppTest_with(results, stream="ORDERS", consumer="fulfilment")
    said = texts_of_alerts(at) + [w.value.replace("\\", "") for w in at.warning]
    assert not [t for t in said if "drain" in t], said
    assert "action_results" not in at.session_state or not at.session_state["action_results"]
    at.switch_page("views/fleet.py").run()
    assert not [t for t in texts_of_alerts(at) if "drain" in t]

    at = AppTest_with({}, stream="EVENTS", consumer="notify")
    [box] = [t for t in texts_of_alerts(at) if t.startswith("drain ")]
    assert box.startswith("drain 5e1f2a3b by ana") and recent not in box, box


def AppTest_with(results: dict[Any, Any], **query: str):
    from streamlit.testing.v1 import AppTest

    from tests.test_dashboard import APP
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state["action_results"] = dict(results)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    at.switch_page("views/consumer.py").run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def texts_of_alerts(at) -> list[str]:
    return [str(a.value).replace("\\", "") for a in list(at.success) + list(at.error)]


# -- Pins agrees with the Fleet ---------------------------------------------------------------

def test_pins_and_fleet_agree_on_flapping_on_the_same_store(nats_server, tmp_path, app_env, uid):
    """A real collector watches a real pin story (a timeout, an admin unpin: three pins) with a
    flapping limit of two switches; the Fleet's kept verdict and the Pins page must both say so."""
    import asyncio

    import nats

    from jetwatch.core.jsapi import JetStreamAPI
    from tests.helpers import collecting, collector_settings, eventually, rows
    from tests.scenario import pin_story

    db = str(tmp_path / "flap.duckdb")
    stream = f"{uid}_FLAP"
    store = Store(db)

    async def story() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        settings = collector_settings(nats_server.url, db, (stream,), interval=0.3, health_min_span=0.5,
                                      flapping_switches=2)
        async with collecting(settings):
            told = await pin_story(nc, api, stream, "worker", f"{uid}.flap")
            flapping = "SELECT count(*) FROM verdicts_current WHERE stream = ? AND verdict = 'FLAPPING'"
            await eventually(lambda: rows(store, flapping, [stream])[0][0] == 1, timeout=90,
                             message="the collector judged the consumer FLAPPING")
        # Only after the collector stopped: workers leaving would hold messages and end the pin.
        for w in told.workers:
            await w.stop()
        await nc.close()

    asyncio.run(story())
    app_env(db, flapping_switches="2")
    at = run_app()
    fleet = frame(at, "Verdict")
    mine = fleet[consumers(fleet) == "worker"].iloc[0]
    assert mine["Verdict"] == "FLAPPING"
    # Why its pins moved, counted: the story's stalled holder (priority_timeout) and admin unpin (requester
    # named by the server's API audit advisory).
    assert "1 priority_timeout" in mine["Next step"] and "1 operator unpin" in mine["Next step"], mine["Next step"]
    at.switch_page("views/pins.py").run()
    summary = frame(at, "Flapping now")
    assert summary[consumers(summary) == "worker"].iloc[0]["Flapping now"] == "FLAPPING"


# -- Pin timeline: operator actions from the audit log -----------------------------------------

def test_the_pin_timeline_overlays_each_operator_action_once_with_its_actor(filled_db, tmp_path, app_env):
    import shutil

    from jetwatch.actions.audit import begin, finish
    from jetwatch.actions.operations import ActionResult, Target
    from tests.conftest import CONSUMER, STREAM

    db = str(tmp_path / "acted.duckdb")
    shutil.copy(filled_db, db)
    store = Store(db)
    target = Target("$G", STREAM, CONSUMER, "jobs")
    action_id = begin(store, "unpin", target, "ana", "dashboard", {"group": "jobs"})
    finish(store, action_id, ActionResult("unpin", target, True, "unpinned", {}), "ana", "dashboard", {"group": "jobs"})
    app_env(db)
    at = run_app("views/pins.py")
    chart = next(c for c in at.get("plotly_chart") if "Pin timeline" in c.proto.spec)
    overlay = [t for t in json.loads(chart.proto.spec)["data"] if t.get("name") == "operator action"]
    assert [t["text"] for t in overlay] == [["unpin by ana"]]


# -- Audit -----------------------------------------------------------------------------------

def test_audit_is_one_line_per_action_with_the_pin_dropped_the_error_and_the_account(tmp_path, app_env):
    from jetwatch.actions.audit import begin, finish
    from jetwatch.actions.operations import ActionResult, Target

    db = str(tmp_path / "audit.duckdb")
    store = Store(db)
    store.migrate()
    pin = "x3jkSMKG5bo5V7Sg9n1AbC"
    unpin = begin(store, "unpin", Target("$G", "ORDERS", "fulfilment", "jobs"), "ana", "dashboard",
                  {"group": "jobs", "expect_pin": pin})
    finish(store, unpin, ActionResult("unpin", Target("$G", "ORDERS", "fulfilment", "jobs"), True,
                                      f"unpinned {pin}", {"success": True}, {"unpinned_id": pin}),
           "ana", "dashboard", {"group": "jobs", "expect_pin": pin})
    drain_params = {"then": "resume", "timeout_s": 60.0}
    drain = begin(store, "drain", Target(None, "ORDERS", "archive"), "bo", "cli", drain_params)  # no account given
    finish(store, drain, ActionResult(
        "drain", Target("$G", "ORDERS", "archive"), False,
        "timed out after 60s with 20 messages still in flight; the consumer was resumed",
        {"pause": {"paused": True}, "resume": {"paused": False}}, {"still_in_flight": 20}), "bo", "cli", drain_params)
    app_env(db)
    at = run_app("views/audit.py")
    log = frame(at, "Summary")
    assert len(log) == 2  # intent and outcome rows make one line each
    assert list(log["Summary"]) == [
        "bo tried to drain ORDERS / archive: error, timed out after 60s with 20 messages still in flight; the "
        "consumer was resumed",
        "ana unpinned ORDERS / fulfilment (pin held by unannounced …9n1AbC): ok"]  # no worker announced it
    assert list(log["Account"]) == ["$G", "$G"]  # the account the server reported, also for the drain
    assert "pin dropped …9n1AbC" in log["Parameters"].iloc[1]
    assert log["Error"].iloc[0].startswith("timed out after 60s")
    assert [link_of(u) for u in log["Consumer"]] == ["archive", "fulfilment"]
    at.multiselect(key="audit_outcome").set_value(["ok"]).run()
    assert list(frame(at, "Summary")["Actor"]) == ["ana"]
    at.multiselect(key="audit_outcome").set_value([]).run()
    at.text_input(key="audit_search").input("archive").run()
    assert list(frame(at, "Summary")["Actor"]) == ["bo"]
    raw = Store(db).read(lambda con: con.execute(
        "SELECT parameters::VARCHAR FROM audit WHERE action = 'unpin' AND phase = 'outcome'").fetchall())[0][0]
    assert json.loads(raw) == {"group": "jobs", "expect_pin": pin, "unpinned_id": pin}  # the pin it dropped


def test_audit_says_who_held_the_pin_an_unpin_dropped_or_a_drain_found(tmp_path, app_env):
    """An unpin of a pin whose worker announced itself names that worker as the Consumer page does;
    a drain that found a pin nobody announced says so with the id's tail; a pause names no pin."""
    from jetwatch.actions.audit import begin, finish
    from jetwatch.actions.operations import ActionResult, Target

    db = str(tmp_path / "audit.duckdb")
    store = Store(db)
    store.migrate()
    held, found = "x3jkSMKG5bo5V7Sg9n1AbC", "x3jkSMKG5bo5V7Sg9n1XyZ"
    store.write(lambda con: con.execute(
        "INSERT INTO pin_holders VALUES (to_json(['$G', 'ORDERS', 'fulfilment', ?::VARCHAR]), ?, '$G', 'ORDERS', "
        "'fulfilment', 'jobs', 'worker-a', 'host-1', 42, '1.2.3', 7, 'SRV', 'verified', NULL, now())", [held, held]))
    target = Target("$G", "ORDERS", "fulfilment", "jobs")
    unpin = begin(store, "unpin", target, "ana", "dashboard", {"group": "jobs", "expect_pin": held})
    finish(store, unpin, ActionResult("unpin", target, True, f"unpinned {held}", {"success": True},
                                      {"unpinned_id": held}), "ana", "dashboard", {"group": "jobs", "expect_pin": held})
    drain_params = {"then": "handoff", "timeout_s": 60.0}
    drain = begin(store, "drain", target, "bo", "cli", drain_params)
    finish(store, drain, ActionResult("drain", target, True, "drained", {}, {"pinned_before": found,
                                                                             "still_in_flight": 0}),
           "bo", "cli", drain_params)
    pause = begin(store, "pause", target, "cy", "cli", {"until": "2026-11-27T22:00:00Z"})
    finish(store, pause, ActionResult("pause", target, True, "paused", {}), "cy", "cli", {"until": "2026-11-27T22:00:00Z"})
    app_env(db)
    log = frame(run_app("views/audit.py"), "Summary")
    by_actor = log.set_index("Actor")
    assert by_actor.loc["ana", "Pin holder"] == "worker-a · verified"
    assert by_actor.loc["ana", "Summary"] == "ana unpinned ORDERS / fulfilment (pin held by worker-a · verified): ok"
    assert by_actor.loc["bo", "Pin holder"] == "unannounced …9n1XyZ"
    assert "(pin held by unannounced …9n1XyZ)" in by_actor.loc["bo", "Summary"]
    assert by_actor.loc["cy", "Pin holder"] == "" and "held by" not in by_actor.loc["cy", "Summary"]


def link_of(url: str) -> str:
    from jetwatch.dashboard.tables import link_target
    return link_target(url)["consumer"]


def test_every_table_on_every_page_has_headers_in_words(filled_db, app_env):
    from tests.conftest import CONSUMER, STREAM

    app_env(filled_db)
    at = run_app()
    seen = []
    for page, query in ((None, {}), ("views/consumer.py", {"stream": STREAM, "consumer": CONSUMER}),
                        ("views/pins.py", {}), ("views/audit.py", {})):
        for k, v in query.items():
            at.query_params[k] = v
        if page:
            at.switch_page(page).run()
        for element in at.dataframe:
            if element.key == "audit_raw":
                continue  # the chained rows as stored, in an expander
            value = element.value.data if hasattr(element.value, "data") else element.value
            seen.append(element.key)
            code = [c for c in value.columns if "_" in str(c) or str(c) in ("ts", "since", "verdict", "reason")]
            assert not code, (page, element.key, code)
    assert len(seen) >= 6
