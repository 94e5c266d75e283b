"""The Spark pipeline: transforms on a real local SparkSession, table-driven, and the verdicts
checked against the dashboard's own evaluation on generated sample sequences."""

from __future__ import annotations

import datetime as dt
import json
import os
import sys

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark import SparkContext
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from jetwatch.dashboard.data import SESSION_COLUMNS, sessions_from_events
from jetwatch.dashboard.data import rates as live_rates
from jetwatch.health.rules import Thresholds, evaluate
from jetwatch.pipeline.transforms import GAP_SCHEMA, mark_gap_spans, pin_sessions, rollups, verdict_history
from tests.helpers import stop_process

# One worker runs this module: one Spark session (`spark`, session-scoped) for all of it.
pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark_session")]

T0 = dt.datetime(2026, 11, 22, 3, 0, tzinfo=dt.UTC)
EVENT_SCHEMA = T.StructType([
    T.StructField("ts", T.TimestampType()), T.StructField("account", T.StringType()),
    T.StructField("stream", T.StringType()), T.StructField("consumer", T.StringType()),
    T.StructField("group_name", T.StringType()), T.StructField("event", T.StringType()),
    T.StructField("pinned_id", T.StringType()), T.StructField("reason", T.StringType()),
    T.StructField("source", T.StringType()),
])
SAMPLE_SCHEMA = T.StructType([
    T.StructField("account", T.StringType()), T.StructField("stream", T.StringType()),
    T.StructField("consumer", T.StringType()), T.StructField("ts", T.TimestampType()),
    T.StructField("created", T.TimestampType()), T.StructField("num_pending", T.LongType()),
    T.StructField("num_ack_pending", T.LongType()), T.StructField("num_waiting", T.LongType()),
    T.StructField("num_redelivered", T.LongType()), T.StructField("delivered_consumer_seq", T.LongType()),
    T.StructField("delivered_stream_seq", T.LongType()), T.StructField("ack_floor_consumer_seq", T.LongType()),
    T.StructField("ack_floor_stream_seq", T.LongType()), T.StructField("paused", T.BooleanType()),
    T.StructField("pinned_id", T.StringType()),
])
LIMIT_SCHEMA = T.StructType([
    T.StructField("account", T.StringType()), T.StructField("stream", T.StringType()),
    T.StructField("consumer", T.StringType()), T.StructField("is_pull", T.BooleanType()),
    T.StructField("filtered", T.BooleanType()), T.StructField("max_ack_pending", T.LongType()),
    T.StructField("max_waiting", T.LongType()), T.StructField("priority_policy", T.StringType()),
])
COUNT_SCHEMA = T.StructType([
    T.StructField("account", T.StringType()), T.StructField("stream", T.StringType()),
    T.StructField("consumer", T.StringType()), T.StructField("minute", T.TimestampType()),
    T.StructField("pin_switches", T.LongType()), T.StructField("nak_count", T.LongType()),
    T.StructField("max_deliveries_count", T.LongType()),
])


@pytest.fixture(scope="session")
def spark():
    os.environ["PYSPARK_PYTHON"] = sys.executable  # Python workers need this environment's pandas
    session = (SparkSession.builder.master("local[1]").appName("jetwatch-tests")
               .config("spark.sql.shuffle.partitions", "1").config("spark.ui.enabled", "false")
               .config("spark.sql.session.timeZone", "UTC").config("spark.driver.memory", "1g")
               .getOrCreate())
    try:
        yield session
    finally:
        _stop_spark(session)


def _stop_spark(session: SparkSession) -> None:
    """Stop the session and make sure its JVM ends: when the Py4J link is broken, stop() raises
    and the JVM would otherwise outlive the suite (the session-end check in conftest fails on it)."""
    proc = getattr(SparkContext._gateway, "proc", None)
    try:
        session.stop()
    finally:
        if proc is not None and proc.poll() is None:
            stop_process(proc)


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def ev(seconds, event, pinned_id=None, reason=None, source="advisory", consumer="C"):
    return (at(seconds), "$G", "S", consumer, "jobs", event, pinned_id, reason, source)


AS_OF = "2026-11-22T03:10:00Z"  # 600 s after T0

SESSION_CASES = [
    ("a pin with no unpin yet", [ev(0, "pinned", "a")], [("a", 0, 600, "still pinned", None)]),
    ("timeout, then the next pin", [ev(0, "pinned", "a"), ev(30, "unpinned", reason="timeout"), ev(45, "pinned", "b")],
     [("a", 0, 30, "timeout", 15.0), ("b", 45, 600, "still pinned", None)]),
    ("admin unpin", [ev(0, "pinned", "a"), ev(10, "unpinned", reason="admin")], [("a", 0, 10, "admin", None)]),
    ("an unpin whose pin happened before collection began", [ev(5, "unpinned", reason="timeout"), ev(9, "pinned", "b")],
     [(None, None, 5, "timeout", 4.0), ("b", 9, 600, "still pinned", None)]),
    ("duplicate and out-of-order events", [ev(30, "unpinned", reason="timeout"), ev(0, "pinned", "a"),
                                           ev(0, "pinned", "a"), ev(40, "pinned", "b"), ev(30, "unpinned", reason="timeout")],
     [("a", 0, 30, "timeout", 10.0), ("b", 40, 600, "still pinned", None)]),
    ("inferred unpin after a leader change", [ev(0, "pinned", "a"), ev(20, "unpinned", source="inferred"),
                                              ev(20, "pinned", "b")],
     [("a", 0, 20, "inferred", 0.0), ("b", 20, 600, "still pinned", None)]),
    ("a pin replaced by a pin with no unpin seen", [ev(0, "pinned", "a"), ev(50, "pinned", "b")],
     [("a", 0, 50, "inferred", 0.0), ("b", 50, 600, "still pinned", None)]),
    ("consumer deleted and recreated", [ev(0, "pinned", "a"), ev(60, "deleted"), ev(100, "pinned", "z")],
     [("a", 0, 60, "consumer deleted", 40.0), ("z", 100, 600, "still pinned", None)]),
    ("timestamps tie: the unpin comes first", [ev(0, "pinned", "a"), ev(7, "pinned", "b"),
                                               ev(7, "unpinned", reason="admin")],
     [("a", 0, 7, "admin", 0.0), ("b", 7, 600, "still pinned", None)]),
]


@pytest.mark.parametrize("events,expected", [c[1:] for c in SESSION_CASES], ids=[c[0] for c in SESSION_CASES])
def test_pin_sessions(spark, events, expected):
    out = pin_sessions(spark.createDataFrame(events, EVENT_SCHEMA), AS_OF).orderBy("end_ts").collect()
    got = [(r.pinned_id, None if r.start_ts is None else (r.start_ts.replace(tzinfo=dt.UTC) - T0).total_seconds(),
            (r.end_ts.replace(tzinfo=dt.UTC) - T0).total_seconds(), r.end_reason,
            None if r.gap_seconds is None else round(r.gap_seconds, 3)) for r in out]
    assert got == expected


def test_pin_sessions_are_kept_per_consumer(spark):
    events = [ev(0, "pinned", "a"), ev(5, "pinned", "x", consumer="D"), ev(10, "unpinned", reason="admin")]
    out = {r.consumer: r.end_reason for r in pin_sessions(spark.createDataFrame(events, EVENT_SCHEMA), AS_OF).collect()}
    assert out == {"C": "admin", "D": "still pinned"}


def test_pin_sessions_that_overlap_a_capture_gap_are_marked(spark):
    events = [ev(0, "pinned", "a"), ev(100, "unpinned", reason="timeout"), ev(200, "pinned", "b"),
              ev(300, "unpinned", reason="admin"), ev(400, "pinned", "c"), ev(450, "unpinned", reason="admin"),
              ev(500, "pinned", "d")]
    sessions = pin_sessions(spark.createDataFrame(events, EVENT_SCHEMA), AS_OF)
    gaps = spark.createDataFrame([(at(250), at(260), at(270)), (at(550), None, at(560))], GAP_SCHEMA)
    marked = {r.pinned_id: r.spans_gap for r in sessions.transform(mark_gap_spans, gaps).collect()}
    assert marked == {"a": False, "b": True, "c": False, "d": True}  # d: still pinned across the open gap
    none = sessions.transform(mark_gap_spans, spark.createDataFrame([], GAP_SCHEMA))
    assert sorted(r.spans_gap for r in none.collect()) == [False] * 4


@st.composite
def pin_history(draw, consumer: str):
    """A consumer's pin events as the store may hold them: ties, duplicates, out of order,
    inferred events, deletions, unpins with no pin before them."""
    events = []
    for _ in range(draw(st.integers(0, 10))):
        when = draw(st.integers(0, 40))
        kind = draw(st.sampled_from(["pinned", "pinned", "unpinned", "unpinned", "deleted"]))
        source = "advisory" if kind == "deleted" else draw(st.sampled_from(["advisory", "inferred"]))
        pin = draw(st.sampled_from(["a", "b", "c"])) if kind == "pinned" else None
        reason = draw(st.sampled_from(["admin", "timeout", None])) if kind == "unpinned" and source == "advisory" else None
        events.append(ev(when, kind, pin, reason, source, consumer))
    repeats = draw(st.lists(st.sampled_from(events), max_size=2)) if events else []
    return events + repeats


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(st.tuples(*[pin_history(f"c{i}") for i in range(6)]))
def test_live_pin_sessions_equal_the_pipelines_on_generated_histories(spark, histories):
    """The Pins page sessionises recent events itself (pandas) between pipeline runs: both must
    give the same sessions for the same events."""
    events = [e for history in histories for e in history]
    piped = pin_sessions(spark.createDataFrame(events, EVENT_SCHEMA), AS_OF).toPandas()
    columns = [f.name for f in EVENT_SCHEMA]
    live = sessions_from_events(pd.DataFrame(events, columns=columns).assign(ts=lambda f: pd.to_datetime(f["ts"], utc=True)),
                                dt.datetime.fromisoformat(AS_OF.replace("Z", "+00:00")))
    order = ["consumer", "end_ts", "start_ts", "end_reason", "pinned_id"]

    def tidy(frame: pd.DataFrame) -> pd.DataFrame:
        frame = frame[SESSION_COLUMNS].copy()
        for col in ("start_ts", "end_ts"):
            frame[col] = pd.to_datetime(frame[col], utc=True)  # Spark gives naive UTC times
        frame["pinned_id"] = frame["pinned_id"].astype(object).where(frame["pinned_id"].notna(), None)
        frame["group_name"] = frame["group_name"].astype(object).where(frame["group_name"].notna(), None)
        for col in ("duration_seconds", "gap_seconds"):
            frame[col] = pd.to_numeric(frame[col]).astype(float).round(6)
        return frame.sort_values(order, na_position="first").reset_index(drop=True)

    pd.testing.assert_frame_equal(tidy(live), tidy(piped), check_dtype=False)


def sample(seconds, pending=0, ack=0, waiting=1, dcs=0, dss=None, afc=0, afs=0, redelivered=0, consumer="C",
           paused=False, pinned=None):
    return ("$G", "S", consumer, at(seconds), at(-3600), pending, ack, waiting, redelivered, dcs,
            dcs if dss is None else dss, afc, afs, paused, pinned)


def limits(spark, **kw):
    row = {"account": "$G", "stream": "S", "consumer": "C", "is_pull": True, "filtered": False,
           "max_ack_pending": 100, "max_waiting": 512, "priority_policy": None, **kw}
    return spark.createDataFrame([tuple(row[f.name] for f in LIMIT_SCHEMA)], LIMIT_SCHEMA)


def test_rollups_give_gauge_statistics_per_minute(spark):
    rows = [sample(i * 10, pending=p, ack=a, waiting=w, dcs=i * 10, afc=i * 10)
            for i, (p, a, w) in enumerate([(1, 0, 1), (3, 95, 2), (5, 10, 3), (7, 99, 4), (9, 0, 5), (11, 0, 6)])]
    out = rollups(spark.createDataFrame(rows, SAMPLE_SCHEMA), limits(spark), "1m", 0.9).collect()
    assert len(out) == 1
    r = out[0]
    assert (r.samples, r.pending_min, r.pending_max, r.pending_mean) == (6, 1, 11, 6.0)
    assert r.pending_p95 == 11.0
    assert (r.ack_pending_max, r.waiting_min, r.waiting_max) == (99, 1, 6)
    assert r.saturated_fraction == pytest.approx(2 / 6)
    assert r.delivered_per_second == pytest.approx(1.0)
    assert r.acked_per_second == pytest.approx(1.0)
    assert r.redelivered_per_second == 0.0


def test_rollup_rates_skip_a_counter_reset_and_count_redeliveries(spark):
    # consumer_seq +20 per 10 s while stream_seq +10: half the deliveries are redeliveries; then a reset.
    seqs = [(0, 0), (20, 10), (40, 20), (5, 5), (25, 15)]
    rows = [sample(i * 10, dcs=c, dss=s, afc=c) for i, (c, s) in enumerate(seqs)]
    r = rollups(spark.createDataFrame(rows, SAMPLE_SCHEMA), limits(spark), "1m", 0.9).collect()[0]
    assert r.delivered_per_second == pytest.approx(60 / 30)  # three valid steps of 10 s, the reset skipped
    assert r.redelivered_per_second == pytest.approx(30 / 30)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(1, 12), st.integers(-30, 40), st.integers(-30, 40), st.integers(-30, 40)),
                min_size=1, max_size=8), st.booleans())
def test_rollup_rates_equal_the_consumer_pages_rates_over_the_same_steps(spark, steps, filtered):
    """Long ranges show rollups, short ones per-sample rates: the same samples, the same rates.
    Steps may go backwards (a recreated consumer); all samples fall in one minute."""
    rows, t, dcs, dss, afc = [sample(0, consumer="R")], 0, 100, 100, 100
    for dt_s, d_cons, d_stream, d_ack in steps:
        t, dcs, dss, afc = t + dt_s, max(0, dcs + d_cons), max(0, dss + d_stream), max(0, afc + d_ack)
        rows.append(sample(min(t, 59), dcs=dcs, dss=dss, afc=afc, consumer="R"))
    piped = rollups(spark.createDataFrame(rows, SAMPLE_SCHEMA), limits(spark, consumer="R", filtered=filtered),
                    "1m", 0.9).collect()[0]

    frame = pd.DataFrame(rows, columns=[f.name for f in SAMPLE_SCHEMA])
    live = live_rates(frame, filtered)
    seconds = pd.to_datetime(frame.sort_values("ts")["ts"]).diff().dt.total_seconds().iloc[1:].reset_index(drop=True)
    for name in ("delivered_per_second", "acked_per_second", "redelivered_per_second"):
        counted = live[name].notna()
        expected = (live[name] * seconds)[counted].sum() / seconds[counted].sum() if counted.any() else None
        got = getattr(piped, name)
        if expected is None:
            assert got is None, name
        else:
            assert got == pytest.approx(expected), name


AGED_SCHEMA = T.StructType([*SAMPLE_SCHEMA.fields, T.StructField("oldest_unacked_age_seconds", T.DoubleType()),
                            T.StructField("oldest_undelivered_age_seconds", T.DoubleType())])


def test_rollups_keep_the_largest_age_per_minute_and_per_hour(spark):
    """Ages over two minutes: each minute keeps its own largest age, the hour the largest of all;
    a sample without an age (nothing owed) does not count."""
    ages = [(30.0, 10.0), (95.0, None), (None, None), (40.0, 40.0), (400.0, 5.0), (12.0, 12.0)]
    rows = [(*sample(i * 20, pending=1), unacked, undelivered) for i, (unacked, undelivered) in enumerate(ages)]
    frame = spark.createDataFrame(rows, AGED_SCHEMA)
    minutes = {r.bucket.minute:
               (r.oldest_unacked_age_max_seconds, r.oldest_undelivered_age_max_seconds)
               for r in rollups(frame, limits(spark), "1m", 0.9).collect()}
    expected = {}
    for i, (unacked, undelivered) in enumerate(ages):  # an independent max per minute
        m = at(i * 20).minute
        u, d = expected.get(m, (None, None))
        expected[m] = (max(x for x in (u, unacked) if x is not None) if (u, unacked) != (None, None) else None,
                       max(x for x in (d, undelivered) if x is not None) if (d, undelivered) != (None, None) else None)
    assert minutes == expected == {at(0).minute: (95.0, 10.0), at(60).minute: (400.0, 40.0)}
    [hour] = rollups(frame, limits(spark), "1h", 0.9).collect()
    assert (hour.oldest_unacked_age_max_seconds, hour.oldest_undelivered_age_max_seconds) == (400.0, 40.0)


def test_samples_archived_before_time_lag_are_read_beside_newer_ones(spark, tmp_path):
    """An archive hour written before the age columns existed and one written after: the job's
    reader merges them; the old rows have no age."""
    from jetwatch.pipeline.job import _read_samples

    old = spark.createDataFrame([sample(0, pending=1)], SAMPLE_SCHEMA)
    new = spark.createDataFrame([(*sample(60, pending=1), 75.0, 70.0)], AGED_SCHEMA)
    old.write.parquet(str(tmp_path / "samples" / "date=2026-11-22" / "hour=3"))
    new.write.parquet(str(tmp_path / "samples" / "date=2026-11-22" / "hour=4"))
    got = {r.hour: r.oldest_unacked_age_seconds for r in _read_samples(spark, str(tmp_path / "samples")).collect()}
    assert got == {3: None, 4: 75.0}


def test_rollups_hourly_bucket_spans_minutes(spark):
    rows = [sample(i * 60, pending=i) for i in range(5)]
    out = rollups(spark.createDataFrame(rows, SAMPLE_SCHEMA), limits(spark), "1h", 0.9).collect()
    assert [(r.granularity, r.samples, r.pending_max) for r in out] == [("1h", 5, 4)]


def test_filtered_consumers_get_no_redelivery_rate_from_sequences(spark):
    rows = [sample(i * 10, dcs=i * 10, dss=i * 1000, afc=i * 10) for i in range(4)]
    r = rollups(spark.createDataFrame(rows, SAMPLE_SCHEMA), limits(spark, filtered=True), "1m", 0.9).collect()[0]
    assert r.redelivered_per_second is None


# -- verdicts: the pipeline gives the dashboard's verdicts on the same samples -------------------

TH = Thresholds(health_window=300, health_min_samples=3, health_min_span=60)


@st.composite
def consumer_sequence(draw, name: str):
    n = draw(st.integers(min_value=1, max_value=12))
    pending = draw(st.lists(st.integers(0, 50), min_size=n, max_size=n))
    ack = draw(st.lists(st.integers(0, 110), min_size=n, max_size=n))
    waiting = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    steps = draw(st.lists(st.integers(0, 20), min_size=n, max_size=n))
    extra = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
    ack_steps = draw(st.lists(st.integers(0, 20), min_size=n, max_size=n))
    paused = draw(st.booleans())
    pins = draw(st.lists(st.sampled_from([None, "p1", "p2", "p3"]), min_size=n, max_size=n))
    rows, dcs, dss, af = [], 0, 0, 0
    for i in range(n):
        dss += steps[i]
        dcs += steps[i] + extra[i]
        af = min(af + ack_steps[i], dss)
        rows.append(sample(i * 25, pending=pending[i], ack=ack[i], waiting=waiting[i], dcs=dcs, dss=dss, afc=af,
                           afs=af, consumer=name, paused=paused, pinned=pins[i]))
    return rows


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(st.lists(st.sampled_from(["pinned_client", None]), min_size=4, max_size=4).flatmap(
    lambda policies: st.tuples(st.just(policies), *[consumer_sequence(f"c{i}") for i in range(4)])))
def test_pipeline_verdicts_equal_the_dashboards_on_generated_samples(spark, case):
    policies, *sequences = case
    rows = [r for seq in sequences for r in seq]
    lim_rows = [("$G", "S", f"c{i}", True, False, 100, 512, p) for i, p in enumerate(policies)]
    samples = spark.createDataFrame(rows, SAMPLE_SCHEMA)
    lim = spark.createDataFrame(lim_rows, LIMIT_SCHEMA)
    counts = spark.createDataFrame([], COUNT_SCHEMA)
    piped = {r.consumer: r.verdict for r in verdict_history(samples, lim, counts, TH).collect()}

    pdf = pd.DataFrame(rows, columns=[f.name for f in SAMPLE_SCHEMA])
    live = evaluate(pdf, pd.DataFrame(lim_rows, columns=[f.name for f in LIMIT_SCHEMA]), TH)
    assert piped == dict(zip(live["consumer"], live["verdict"]))


# -- live verdicts: the collector's judging path gives the pipeline's verdict history ---------

# No easing: the pipeline judges each window on its own; the collector's easing on top is
# tests/test_easing.py's and tests/test_live_verdicts.py's.
LIVE_TH = Thresholds(health_window=120, health_min_samples=3, health_min_span=30, clear_after=0.0)
LAG = 0.5  # a cycle stamps its samples a little before it judges (collection takes time)


@st.composite
def cycle_history(draw):
    """Cycle times over three windows (ends of windows included, so every window is judged at
    its boundary) and, per consumer, the values each cycle samples."""
    window = int(LIVE_TH.health_window)
    times = []
    for k in range(3):
        offsets = draw(st.lists(st.integers(1, window - 1), min_size=0, max_size=6, unique=True))
        times += [k * window + o for o in sorted(offsets)] + [(k + 1) * window]
    policies = draw(st.lists(st.sampled_from(["pinned_client", None]), min_size=3, max_size=3))
    consumers = []
    for _ in range(3):
        n = len(times)
        consumers.append({
            "pending": draw(st.lists(st.integers(0, 50), min_size=n, max_size=n)),
            "ack": draw(st.lists(st.integers(0, 110), min_size=n, max_size=n)),
            "waiting": draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)),
            "steps": draw(st.lists(st.integers(0, 20), min_size=n, max_size=n)),
            "extra": draw(st.lists(st.integers(0, 5), min_size=n, max_size=n)),
            "acks": draw(st.lists(st.integers(0, 20), min_size=n, max_size=n)),
            "paused": draw(st.lists(st.booleans(), min_size=n, max_size=n)),
            "pins": draw(st.lists(st.sampled_from([None, "p1", "p2"]), min_size=n, max_size=n)),
        })
    return times, policies, consumers


def _sample_rows(times, consumers):
    """Per cycle, the sample rows (SAMPLE_SCHEMA order) of every consumer."""
    state = [{"dcs": 0, "dss": 0, "af": 0} for _ in consumers]
    cycles = []
    for i, t in enumerate(times):
        batch = []
        for c, (values, s) in enumerate(zip(consumers, state)):
            s["dss"] += values["steps"][i]
            s["dcs"] += values["steps"][i] + values["extra"][i]
            s["af"] = min(s["af"] + values["acks"][i], s["dss"])
            batch.append(sample(t - LAG, pending=values["pending"][i], ack=values["ack"][i],
                                waiting=values["waiting"][i], dcs=s["dcs"], dss=s["dss"], afc=s["af"], afs=s["af"],
                                consumer=f"c{c}", paused=values["paused"][i], pinned=values["pins"][i]))
        cycles.append(batch)
    return cycles


def _collector_batch(batch):
    names = [f.name for f in SAMPLE_SCHEMA]
    cols = {name: [row[i] for row in batch] for i, name in enumerate(names)}
    n = len(batch)
    for name in ("ts", "created"):
        cols[name] = [v.isoformat() for v in cols[name]]
    cols.update({"server": ["s"] * n, "cluster": [None] * n, "domain": [None] * n,
                 "delivered_last_active": [None] * n, "ack_floor_last_active": [None] * n,
                 "pause_until": [None] * n, "pin_group": [None] * n, "pinned_ts": [None] * n, "leader": [None] * n})
    return cols


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(cycle_history())
def test_collectors_live_verdicts_equal_the_pipelines_verdict_history_across_window_boundaries(
        spark, tmp_path_factory, history):
    """The collector judges after every cycle over the sliding window [now - W, now]; the
    pipeline judges consecutive windows [kW, (k+1)W). At each window's end the two look at the
    same samples, so the collector's kept verdict (through its real path: the cycle's samples
    committed, then judge_stored_cycle) must be the pipeline's."""
    from jetwatch.collectors.judging import LAST_KNOWN, judge_stored_cycle, load_window
    from jetwatch.store import writes
    from jetwatch.store.database import Store

    times, policies, consumers = history
    cycles = _sample_rows(times, consumers)
    store = Store(str(tmp_path_factory.mktemp("live") / "jetwatch.duckdb"))
    configs = [{"ts": T0.isoformat(), "account": "$G", "stream": "S", "consumer": f"c{i}", "created": None,
                "config_hash": f"h{i}", "is_pull": True, "filtered": False, "ack_policy": "explicit",
                "max_waiting": 512, "max_ack_pending": 100, "ack_wait_ns": None, "max_deliver": None,
                "priority_policy": p, "priority_groups": ["jobs"] if p else None, "priority_timeout_ns": None,
                "config_json": "{}"} for i, p in enumerate(policies)]
    window = int(LIVE_TH.health_window)
    live = {}
    for i, (t, batch) in enumerate(zip(times, cycles)):
        now = at(t)

        def tx(con, batch=batch, first=(i == 0)):
            writes.write_samples(con, ["$G"], _collector_batch(batch))
            if first:
                writes.write_configs(con, configs)

        store.write(tx)
        if i == 0:  # the collector's window at start: loaded from the store (here, the first cycle)
            held = load_window(store, now, LIVE_TH)
        else:
            held.add(_collector_batch(batch))
        judge_stored_cycle(store, now, LIVE_TH, held)  # what the collector runs after each cycle
        if t % window == 0:
            kept = store.query("verdicts_status")
            # Where too few fresh samples remain the collector holds its last known verdict
            # (nothing turns grey for lack of data); the pipeline's window says COLLECTING.
            live.update({(t // window - 1, c): "COLLECTING" if r.startswith(LAST_KNOWN) else v
                         for c, v, r in zip(kept["consumer"], kept["verdict"], kept["reason"])})

    lim_rows = [("$G", "S", f"c{i}", True, False, 100, 512, p) for i, p in enumerate(policies)]
    piped_rows = verdict_history(spark.createDataFrame([r for b in cycles for r in b], SAMPLE_SCHEMA),
                                 spark.createDataFrame(lim_rows, LIMIT_SCHEMA), spark.createDataFrame([], COUNT_SCHEMA),
                                 LIVE_TH).collect()
    piped = {(int((r.ts.replace(tzinfo=dt.UTC) - T0).total_seconds()) // window, r.consumer): r.verdict
             for r in piped_rows}
    assert live == piped


def test_the_pipeline_judges_each_consumer_with_the_thresholds_its_metadata_sets(spark, tmp_path):
    """Two consumers with the same samples, pulled and then left with work and nobody pulling for
    50 s; one's metadata allows a minute (`io.jetwatch.no_pullers_after`). The pipeline, reading the
    limits the export wrote, names only the other NO_PULLERS, as the collector does."""
    from jetwatch.collectors.judging import judge_stored_cycle, load_window
    from jetwatch.pipeline.export import export
    from jetwatch.store import writes
    from jetwatch.store.database import Store

    store = Store(str(tmp_path / "jetwatch.duckdb"))
    own = {"io.jetwatch.no_pullers_after": "1m"}
    configs = [{"ts": T0.isoformat(), "account": "$G", "stream": "S", "consumer": name, "created": None,
                "config_hash": name, "is_pull": True, "filtered": False, "ack_policy": "explicit", "max_waiting": 512,
                "max_ack_pending": 100, "ack_wait_ns": None, "max_deliver": None, "priority_policy": None,
                "priority_groups": None, "priority_timeout_ns": None,
                "config_json": json.dumps({"metadata": metadata} if metadata else {})}
               for name, metadata in (("own", own), ("settings", None))]
    window = int(LIVE_TH.health_window)
    cycles = [[sample(t - LAG, pending=0 if t < 80 else 5, waiting=1 if t < 80 else 0, dcs=min(t, 70),
                      afc=min(t, 70), afs=min(t, 70), consumer=name) for name in ("own", "settings")]
              for t in range(10, window + 1, 10)]
    held = None
    for i, batch in enumerate(cycles):
        now = at(10 * (i + 1))
        store.write(lambda con, batch=batch, first=(i == 0): (
            writes.write_samples(con, ["$G"], _collector_batch(batch)),
            writes.write_configs(con, configs) if first else None))
        if held is None:
            held = load_window(store, now, LIVE_TH)
        else:
            held.add(_collector_batch(batch))
        judge_stored_cycle(store, now, LIVE_TH, held)
    live = dict(zip(*(store.query("verdicts_status")[c] for c in ("consumer", "verdict"))))

    export(store, tmp_path / "archive", tmp_path / "input", T0, at(window + 1))
    limits_read = spark.read.parquet(str(tmp_path / "input" / "limits"))
    piped = {r.consumer: r.verdict for r in verdict_history(
        spark.createDataFrame([r for b in cycles for r in b], SAMPLE_SCHEMA), limits_read,
        spark.createDataFrame([], COUNT_SCHEMA), LIVE_TH).collect()}
    assert piped == live and piped["settings"] == "NO_PULLERS" and piped["own"] != "NO_PULLERS", (piped, live)
