"""Chart builders and the pin sessions behind them, tested directly (AppTest cannot read plotly)."""

from __future__ import annotations


import pandas as pd
import pytest

from jetwatch.dashboard import charts
from jetwatch.dashboard.data import pin_summary, rates, sessions_from_events

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


def test_pin_summary_puts_flapping_consumers_first():
    events = pd.DataFrame([ev(i * 10, "pinned", f"p{i}") for i in range(6)] + [ev(0, "pinned", "q", consumer="D")])
    sessions = sessions_from_events(events, UNTIL)
    out = pin_summary(sessions, events, pd.DataFrame(), hours=1.0, flapping_per_hour=4)
    assert list(out["consumer"]) == ["C", "D"]
    assert list(out["flapping"]) == [True, False]
    assert out.iloc[0]["median_pin_seconds"] == 10.0


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


def test_consumer_gauges_draw_the_limits_as_lines():
    samples = pd.DataFrame({"ts": [T0, T0 + pd.Timedelta(seconds=5)], "num_pending": [1, 2],
                            "num_ack_pending": [3, 4], "num_waiting": [0, 1], "num_redelivered": [0, 0]})
    fig = charts.consumer_gauges(samples, max_ack_pending=1000, max_waiting=-1)
    names = [t.name for t in fig.data]
    assert "max_ack_pending" in names
    assert "max_waiting" not in names  # unlimited: no line
    line = next(t for t in fig.data if t.name == "max_ack_pending")
    assert list(line.y) == [1000, 1000]


def test_pin_timeline_has_a_bar_per_pin_coloured_by_client_and_unpins_marked_by_reason():
    events = pd.DataFrame([ev(0, "pinned", "a"), ev(30, "unpinned", reason="timeout"), ev(40, "pinned", "b"),
                           ev(60, "unpinned", reason="admin"), ev(61, "pinned", "a")])
    fig = charts.pin_timeline(sessions_from_events(events, UNTIL), events)
    bars = [t for t in fig.data if t.type == "bar"]
    assert sorted(len(b.y) for b in bars) == [1, 2]  # pin id a twice, b once
    assert {b.marker.color for b in bars} == {charts.client_colour("a"), charts.client_colour("b")}
    markers = {t.name for t in fig.data if t.type == "scatter"}
    assert markers == {"unpinned: timeout", "unpinned: admin"}


def test_names_from_the_server_are_escaped_in_every_label():
    events = pd.DataFrame([ev(0, "pinned", "<b>pin</b>", stream="H<b&x", consumer="<i_c"),
                           ev(9, "unpinned", reason="timeout", stream="H<b&x", consumer="<i_c")])
    fig = charts.pin_timeline(sessions_from_events(events, UNTIL), events, title="<script>")
    assert fig.layout.title.text == "&lt;script&gt;"
    bar = next(t for t in fig.data if t.type == "bar")
    assert bar.customdata[0][0] == "&lt;b&gt;pin&lt;/b&gt;"
    assert bar.name.startswith("&lt;b&gt;")
    assert "H&lt;b&amp;x / &lt;i_c [jobs]" in {y for t in fig.data for y in t.y}


def test_empty_timeline_says_so():
    fig = charts.pin_timeline(pd.DataFrame(), pd.DataFrame())
    assert fig.layout.annotations[0].text == "No pin events in this range"
