"""Chart builders and the pin sessions behind them, tested directly (AppTest cannot read plotly)."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest

from jetwatch.dashboard import charts
from jetwatch.dashboard.data import rates, sessions_from_events
from jetwatch.health.rules import Thresholds

T0 = pd.Timestamp("2026-11-22 03:00:00", tz="UTC")
KEY = {"account": "$G", "stream": "S", "consumer": "C", "group_name": "jobs"}


def ev(seconds: float, event: str, pinned_id: str | None = None, reason: str | None = None,
       source: str = "advisory", **key: str) -> dict:
    return {**KEY, **key, "ts": T0 + pd.Timedelta(seconds=seconds), "event": event, "pinned_id": pinned_id,
            "reason": reason, "source": source}


UNTIL = (T0 + pd.Timedelta(seconds=100)).to_pydatetime()

SESSION_CASES = [
    ("pin still open", [ev(0, "pinned", "a")], [("a", 0, 100, "still pinned", None)]),
    ("timeout then new pin", [ev(0, "pinned", "a"), ev(30, "unpinned", reason="timeout"), ev(40, "pinned", "b")],
     [("a", 0, 30, "timeout", 10.0), ("b", 40, 100, "still pinned", None)]),
    ("admin unpin", [ev(0, "pinned", "a"), ev(5, "unpinned", reason="admin")], [("a", 0, 5, "admin", None)]),
    ("inferred unpin (leader change)", [ev(0, "pinned", "a"), ev(20, "unpinned", source="inferred"),
                                        ev(20, "pinned", "b")],
     [("a", 0, 20, "inferred", 0.0), ("b", 20, 100, "still pinned", None)]),
    ("pin followed by pin with no unpin seen", [ev(0, "pinned", "a"), ev(50, "pinned", "b")],
     [("a", 0, 50, "inferred", 0.0), ("b", 50, 100, "still pinned", None)]),
    ("unpin whose pin predates collection", [ev(10, "unpinned", reason="timeout"), ev(12, "pinned", "b")],
     [(None, None, 10, "timeout", 2.0), ("b", 12, 100, "still pinned", None)]),
    ("consumer deleted and recreated", [ev(0, "pinned", "a"), ev(60, "deleted"), ev(70, "pinned", "z")],
     [("a", 0, 60, "consumer deleted", 10.0), ("z", 70, 100, "still pinned", None)]),
    ("out of order and duplicated events", [ev(30, "unpinned", reason="timeout"), ev(0, "pinned", "a"),
                                            ev(0, "pinned", "a")],
     [("a", 0, 30, "timeout", None)]),
]


@pytest.mark.parametrize("events,expected", [c[1:] for c in SESSION_CASES], ids=[c[0] for c in SESSION_CASES])
def test_sessions_from_events(events, expected):
    got = sessions_from_events(pd.DataFrame(events), UNTIL)
    rows = [(r.pinned_id, None if pd.isna(r.start_ts) else (r.start_ts - T0).total_seconds(),
             (r.end_ts - T0).total_seconds(), r.end_reason,
             None if pd.isna(r.gap_seconds) else r.gap_seconds) for r in got.itertuples()]
    assert rows == expected


def test_sessions_are_per_consumer():
    events = [ev(0, "pinned", "a"), ev(1, "pinned", "x", consumer="D"), ev(5, "unpinned", reason="admin")]
    got = sessions_from_events(pd.DataFrame(events), UNTIL).set_index("consumer")
    assert got.loc["C", "end_reason"] == "admin"
    assert got.loc["D", "end_reason"] == "still pinned"


def _history(store, events: list[dict], since: pd.Timestamp, until: pd.Timestamp, th: Thresholds | None = None,
             flapping: tuple[str, ...] = ()):
    """The Pins page's pin history of `events` (stored as the collector stores advisories), with the
    consumers in `flapping` judged FLAPPING by the collector."""
    from jetwatch.dashboard.data import pin_history

    rows = [(f"e{i}", e["ts"], e["ts"], "consumer_group_pinned" if e["event"] == "pinned" else "consumer_group_unpinned",
             "t", e["account"], e["stream"], e["consumer"], e["group_name"], e["pinned_id"], e["reason"])
            for i, e in enumerate(events)]
    verdicts = [(KEY["account"], KEY["stream"], c, "FLAPPING", "warning", "r", "[]", until, until) for c in flapping]

    def tx(con) -> None:
        con.executemany("INSERT INTO advisories VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '{}')", rows)
        if verdicts:
            con.executemany("INSERT INTO verdicts_current (account, stream, consumer, verdict, level, reason, findings, "
                            "since, judged_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", verdicts)
    store.write(tx)
    return pin_history(store, since.to_pydatetime(), until.to_pydatetime(), th or Thresholds())


def test_pin_summary_puts_the_fleets_flapping_consumers_first(store):
    events = [ev(i * 10, "pinned", f"p{i}") for i in range(6)] + [ev(0, "pinned", "q", consumer="D")]
    out = _history(store, events, T0, T0 + pd.Timedelta(hours=1), flapping=("C",)).summary
    assert list(out["consumer"]) == ["C", "D"]
    assert list(out["flapping"]) == [True, False]
    assert out.iloc[0]["median_pin_seconds"] == 10.0


@pytest.mark.parametrize("times, most", [
    ([0, 10, 20, 30, 40], 5),  # five pins within one 300 s window
    ([0, 100, 200, 310, 420, 530], 3),  # six pins in the range, never more than 3 in one window
    ([0, 400, 800, 810, 820, 830, 840], 5),  # a burst late in the range
])
def test_pins_count_the_most_switches_in_any_window_of_the_range_as_history_not_as_flapping(store, times, most):
    """The most switches in one health window of the range is history: whether a consumer flaps is
    the Fleet's verdict over the last window, not a count over any window of the range."""
    events = [ev(t, "pinned", f"p{i}") for i, t in enumerate(times)]
    out = _history(store, events, T0, T0 + pd.Timedelta(hours=6), Thresholds(health_window=300, flapping_switches=4)).summary
    assert out.iloc[0]["most_in_a_window"] == most
    assert not out.iloc[0]["flapping"]


def test_switches_per_hour_divide_by_the_time_with_data_not_the_whole_range(store):
    until = T0 + pd.Timedelta(hours=1)
    events = [ev(3000 + i * 60, "pinned", f"p{i}") for i in range(6)]  # the last 10 minutes only
    out = _history(store, events, T0 - pd.Timedelta(hours=23), until).summary
    assert out.iloc[0]["hours_with_data"] == pytest.approx(600 / 3600)
    assert out.iloc[0]["switches_per_hour"] == pytest.approx(36.0)


def test_rates_come_from_sequence_deltas_and_skip_a_reset():
    samples = pd.DataFrame({
        "ts": [T0 + pd.Timedelta(seconds=10 * i) for i in range(4)],
        "delivered_consumer_seq": [0, 100, 220, 5], "delivered_stream_seq": [0, 90, 200, 5],
        "ack_floor_consumer_seq": [0, 50, 150, 0]})
    out = rates(samples)
    assert out["delivered_per_second"].tolist()[:2] == [10.0, 12.0]
    assert out["redelivered_per_second"].tolist()[:2] == [1.0, 1.0]
    assert out["acked_per_second"].tolist()[:2] == [5.0, 10.0]
    assert pd.isna(out["delivered_per_second"].iloc[2])


def test_a_filtered_consumer_gets_no_redelivery_rate_from_sequences():
    samples = pd.DataFrame({
        "ts": [T0 + pd.Timedelta(seconds=10 * i) for i in range(3)],
        "delivered_consumer_seq": [0, 10, 20], "delivered_stream_seq": [0, 1000, 2000],
        "ack_floor_consumer_seq": [0, 10, 20]})
    out = rates(samples, filtered=True)
    assert out["delivered_per_second"].tolist() == [1.0, 1.0]
    assert out["redelivered_per_second"].isna().all()


def gauges(ack: list[int], max_ack: float, **extra: list[int]) -> object:
    samples = pd.DataFrame({"ts": [T0 + pd.Timedelta(seconds=5 * i) for i in range(len(ack))], "num_pending": [1] * len(ack),
                            "num_ack_pending": ack, "num_waiting": [0] * len(ack), "num_redelivered": [0] * len(ack),
                            **extra})
    return charts.consumer_gauges(samples, max_ack_pending=max_ack, max_waiting=-1)


def test_a_limit_near_the_values_is_a_labelled_line():
    fig = gauges([3, 4], max_ack=5)
    line = next(t for t in fig.data if t.name == "limit: max_ack_pending")
    assert list(line.y) == [5, 5]
    assert "limit: max_waiting" not in [t.name for t in fig.data]  # unlimited: no line


def test_a_limit_far_above_the_values_is_named_without_squashing_them():
    fig = gauges([3, 4], max_ack=1000)
    assert "limit: max_ack_pending" not in [t.name for t in fig.data]
    assert "limit: max_ack_pending 1,000 (off the scale)" in [a.text for a in fig.layout.annotations]
    assert list(fig.layout.yaxis3.range) == [0, pytest.approx(4 * 1.15)]  # the axis follows the values


def test_gauge_series_and_limits_have_distinct_colours_and_legend_entries_none_red():
    fig = gauges([3, 4], max_ack=5)
    colours = [t.line.color for t in fig.data]
    names = [t.name for t in fig.data]
    assert len(set(colours)) == len(colours) and len(set(names)) == len(names)
    assert "#d62728" not in colours  # red belongs to the verdicts


def test_consumer_gauges_draw_the_oldest_ages_beside_pending_with_estimates_marked():
    samples = pd.DataFrame({"ts": [T0 + pd.Timedelta(seconds=5 * i) for i in range(3)], "num_pending": [4, 4, 4],
                            "num_ack_pending": [1, 1, 1], "num_waiting": [0, 0, 0], "num_redelivered": [0, 0, 0],
                            "oldest_unacked_age_seconds": [60.0, 120.0, 180.0],
                            "oldest_unacked_age_kind": ["exact", "estimate", "exact"],
                            "oldest_undelivered_age_seconds": [30.0, None, 90.0],
                            "oldest_undelivered_age_kind": ["exact", None, "exact"]})
    fig = charts.consumer_gauges(samples, max_ack_pending=None, max_waiting=None)
    by_name = {t.name: t for t in fig.data}
    unacked = by_name["oldest unacked (min)"]
    assert list(unacked.y) == [1.0, 2.0, 3.0]
    assert unacked.yaxis == "y2"  # the second subplot
    assert list(by_name["oldest unacked: estimate"].y) == [2.0]  # only the estimated reading
    assert "oldest undelivered: estimate" not in by_name
    assert fig.layout.annotations[1].text == "age of the oldest message (minutes)"  # right under pending


def test_gauge_axes_start_at_zero_and_time_is_a_date_axis_also_for_rollups():
    fig = gauges([0, 0], max_ack=5)
    assert all(fig.layout[f"yaxis{i if i > 1 else ''}"].rangemode == "tozero" for i in range(1, len(charts.PANELS) + 1))
    rollups = pd.DataFrame({"ts": [T0, T0 + pd.Timedelta(hours=1)], "num_pending": [1.0, 2.0],
                            "num_ack_pending": [0.5, 1.0], "num_waiting": [1.0, 1.0]})  # no redelivery gauge kept
    fig = charts.consumer_gauges(rollups, 1000, 512)
    assert all(fig.layout[f"xaxis{i if i > 1 else ''}"].type == "date" for i in range(1, len(charts.PANELS) + 1))
    assert any(a.text.startswith("the pipeline's rollups do not keep this") for a in fig.layout.annotations)


def test_verdict_labels_sit_inside_the_top_panel_not_on_its_title():
    band = pd.DataFrame({"start": [T0], "end": [T0 + pd.Timedelta(seconds=5)], "verdict": ["STALLED"], "reason": ["x"]})
    fig = charts.consumer_gauges(pd.DataFrame({"ts": [T0], "num_pending": [1]}), 5, 5, band=band)
    label = next(a for a in fig.layout.annotations if a.text == "STALLED")
    assert (label.yref, label.yanchor) == ("y domain", "top")


def test_pin_timeline_labels_bars_with_the_id_tail_and_neighbours_never_share_a_colour():
    ids = [f"x3jkSMKG5bo5V7Sg9n1A{c}{c}" for c in "abcdefghijklm"]
    events = pd.DataFrame([ev(i * 7, "pinned", p) for i, p in enumerate(ids)])
    fig = charts.pin_timeline(sessions_from_events(events, UNTIL), events)
    [bars] = [t for t in fig.data if t.type == "bar"]
    order = sorted(range(len(bars.base)), key=lambda i: bars.base[i])
    colours = [bars.marker.color[i] for i in order]
    assert all(a != b for a, b in zip(colours, colours[1:]))
    assert list(bars.text) == [f"…9n1A{c}{c}" for c in "abcdefghijklm"]
    assert bars.customdata[0][0] == ids[0]  # whole on hover
    assert any("a pin id names one pin, not a client" in a.text for a in fig.layout.annotations)


def test_pin_timeline_marks_unpins_by_reason_and_operator_actions_with_their_actor():
    events = pd.DataFrame([ev(0, "pinned", "a"), ev(30, "unpinned", reason="timeout"), ev(40, "pinned", "b"),
                           ev(60, "unpinned", reason="admin"), ev(61, "pinned", "c")])
    actions = pd.DataFrame([{**KEY, "ts": T0 + pd.Timedelta(seconds=60), "actor": "ana", "action": "unpin",
                             "outcome": "ok"}])
    fig = charts.pin_timeline(sessions_from_events(events, UNTIL), events, actions=actions)
    markers = {t.name for t in fig.data if t.type == "scatter"}
    assert markers == {"unpinned: timeout", "unpinned: admin", "operator action"}
    overlay = next(t for t in fig.data if t.name == "operator action")
    assert list(overlay.text) == ["unpin by ana"]


def test_pin_timeline_hatches_the_stretch_a_holder_kept_its_pin_without_pulling_over_its_bar():
    """Pin a held 0-100 s; its consumer was PIN_IDLE from 40 s on (named there, still so): the
    bar is not drawn unbroken as a pin that worked, the stretch is marked over it on its lane."""
    events = pd.DataFrame([ev(0, "pinned", "a")])
    idle = pd.DataFrame([{"account": "$G", "stream": "S", "consumer": "C", "start_ts": T0 + pd.Timedelta(seconds=40),
                          "end_ts": T0 + pd.Timedelta(seconds=100), "ongoing": True},
                         {"account": "$G", "stream": "OTHER", "consumer": "C", "start_ts": T0,
                          "end_ts": T0 + pd.Timedelta(seconds=10), "ongoing": False}])
    fig = charts.pin_timeline(sessions_from_events(events, UNTIL), events, idle=idle)
    [pin] = [t for t in fig.data if t.type == "bar" and t.name != charts.IDLE_NAME]
    [mark] = [t for t in fig.data if t.name == charts.IDLE_NAME]
    assert list(mark.y) == list(pin.y), "on the holder's lane only: the other stream's has no bar drawn"
    assert pd.Timestamp(mark.base[0]).tz_localize("UTC") == T0 + pd.Timedelta(seconds=40) and list(mark.x) == [60_000]
    assert mark.marker.pattern.shape == "x" and mark.customdata[0][0] == "until now"


def test_operator_action_labels_on_a_busy_lane_never_overlap():
    """Ten unpins by two operators within twenty seconds on one lane, in an hour of pins: only
    labels far enough apart to be read are written (the first of a cluster says how many more are
    beside it); every action keeps its marker and its hover."""
    events = pd.DataFrame([ev(0, "pinned", "a"), ev(3600, "unpinned", reason="timeout")])
    until = (T0 + pd.Timedelta(hours=1)).to_pydatetime()
    busy = [{**KEY, "ts": T0 + pd.Timedelta(seconds=1800 + 2 * i), "actor": "ana" if i % 2 else "bo",
             "action": "unpin", "outcome": "ok"} for i in range(10)]
    late = [{**KEY, "ts": T0 + pd.Timedelta(seconds=3300), "actor": "ana", "action": "pause", "outcome": "ok"}]
    fig = charts.pin_timeline(sessions_from_events(events, until), events, actions=pd.DataFrame(busy + late))
    overlay = next(t for t in fig.data if t.name == "operator action")
    assert len(overlay.x) == 11 and len(overlay.customdata) == 11  # every action marked, with its hover
    written = [(pd.Timestamp(x), t) for x, t in zip(overlay.x, overlay.text) if t]
    assert [t for _, t in written] == ["unpin by bo (+9 more)", "pause by ana"]
    span = pd.Timedelta(hours=1)
    assert all(b[0] - a[0] >= span * charts.LABEL_GAP for a, b in zip(written, written[1:]))


def test_a_long_range_aggregates_switches_per_bucket_on_the_busiest_lanes():
    events = pd.DataFrame([ev(i * 20, "pinned", f"p{i}", consumer=f"C{i % 15}") for i in range(300)])
    until = (T0 + pd.Timedelta(hours=2)).to_pydatetime()
    fig = charts.pin_timeline(sessions_from_events(events, until), events)
    assert not [t for t in fig.data if t.type == "bar"]  # no barcode
    [heat] = [t for t in fig.data if t.type == "heatmap"]
    assert len(set(heat.y)) == charts.TOP_LANES and sum(heat.z) == 300 * 12 // 15
    assert any("3 more consumer(s) not drawn" in a.text for a in fig.layout.annotations)


def test_names_from_the_server_are_escaped_in_every_label():
    events = pd.DataFrame([ev(0, "pinned", "<b>pin</b>", stream="H<b&x", consumer="<i_c"),
                           ev(9, "unpinned", reason="timeout", stream="H<b&x", consumer="<i_c")])
    fig = charts.pin_timeline(sessions_from_events(events, UNTIL), events, title="<script>")
    assert fig.layout.title.text == "&lt;script&gt;"
    bar = next(t for t in fig.data if t.type == "bar")
    assert bar.customdata[0][0] == "&lt;b&gt;pin&lt;/b&gt;"
    assert bar.text[0] == "…in&lt;/b&gt;"  # the id's tail, escaped
    assert "H&lt;b&amp;x / &lt;i_c [jobs]" in {y for t in fig.data for y in t.y}


def test_quotes_in_names_show_as_quotes_in_lane_labels_not_as_entities():
    """Plotly decodes only a few entities (&lt; &gt; &amp; and numeric ones): `&quot;` and `&#x27;`
    would show as written. Quotes need no escaping where no tag can be formed (< is escaped)."""
    events = pd.DataFrame([ev(0, "pinned", "it's \"p\"", stream='orders "eu"', consumer="it's<b>"),
                           ev(9, "unpinned", reason="timeout", stream='orders "eu"', consumer="it's<b>")])
    fig = charts.pin_timeline(sessions_from_events(events, UNTIL), events, title='"pins"')
    labels = {y for t in fig.data for y in t.y} | {fig.layout.title.text}
    label = 'orders "eu" / it\'s&lt;b&gt; [jobs]'
    assert label in labels, labels
    shown = " ".join(labels) + " ".join(str(c) for t in fig.data if t.customdata is not None for c in t.customdata)
    assert "&quot;" not in shown and "&#x27;" not in shown and "&#39;" not in shown, shown


def test_empty_timeline_says_so():
    fig = charts.pin_timeline(pd.DataFrame(), pd.DataFrame())
    assert fig.layout.annotations[0].text == "No pin events in this range"
    assert fig.layout.xaxis.visible is False and fig.layout.yaxis.visible is False  # no -1...5 axis


def test_time_with_work_and_nobody_pinned_is_weighted_by_the_age_of_the_oldest_message(store):
    """Samples every 10 s in a real store; nobody pinned with work pending in three intervals,
    whose oldest message was 1 h, 2 h and 2 h old: 30 s of no pin, weighted 10·1 + 10·2 + 10·2."""
    from jetwatch.collectors.consumer_state import SAMPLE_COLUMNS
    from jetwatch.dashboard.data import pin_history
    from jetwatch.health.rules import Thresholds
    from jetwatch.store import writes

    pins = ["p1", None, None, None, "p2", "p2"]
    pending = [5, 5, 5, 5, 5, 0]
    ages = [600.0, 3600.0, 7200.0, 7200.0, 9000.0, None]
    cols = {c: [None] * len(pins) for c in SAMPLE_COLUMNS}
    cols.update(ts=[(T0 + pd.Timedelta(seconds=10 * i)).isoformat() for i in range(len(pins))],
                account=["A"] * 6, stream=["S"] * 6, consumer=["C"] * 6, pin_group=["jobs"] * 6,
                pinned_id=pins, num_pending=pending, paused=[False] * 6, oldest_unacked_age_seconds=ages)
    store.write(lambda con: writes.write_samples(con, ["A"], cols))
    expected_weighted = sum(10 * a / 3600 for p, n, a in zip(pins[:-1], pending[:-1], ages[:-1]) if p is None and n > 0)
    summary = pin_history(store, T0.to_pydatetime() - pd.Timedelta(minutes=1), T0.to_pydatetime() + pd.Timedelta(minutes=5),
                          Thresholds()).summary
    row = summary.iloc[0]
    assert row["nopin_pending_seconds"] == pytest.approx(30.0)
    assert row["nopin_age_weighted_seconds"] == pytest.approx(expected_weighted) == pytest.approx(50.0)
    assert row["nopin_oldest_age_seconds"] == 7200.0


# -- Long ranges on a young install ------------------------------------------------------------

def test_a_long_range_on_a_young_install_starts_where_data_starts_at_full_resolution(tmp_path):
    """Two minutes of samples and the one hourly rollup the pipeline made of them, seen over 30
    days: the page reads the raw samples (every one, not one hourly point drawn as nothing), the
    range starts at the first sample (not a sliver at the right of 30 days), every axis starts at
    zero, and a panel without data says why."""
    from jetwatch.dashboard import data
    from jetwatch.store.database import Store
    from tests.test_oncall_pages import working, write_store

    db = str(tmp_path / "young.duckdb")
    now = dt.datetime.now(dt.UTC)
    first = write_store(db, {("$G", "S", "c"): working}, cycles=13, step_s=10, end=now)
    Store(db).write(lambda con: con.execute(
        "INSERT INTO rollups (granularity, bucket, account, stream, consumer, samples, pending_mean, ack_pending_mean,"
        " waiting_mean) VALUES ('1h', date_trunc('hour', ?::TIMESTAMPTZ), '$G', 'S', 'c', 13, 0, 0, 1)", [first]))
    since = now - dt.timedelta(days=30)
    detail = data.consumer_detail(Store(db), "$G", "S", "c", since, now)
    assert detail.source.startswith("raw samples") and len(detail.samples) == 13, detail.source
    start = data.data_start(detail.samples, since)
    assert abs((pd.Timestamp(start) - pd.Timestamp(first)).total_seconds()) < 1

    band = data.band_from_changes(pd.DataFrame({"ts": [since + dt.timedelta(days=1)], "from_verdict": [None],
                                                "to_verdict": ["OK"], "reason": ["fine"]}), since, now)
    fig = charts.consumer_gauges(detail.samples, 1000, 512, band=band, span=(start, now))
    for axis in (fig.layout.xaxis, fig.layout.xaxis5):
        assert [pd.Timestamp(x) for x in axis.range] == [pd.Timestamp(start), pd.Timestamp(now)]
    assert all(fig.layout[a].rangemode == "tozero" for a in fig.layout if a.startswith("yaxis"))

    empty = charts.consumer_gauges(pd.DataFrame(columns=["ts", "num_pending"]), None, None, span=(start, now))
    said = [a.text for a in empty.layout.annotations]
    assert any("no samples between" in t for t in said), said
