"""The pipeline's transforms: pure DataFrame -> DataFrame functions, no I/O.

Sessionisation and rollups are window functions over named windows with explicit frames (no
Python UDFs). The verdict history is the one exception, on purpose: it applies `health.rules`
(over the window features of `health.window`, the collector's own arrays) through
`applyInPandas`, so the pipeline's verdicts come from the very code the collector runs and the
two cannot drift apart.
"""

from __future__ import annotations

import json

import pandas as pd
from pyspark.sql import Column, DataFrame, Window, WindowSpec
from pyspark.sql import functions as F
from pyspark.sql import types as T

from jetwatch.health.rules import LIMIT_COLUMNS, THRESHOLD_COLUMNS, Thresholds, evaluate

CONSUMER = ["account", "stream", "consumer"]


def keys(frame: DataFrame) -> list[str]:
    """A consumer's identity in `frame`: with several clusters' exports in one run, its cluster
    too (the same name in two clusters is two consumers); a frame without it is one cluster's."""
    return ["cluster", *CONSUMER] if "cluster" in frame.columns else CONSUMER

PIN_SESSION_SCHEMA = T.StructType([
    T.StructField("account", T.StringType()), T.StructField("stream", T.StringType()),
    T.StructField("consumer", T.StringType()), T.StructField("group_name", T.StringType()),
    T.StructField("pinned_id", T.StringType()), T.StructField("start_ts", T.TimestampType()),
    T.StructField("end_ts", T.TimestampType()), T.StructField("duration_seconds", T.DoubleType()),
    T.StructField("end_reason", T.StringType()), T.StructField("gap_seconds", T.DoubleType()),
])


def _seconds(later: Column, earlier: Column) -> Column:
    return later.cast("double") - earlier.cast("double")


def pin_sessions(events: DataFrame, as_of: str) -> DataFrame:
    """One row per pin: start, end, duration, how it ended, and the gap to the next pin.

    `events` has ts, account, stream, consumer, group_name, event ('pinned', 'unpinned',
    'deleted'), pinned_id, reason, source. Duplicates are dropped and order is by time, so
    redelivered or out-of-order events do not matter. A pin ends at the next event of its
    consumer: an unpin (its reason, or 'inferred' when no advisory said), another pin with no
    unpin seen ('inferred'), the consumer's deletion ('consumer deleted'), or nothing yet
    ('still pinned', ending at `as_of`). An unpin whose pin predates collection becomes a
    session with an unknown start, so the unpin still counts.
    """
    key = keys(events)
    event_order = F.when(F.col("event") == "deleted", 0).when(F.col("event") == "unpinned", 1).otherwise(2)
    # Ties broken on every column, so a rerun orders equal timestamps the same way.
    by_time = Window.partitionBy(*key).orderBy("ts", "event_order", F.col("pinned_id").asc_nulls_first(),
                                                    F.col("source").asc_nulls_first(), F.col("reason").asc_nulls_first())
    ordered = (
        events.select("ts", *key, "group_name", "event", "pinned_id", "reason", "source")
        .dropDuplicates(["ts", *key, "event", "pinned_id", "reason", "source"])
        .withColumn("event_order", event_order)
        .select(
            "*",
            F.lag("event").over(by_time).alias("prev_event"),
            F.lead("event").over(by_time).alias("next_event"),
            F.lead("ts").over(by_time).alias("next_ts"),
            F.lead("reason").over(by_time).alias("next_reason"),
            F.lead("source").over(by_time).alias("next_source"),
        )
    )
    end_reason = (
        F.when(F.col("next_event").isNull(), F.lit("still pinned"))
        .when(F.col("next_event") == "deleted", F.lit("consumer deleted"))
        .when((F.col("next_event") == "unpinned") & (F.col("next_source") == "inferred"), F.lit("inferred"))
        .when(F.col("next_event") == "unpinned", F.coalesce(F.col("next_reason"), F.lit("unknown")))
        .otherwise(F.lit("inferred"))
    )
    pins = ordered.where(F.col("event") == "pinned").select(
        *key, "group_name", "pinned_id", F.col("ts").alias("start_ts"),
        F.coalesce(F.col("next_ts"), F.to_timestamp(F.lit(as_of))).alias("end_ts"),
        end_reason.alias("end_reason"))
    orphans = ordered.where(
        (F.col("event") == "unpinned") & (F.col("prev_event").isNull() | (F.col("prev_event") != "pinned"))
    ).select(*key, "group_name", F.lit(None).cast("string").alias("pinned_id"),
             F.lit(None).cast("timestamp").alias("start_ts"), F.col("ts").alias("end_ts"),
             F.coalesce(F.when(F.col("source") == "inferred", F.lit("inferred")), F.col("reason"),
                        F.lit("unknown")).alias("end_reason"))
    sessions = pins.unionByName(orphans)
    next_pin = Window.partitionBy(*key).orderBy(F.col("end_ts"), F.col("start_ts").asc_nulls_first(),
                                                     "end_reason", F.col("pinned_id").asc_nulls_first())
    return sessions.select(
        *key, "group_name", "pinned_id", "start_ts", "end_ts",
        _seconds(F.col("end_ts"), F.col("start_ts")).alias("duration_seconds"),
        "end_reason",
        F.when(F.lead("start_ts").over(next_pin).isNotNull(),  # greatest() would turn NULL into 0
               F.greatest(_seconds(F.lead("start_ts").over(next_pin), F.col("end_ts")), F.lit(0.0))).alias("gap_seconds"),
    )


GAP_SCHEMA = T.StructType([
    T.StructField("from_ts", T.TimestampType()), T.StructField("to_ts", T.TimestampType()),
    T.StructField("detected_at", T.TimestampType()),
])


def mark_gap_spans(sessions: DataFrame, gaps: DataFrame) -> DataFrame:
    """Pin sessions with `spans_gap`: true when the session overlaps a gap in the advisory record
    (capture_gaps: from_ts..to_ts, an open end taken as when it was found), so its end, or a
    switch inside it, may be missing. A session with an unknown start reaches back to any gap
    before its end. Gaps are few: broadcast, joined semi and anti so every session stays once."""
    per_cluster = "cluster" in sessions.columns and "cluster" in gaps.columns  # a gap is its own cluster's
    g = F.broadcast(gaps.select(
        F.coalesce("from_ts", "detected_at").alias("gap_from"),
        F.coalesce("to_ts", "detected_at").alias("gap_to"),
        *([F.col("cluster").alias("gap_cluster")] if per_cluster else [])))
    overlaps = (F.col("gap_from") <= F.col("end_ts")) & (
        F.col("start_ts").isNull() | (F.col("gap_to") >= F.col("start_ts")))
    if per_cluster:
        overlaps = overlaps & (F.col("gap_cluster") == F.col("cluster"))
    columns = sessions.columns
    spanning = sessions.join(g, overlaps, how="left_semi").select(*columns, F.lit(True).alias("spans_gap"))
    clean = sessions.join(g, overlaps, how="left_anti").select(*columns, F.lit(False).alias("spans_gap"))
    return spanning.unionByName(clean)


def _delta(col: str, by_time: WindowSpec) -> Column:
    """Increase since the previous sample; NULL across a counter reset (a recreated consumer)."""
    d = F.col(col) - F.lag(col).over(by_time)
    return F.when(d >= 0, d)


AGE_COLUMNS = ("oldest_unacked_age_seconds", "oldest_undelivered_age_seconds")
ACTIVITY_COLUMNS = ("delivered_last_active", "ack_floor_last_active")


def _ages(samples: DataFrame) -> list[Column]:
    """The age columns; samples from before time lag was collected have none (no age)."""
    return [F.col(c) if c in samples.columns else F.lit(None).cast("double").alias(c) for c in AGE_COLUMNS]


def rollups(samples: DataFrame, limits: DataFrame, granularity: str, saturation_ratio: float) -> DataFrame:
    """Per consumer and bucket ('1m' or '1h'): min, mean, max and p95 of the gauges; delivery,
    ack and redelivery rates from sequence deltas; the fraction of samples saturated; the
    largest age of the oldest unacknowledged and undelivered message."""
    key = keys(samples)
    unit = {"1m": "minute", "1h": "hour"}[granularity]
    by_time = Window.partitionBy(*key).orderBy("ts")
    stepped = samples.join(limits.select(*key, "max_ack_pending", "filtered"), on=key, how="left").select(
        *key, "ts", "num_pending", "num_ack_pending", "num_waiting", "max_ack_pending", "filtered",
        *_ages(samples), F.date_trunc(unit, "ts").alias("bucket"),
        _delta("delivered_consumer_seq", by_time).alias("d_delivered"),
        _delta("delivered_stream_seq", by_time).alias("d_stream"),
        _delta("ack_floor_consumer_seq", by_time).alias("d_acked"),
        _seconds(F.col("ts"), F.lag("ts").over(by_time)).alias("d_seconds"),
    )
    # A step where any sequence goes backwards (a recreated consumer) counts for nothing; the
    # dashboard's per-sample rates (dashboard/data.rates) follow the same rule.
    valid = (F.col("d_delivered").isNotNull() & F.col("d_stream").isNotNull() & F.col("d_acked").isNotNull()
             & (F.col("d_seconds") > 0))
    redelivered = F.when(F.coalesce(F.col("filtered"), F.lit(False)), F.lit(None)).otherwise(
        F.greatest(F.col("d_delivered") - F.col("d_stream"), F.lit(0)))
    saturated = F.when((F.col("max_ack_pending") > 0)
                       & (F.col("num_ack_pending") >= saturation_ratio * F.col("max_ack_pending")), 1.0).otherwise(0.0)
    seconds = F.sum(F.when(valid, F.col("d_seconds")))

    def gauge(col: str, name: str) -> list[Column]:
        return [F.min(col).alias(f"{name}_min"), F.mean(col).alias(f"{name}_mean"), F.max(col).alias(f"{name}_max"),
                F.percentile_approx(col, 0.95, 1000).cast("double").alias(f"{name}_p95")]

    return (
        stepped.groupBy(*key, "bucket")
        .agg(F.count("*").alias("samples"), *gauge("num_pending", "pending"), *gauge("num_ack_pending", "ack_pending"),
             *gauge("num_waiting", "waiting"),
             (F.sum(F.when(valid, F.col("d_delivered"))) / seconds).alias("delivered_per_second"),
             (F.sum(F.when(valid, F.col("d_acked"))) / seconds).alias("acked_per_second"),
             (F.sum(F.when(valid, redelivered)) / seconds).alias("redelivered_per_second"),
             F.mean(saturated).alias("saturated_fraction"),
             F.max("oldest_unacked_age_seconds").alias("oldest_unacked_age_max_seconds"),
             F.max("oldest_undelivered_age_seconds").alias("oldest_undelivered_age_max_seconds"))
        .select(F.lit(granularity).alias("granularity"), "bucket", *key, "samples",
                "pending_min", "pending_mean", "pending_max", "pending_p95",
                "ack_pending_min", "ack_pending_mean", "ack_pending_max", "ack_pending_p95",
                "waiting_min", "waiting_mean", "waiting_max", "waiting_p95",
                "delivered_per_second", "acked_per_second", "redelivered_per_second", "saturated_fraction",
                "oldest_unacked_age_max_seconds", "oldest_undelivered_age_max_seconds")
    )


VERDICT_SCHEMA = T.StructType([
    T.StructField("ts", T.TimestampType()), T.StructField("account", T.StringType()),
    T.StructField("stream", T.StringType()), T.StructField("consumer", T.StringType()),
    T.StructField("verdict", T.StringType()), T.StructField("reasons", T.StringType()),
])


def verdict_history(samples: DataFrame, limits: DataFrame, counts: DataFrame, thresholds: Thresholds) -> DataFrame:
    """The health rules over consecutive windows: one verdict per consumer per window, `ts`
    being the window's start."""
    key = keys(samples)
    schema = T.StructType([T.StructField("cluster", T.StringType()), *VERDICT_SCHEMA.fields]) if "cluster" in key \
        else VERDICT_SCHEMA
    window_s = int(thresholds.health_window)
    start = F.timestamp_seconds(F.floor(F.unix_timestamp("ts") / window_s) * window_s)
    # An older export has fewer: unknown (its consumers' own thresholds: the settings).
    limit_cols = [c for c in (*LIMIT_COLUMNS, *THRESHOLD_COLUMNS) if c in limits.columns]
    windowed_counts = (counts.withColumn("window_start", F.timestamp_seconds(
        F.floor(F.unix_timestamp("minute") / window_s) * window_s))
        .groupBy(*key, "window_start")
        .agg(F.sum("pin_switches").alias("pin_switches"), F.sum("nak_count").alias("nak_count"),
             F.sum("max_deliveries_count").alias("max_deliveries_count")))
    joined = (samples.withColumn("window_start", start)
              .join(limits.select(*key, *limit_cols), on=key, how="left")
              .join(windowed_counts, on=[*key, "window_start"], how="left"))

    def judge(pdf: pd.DataFrame) -> pd.DataFrame:
        first = pdf.iloc[0]
        lim = pd.DataFrame([{**{k: first[k] for k in CONSUMER}, **{k: first[k] for k in limit_cols}}])
        cnt = pd.DataFrame([{**{k: first[k] for k in CONSUMER},
                             "pin_switches": first["pin_switches"], "nak_count": first["nak_count"],
                             "max_deliveries_count": first["max_deliveries_count"]}])
        out = evaluate(pdf, lim, thresholds, cnt)
        return pd.DataFrame({
            **({"cluster": [first["cluster"]] * len(out)} if "cluster" in key else {}),
            "ts": [pd.Timestamp(first["window_start"])] * len(out), "account": out["account"], "stream": out["stream"], "consumer": out["consumer"],
            "verdict": out["verdict"],
            "reasons": [json.dumps(f, default=str) for f in out["findings"]],
        })

    return joined.groupBy(*key, "window_start").applyInPandas(judge, schema=schema)
