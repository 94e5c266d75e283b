"""The Pins page between pipeline runs, under AppTest on stores written by the
collector's own write and judge path, with the pipeline's sessions loaded as its load leaves them:
pins ended since the pipeline ran are not "still pinned", the current holder's pin runs to now, the
median and p95 count the ongoing pin, and the Pins page says of flapping what the Fleet says, over
the span it names; the range's capture gaps and operator actions come with its pin history."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jetwatch.store.database import Store
from tests.test_dashboard import consumers, frame, run_app, texts
from tests.test_oncall_pages import working, write_store

POLICY = "pinned_client"


def _pins(db: str, rows: list[tuple[dt.datetime, str, str, str | None, str | None]]) -> None:
    """Pin advisories as the collector stores them: (ts, consumer, event, pin id, reason)."""
    values = [(f"adv-{i}", ts, ts, "consumer_group_pinned" if event == "pinned" else "consumer_group_unpinned",
               "test", "A", "S", consumer, "jobs", pin, reason) for i, (ts, consumer, event, pin, reason) in enumerate(rows)]
    Store(db).write(lambda con: con.executemany(
        "INSERT INTO advisories VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '{}')", values))


def _pipeline(db: str, until: dt.datetime, sessions: list[tuple[str, str, dt.datetime, dt.datetime, str, float | None]]) -> None:
    """The pipeline's pin sessions as its load leaves them after a run ending at `until`:
    (consumer, pin id, start, end, end reason, gap after); a pin open at `until` is 'still pinned' there."""
    def tx(con: Any) -> None:
        for consumer, pin, start, end, reason, gap in sessions:
            con.execute("INSERT INTO pin_sessions BY NAME SELECT 'A' AS account, 'S' AS stream, ? AS consumer, "
                        "'jobs' AS group_name, ? AS pinned_id, ? AS start_ts, ? AS end_ts, ? AS duration_seconds, "
                        "? AS end_reason, ? AS gap_seconds, false AS spans_gap",
                        [consumer, pin, start, end, (end - start).total_seconds(), reason, gap])
        con.execute("INSERT INTO pipeline_runs VALUES ('run-1', ?, ?, ?, ?, 'ok', 0, NULL)",
                    [until, until, until - dt.timedelta(days=1), until])
    Store(db).write(tx)


def _store(tmp_path, names: list[str], end: dt.datetime) -> str:
    db = str(tmp_path / "pins.duckdb")
    keys = {("A", "S", name): working for name in names}
    write_store(db, keys, cycles=4, end=end, policies={k: POLICY for k in keys})
    return db


def _sessions(at) -> pd.DataFrame:
    table = frame(at, "End reason")
    return table.assign(consumer=consumers(table))


def test_pins_ended_since_the_pipeline_ran_are_not_still_pinned_and_the_holder_runs_to_now(tmp_path, app_env):
    """The pipeline ran 30 minutes ago. Since then, c's pin ended on a timeout and a new pin holds;
    e's pin, the one it had then, still holds 45 minutes after it began; d pinned 35 minutes ago."""
    now = dt.datetime.now(dt.UTC)
    m = lambda minutes: now - dt.timedelta(minutes=minutes)  # noqa: E731
    db = _store(tmp_path, ["c", "d", "e"], now)
    _pins(db, [(m(50), "c", "pinned", "PIN-A", None), (m(45), "e", "pinned", "PIN-E", None),
               (m(35), "d", "pinned", "PIN-D", None), (m(20), "c", "unpinned", None, "timeout"),
               (m(19), "c", "pinned", "PIN-B", None)])
    _pipeline(db, m(30), [("c", "PIN-A", m(50), m(30), "still pinned", None),
                          ("e", "PIN-E", m(45), m(30), "still pinned", None),
                          ("d", "PIN-D", m(35), m(30), "still pinned", None)])
    app_env(db)
    sessions = _sessions(run_app("views/pins.py"))

    c = sessions[sessions["consumer"] == "c"]
    assert sorted(c["End reason"]) == ["", "timeout"], c
    assert list(c[c["End (UTC)"] == "still pinned"]["Pin id (tail)"]) == ["PIN-B"], "one holder: the newest"
    e = sessions[sessions["consumer"] == "e"].iloc[0]
    assert e["End (UTC)"] == "still pinned" and e["Duration"].startswith("45 min"), e  # to now, not to the run
    d = sessions[sessions["consumer"] == "d"].iloc[0]
    assert d["Duration"].startswith("35 min"), d


def _announced(db: str, pin: str, name: str, verification: str) -> None:
    """A pin's holder as the collector stores its worker's announcement."""
    Store(db).write(lambda con: con.execute(
        "INSERT INTO pin_holders VALUES (to_json(['A', 'S', 'c', ?::VARCHAR]), ?, 'A', 'S', 'c', 'jobs', ?, 'host-1', "
        "42, '1.2.3', 7, 'SRV', ?, NULL, now())", [pin, pin, name, verification]))


def test_the_pins_timeline_and_sessions_name_each_pins_holder_as_the_consumer_page_does(tmp_path, app_env):
    """Three pins of c: one held by a worker that announced itself (verified), one by a worker whose
    announcement could not be checked, one by nobody that announced: the sessions table says each
    holder in the Consumer page's words, the timeline labels each bar with the name (else the id's
    tail) and says the holder on hover."""
    now = dt.datetime.now(dt.UTC)
    m = lambda minutes: now - dt.timedelta(minutes=minutes)  # noqa: E731
    db = _store(tmp_path, ["c"], now)
    known, doubtful, silent = "x3jkSMKG5bo5V7Sg9n1AbC", "x3jkSMKG5bo5V7Sg9n1DeF", "x3jkSMKG5bo5V7Sg9n1GhI"
    _pins(db, [(m(30), "c", "pinned", known, None), (m(20), "c", "unpinned", None, "timeout"),
               (m(19), "c", "pinned", doubtful, None), (m(10), "c", "unpinned", None, "admin"),
               (m(9), "c", "pinned", silent, None)])
    _announced(db, known, "worker-a", "verified")
    _announced(db, doubtful, "worker-b", "unverified")
    app_env(db)
    at = run_app("views/pins.py")
    sessions = _sessions(at)
    holders = dict(zip(sessions["Pin id (tail)"], sessions["Pin holder"]))
    assert holders == {"…9n1AbC": "worker-a · verified", "…9n1DeF": "worker-b · unverified",
                       "…9n1GhI": "unannounced …9n1GhI"}, holders
    chart = next(c for c in at.get("plotly_chart") if "Pin timeline" in c.proto.spec)
    [bars] = [t for t in json.loads(chart.proto.spec)["data"] if t.get("type") == "bar"]
    by_pin = {d[0]: (text, d[3]) for text, d in zip(bars["text"], bars["customdata"])}
    assert by_pin == {known: ("worker-a", "worker-a · verified"), doubtful: ("worker-b", "worker-b · unverified"),
                      silent: ("…9n1GhI", "unannounced …9n1GhI")}, by_pin
    assert "held by %{customdata[3]}" in bars["hovertemplate"]


def test_median_and_p95_count_the_ongoing_pin_and_say_so(tmp_path, app_env):
    """Two one-minute pins, then a pin held for 40 minutes so far: the longest pin is the ongoing one."""
    now = dt.datetime.now(dt.UTC)
    m = lambda minutes: now - dt.timedelta(minutes=minutes)  # noqa: E731
    db = _store(tmp_path, ["c"], now)
    _pins(db, [(m(44), "c", "pinned", "PIN-1", None), (m(43), "c", "unpinned", None, "timeout"),
               (m(42), "c", "pinned", "PIN-2", None), (m(41), "c", "unpinned", None, "admin"),
               (m(40), "c", "pinned", "PIN-3", None)])
    app_env(db)
    at = run_app("views/pins.py")
    summary = frame(at, "Switches per hour")
    row = summary[consumers(summary) == "c"].iloc[0]
    assert row["Median pin"] == "1 min", row
    assert row["95th percentile pin"].startswith("3") and " min" in row["95th percentile pin"], row  # 0.95 of 1, 1, 40 min
    assert row["Ongoing pin"].startswith("40 min") and "so far" in row["Ongoing pin"], row
    sessions = _sessions(at)
    assert sessions[sessions["End (UTC)"] == "still pinned"]["Duration"].iloc[0].endswith("(ongoing)")


def test_the_pins_page_says_of_flapping_what_the_fleet_says_over_the_span_it_names(tmp_path, app_env):
    """`past` flapped 37 minutes ago (five pins within 40 s) and has been still since; `now` flaps
    now (six pins in the last 40 s). Over the health window (one minute here) the Fleet names `now`
    FLAPPING and not `past`: so does the Pins page, and both say over which span."""
    now = dt.datetime.now(dt.UTC)
    s = lambda seconds: now - dt.timedelta(seconds=seconds)  # noqa: E731
    db = str(tmp_path / "pins.duckdb")
    Store(db).migrate()
    _pins(db, [(s(37 * 60 - 10 * i), "past", "pinned", f"PAST-{i}", None) for i in range(5)]
          + [(s(40 - 7 * i), "now", "pinned", f"NOW-{i}", None) for i in range(6)])
    keys = {("A", "S", name): working for name in ("past", "now")}
    write_store(db, keys, cycles=4, end=now, policies={k: POLICY for k in keys})
    app_env(db, health_window="60s")

    fleet_at = run_app()
    fleet = frame(fleet_at, "Verdict")
    verdicts = dict(zip(consumers(fleet), fleet["Verdict"]))
    assert verdicts["now"] == "FLAPPING" and verdicts["past"] != "FLAPPING", verdicts
    assert "in the last 1 min" in texts(fleet_at) or any("in the last 1 min" in str(v) for v in fleet["Why"])

    at = run_app("views/pins.py")
    summary = frame(at, "Switches per hour")
    flapping = dict(zip(consumers(summary), summary["Flapping now"]))
    assert flapping == {"now": "FLAPPING", "past": ""}, flapping
    assert "in the last 1 min" in texts(at)


# -- The splice: the pipeline's sessions up to its run, then the live tail, equal one pass over every event --

T0 = dt.datetime(2026, 11, 22, 3, 0, tzinfo=dt.UTC)


@st.composite
def _history(draw, consumer: str) -> list[tuple[int, str, str, str | None, str | None, str]]:
    """A consumer's pin events as the store may hold them: ties, out of order, inferred events, unpins
    with no pin before them: (second, consumer, event, pin id, reason, source)."""
    events = []
    for _ in range(draw(st.integers(0, 10))):
        kind = draw(st.sampled_from(["pinned", "pinned", "unpinned"]))
        source = draw(st.sampled_from(["advisory", "advisory", "inferred"]))
        pin = draw(st.sampled_from(["a", "b", "c"])) if kind == "pinned" else None
        reason = draw(st.sampled_from(["admin", "timeout"])) if kind == "unpinned" and source == "advisory" else None
        events.append((draw(st.integers(0, 60)), consumer, kind, pin, reason, source))
    return events


def _write_events(db: str, events: list[tuple[int, str, str, str | None, str | None, str]]) -> None:
    advisories = [(f"a{i}", T0 + dt.timedelta(seconds=s), T0, "consumer_group_pinned" if kind == "pinned"
                   else "consumer_group_unpinned", "t", "A", "S", c, "jobs", pin, reason)
                  for i, (s, c, kind, pin, reason, source) in enumerate(events) if source == "advisory"]
    inferred = [(f"i{i}", T0 + dt.timedelta(seconds=s), T0, "A", "S", c, "jobs", kind, pin, None, "test")
                for i, (s, c, kind, pin, reason, source) in enumerate(events) if source == "inferred"]

    def tx(con: Any) -> None:
        if advisories:
            con.executemany("INSERT INTO advisories VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '{}')", advisories)
        if inferred:
            con.executemany("INSERT INTO inferred_pin_events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", inferred)
    Store(db).write(tx)


def _spliced_and_whole(db: str, events: list[tuple[int, str, str, str | None, str | None, str]], run: int,
                       since: int) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The Pins page's sessions over a range from `since` (the pipeline's run covering the pins up
    to `run`, as pipeline/job.py reads them, then the live tail), and those of one pass over every
    event up to now that end in the range."""
    from jetwatch.dashboard import data
    from jetwatch.health.rules import Thresholds
    from jetwatch.health.sessions import pin_sessions

    Store(db).migrate()
    _write_events(db, events)
    until = T0 + dt.timedelta(seconds=80)
    every = Store(db).query("export_pin_events")
    run_until = T0 + dt.timedelta(seconds=run)
    seen = every[pd.to_datetime(every["ts"], utc=True) <= pd.Timestamp(run_until)]
    piped = pin_sessions(seen, run_until).assign(spans_gap=False)  # as the Spark job makes them (test_pipeline.py)

    def load(con: Any) -> None:
        con.register("session_batch", piped)
        con.execute("INSERT INTO pin_sessions BY NAME SELECT * FROM session_batch")
        con.execute("INSERT INTO pipeline_runs VALUES ('r', ?, ?, ?, ?, 'ok', 0, NULL)", [until, until, T0, run_until])
    Store(db).write(load)

    start = T0 + dt.timedelta(seconds=since)
    got = data.pin_history(Store(db), start, until, Thresholds()).sessions
    whole = data.drawn_sessions(pin_sessions(every, until))
    expected = whole[pd.to_datetime(whole["end_ts"], utc=True) >= pd.Timestamp(start)]

    def tidy(frame: pd.DataFrame) -> list[tuple[Any, ...]]:
        return sorted((r.consumer, r.pinned_id, pd.Timestamp(r.start_ts), pd.Timestamp(r.end_ts), r.end_reason,
                       None if pd.isna(r.gap_seconds) else round(float(r.gap_seconds), 3))
                      for r in frame.itertuples())

    return tidy(got), tidy(expected)


@pytest.mark.heavy  # a store per example, minutes: `make test-heavy`
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(histories=st.tuples(*[_history(f"c{i}") for i in range(3)]), run=st.integers(0, 70), since=st.integers(0, 70))
def test_the_pipelines_sessions_then_the_live_tail_equal_one_pass_over_every_event(tmp_path_factory, histories, run,
                                                                                      since):
    """Whatever the pipeline's run covered and whatever the range, the Pins page's sessions are
    those of one pass over every event up to now."""
    db = str(tmp_path_factory.mktemp("splice") / "pins.duckdb")
    got, expected = _spliced_and_whole(db, [e for h in histories for e in h], run, since)
    assert got == expected


@pytest.mark.parametrize("events,run,since", [
    ([(10, "c0", "pinned", "a", None, "advisory"), (30, "c0", "unpinned", None, "timeout", "advisory")], 0, 30),
    ([(10, "c0", "pinned", "a", None, "advisory"), (30, "c0", "unpinned", None, "timeout", "advisory"),
      (40, "c0", "pinned", "b", None, "advisory")], 5, 30),
    ([(10, "c0", "pinned", "a", None, "advisory"), (30, "c0", "pinned", "b", None, "inferred")], 20, 30),
], ids=["unpinned at the range's start", "then pinned again", "an inferred pin at the range's start"])
def test_a_pin_that_ends_exactly_where_the_range_starts_is_in_the_range(tmp_path, events, run, since):
    """A range starting after the pipeline's run cuts the live tail there: a pin that ended at that
    very instant ends in the range, as one pass over every event says (it was left out)."""
    got, expected = _spliced_and_whole(str(tmp_path / "pins.duckdb"), events, run, since)
    assert got == expected and any(row[3] == T0 + dt.timedelta(seconds=since) for row in got), got


def test_the_pin_history_brings_the_ranges_capture_gaps_and_operator_actions_and_no_others(tmp_path):
    """The Pins page reads its gaps and its timeline's operator actions with the pin history, on one
    connection: those of the range, as written, and none from outside it."""
    from jetwatch import sql
    from jetwatch.dashboard import data
    from jetwatch.health.rules import Thresholds
    from jetwatch.store import audit

    until = dt.datetime(2026, 11, 22, 12, 0, tzinfo=dt.UTC)
    since = until - dt.timedelta(hours=1)
    db = _store(tmp_path, ["c0"], until)
    store = Store(db)
    gaps = [(since + dt.timedelta(minutes=10), "in range"), (since - dt.timedelta(hours=3), "before the range")]
    store.write(lambda con: [con.execute(sql.query("insert_capture_gap"), {
        "detected_at": at, "stream": "JW_ADVISORIES", "from_seq": 1, "to_seq": 9, "missed": 8, "from_ts": at,
        "to_ts": at + dt.timedelta(minutes=1), "reason": reason}) for at, reason in gaps])
    for i, at in enumerate((since + dt.timedelta(minutes=20), since - dt.timedelta(hours=2))):
        audit.write(store, audit.AuditRow(at, "ops", "dashboard", "unpin", "A", "S", "c0", "jobs", "{}", "ok", None,
                                          f"act-{i}", "outcome"))

    changes = [(since - dt.timedelta(hours=3), "OK", "PIN_IDLE"), (since - dt.timedelta(hours=2), "PIN_IDLE", "OK"),
               (since + dt.timedelta(minutes=5), "OK", "PIN_IDLE"), (since + dt.timedelta(minutes=9), "PIN_IDLE", "STALLED"),
               (since + dt.timedelta(minutes=50), "STALLED", "PIN_IDLE")]
    store.write(lambda con: con.executemany(
        "INSERT INTO verdict_changes VALUES (?, 'A', 'S', 'idle', ?, ?, 'words')", [list(c) for c in changes]))

    history = data.pin_history(store, since, until, Thresholds())
    assert list(history.gaps["reason"]) == ["in range"]
    assert list(history.actions["action_id"]) == ["act-0"] and list(history.actions["actor"]) == ["ops"]
    # PIN_IDLE from each change naming it to the change ending it, or to the range's end while it lasts.
    assert [(r.start_ts, r.end_ts, r.ongoing) for r in history.idle.itertuples() if r.consumer == "idle"] == [
        (since + dt.timedelta(minutes=5), since + dt.timedelta(minutes=9), False),
        (since + dt.timedelta(minutes=50), until, True)], history.idle

    missing = data.pin_history(Store(str(tmp_path / "none.duckdb")), since, until, Thresholds())
    assert missing.gaps.empty and list(missing.gaps.columns) == data.GAP_COLUMNS
    assert missing.actions.empty and list(missing.actions.columns) == data.ACTION_COLUMNS
    assert missing.idle.empty and list(missing.idle.columns) == data.IDLE_COLUMNS
