"""Pipeline: 1-minute rollups of a large synthetic sample history on Spark (local[2]), rows per
second, next to the same rollup (every column, the same rules, written to Parquet) done by DuckDB
over the same Parquet in the same run, with a check that both produced the same output."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import duckdb

from bench.machine import print_header
from jetwatch.pipeline.transforms import rollups

GENERATE = """
COPY (
    SELECT '$G' AS account, 'S' || ((n % $consumers) // 100) AS stream, 'c' || (n % $consumers) AS consumer,
           TIMESTAMPTZ '2026-11-01 00:00:00+00' + to_seconds(5 * (n // $consumers)) AS ts,
           NULL::TIMESTAMPTZ AS created, (n % 97)::BIGINT AS num_pending, (n % 5)::BIGINT AS num_ack_pending,
           1::BIGINT AS num_waiting, 0::BIGINT AS num_redelivered, (n // $consumers * 3)::BIGINT AS delivered_consumer_seq,
           (n // $consumers * 3)::BIGINT AS delivered_stream_seq, (n // $consumers * 3)::BIGINT AS ack_floor_consumer_seq,
           (n // $consumers * 3)::BIGINT AS ack_floor_stream_seq, false AS paused, NULL::VARCHAR AS pinned_id,
           (n % 600)::DOUBLE AS oldest_unacked_age_seconds, (n % 300)::DOUBLE AS oldest_undelivered_age_seconds
    FROM range($rows) t(n)
) TO '{path}' (FORMAT PARQUET)
"""
# The same rollup as pipeline/transforms.rollups, column for column: the limits joined in,
# deltas NULL across a counter reset, a step counted only when every sequence moved forward,
# redeliveries (none for filtered consumers), the saturated fraction, the largest ages; written
# to Parquet as the Spark job writes its output.
DUCKDB_ROLLUP = """
COPY (
    WITH stepped AS (
        SELECT s.account, s.stream, s.consumer, ts, num_pending, num_ack_pending, num_waiting,
               l.max_ack_pending, l.filtered, oldest_unacked_age_seconds, oldest_undelivered_age_seconds,
               date_trunc('minute', ts) AS bucket,
               CASE WHEN d1 >= 0 THEN d1 END AS d_delivered, CASE WHEN d2 >= 0 THEN d2 END AS d_stream,
               CASE WHEN d3 >= 0 THEN d3 END AS d_acked, d_seconds
        FROM (
            SELECT *, delivered_consumer_seq - lag(delivered_consumer_seq) OVER w AS d1,
                   delivered_stream_seq - lag(delivered_stream_seq) OVER w AS d2,
                   ack_floor_consumer_seq - lag(ack_floor_consumer_seq) OVER w AS d3,
                   epoch(ts) - epoch(lag(ts) OVER w) AS d_seconds
            FROM read_parquet('{path}')
            WINDOW w AS (PARTITION BY account, stream, consumer ORDER BY ts)
        ) s LEFT JOIN limits l USING (account, stream, consumer)
    ), valid AS (
        SELECT *, d_delivered IS NOT NULL AND d_stream IS NOT NULL AND d_acked IS NOT NULL AND d_seconds > 0 AS ok
        FROM stepped
    )
    SELECT '1m' AS granularity, bucket, account, stream, consumer, count(*) AS samples,
           min(num_pending) AS pending_min, avg(num_pending) AS pending_mean, max(num_pending) AS pending_max,
           approx_quantile(num_pending, 0.95)::DOUBLE AS pending_p95,
           min(num_ack_pending) AS ack_pending_min, avg(num_ack_pending) AS ack_pending_mean,
           max(num_ack_pending) AS ack_pending_max, approx_quantile(num_ack_pending, 0.95)::DOUBLE AS ack_pending_p95,
           min(num_waiting) AS waiting_min, avg(num_waiting) AS waiting_mean, max(num_waiting) AS waiting_max,
           approx_quantile(num_waiting, 0.95)::DOUBLE AS waiting_p95,
           sum(d_delivered) FILTER (WHERE ok) / sum(d_seconds) FILTER (WHERE ok) AS delivered_per_second,
           sum(d_acked) FILTER (WHERE ok) / sum(d_seconds) FILTER (WHERE ok) AS acked_per_second,
           sum(CASE WHEN coalesce(filtered, false) THEN NULL ELSE greatest(d_delivered - d_stream, 0) END)
               FILTER (WHERE ok) / sum(d_seconds) FILTER (WHERE ok) AS redelivered_per_second,
           avg(CASE WHEN max_ack_pending > 0 AND num_ack_pending >= $ratio * max_ack_pending THEN 1.0 ELSE 0.0 END)
               AS saturated_fraction,
           max(oldest_unacked_age_seconds) AS oldest_unacked_age_max_seconds,
           max(oldest_undelivered_age_seconds) AS oldest_undelivered_age_max_seconds
    FROM valid GROUP BY ALL
) TO '{out}' (FORMAT PARQUET)
"""
# What both sides must agree on (p95 is approximate on both, by different algorithms).
CHECK = """
SELECT count(*), sum(samples), round(sum(pending_mean), 3), round(sum(coalesce(delivered_per_second, 0)), 3),
       round(sum(coalesce(acked_per_second, 0)), 3), round(sum(saturated_fraction), 3)
FROM read_parquet('{path}')
"""


def main(rows: int, consumers: int) -> None:
    print_header()
    from pyspark.sql import SparkSession

    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "samples.parquet")
        # The bench's own static SQL with a temp path of its own: not a query of the product.
        duckdb.execute(GENERATE.format(path=path), {"rows": rows, "consumers": consumers})
        os.environ["PYSPARK_PYTHON"] = sys.executable
        spark = (SparkSession.builder.master("local[2]").appName("jetwatch-bench")
                 .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "4")
                 .config("spark.sql.session.timeZone", "UTC").config("spark.driver.memory", "2g").getOrCreate())
        try:
            limits = spark.createDataFrame([("$G", "S0", "c0", 1000, False)],
                                           "account string, stream string, consumer string, max_ack_pending long, filtered boolean")
            samples = spark.read.parquet(path)
            samples.count()  # warm: the JVM and the file listing, not the job, are excluded
            t = time.perf_counter()
            out = rollups(samples, limits, "1m", 0.9)
            out.write.mode("overwrite").parquet(str(Path(tmp) / "rollups"))
            spark_s = time.perf_counter() - t
        finally:
            spark.stop()
        con = duckdb.connect()
        con.execute("CREATE TABLE limits (account VARCHAR, stream VARCHAR, consumer VARCHAR, max_ack_pending BIGINT, "
                    "filtered BOOLEAN)")
        con.execute("INSERT INTO limits VALUES ('$G', 'S0', 'c0', 1000, false)")
        duck_out = str(Path(tmp) / "rollups.duckdb.parquet")
        t = time.perf_counter()
        con.execute(DUCKDB_ROLLUP.format(path=path, out=duck_out), {"ratio": 0.9})
        duck_s = time.perf_counter() - t
        spark_check = con.execute(CHECK.format(path=str(Path(tmp) / "rollups" / "*.parquet"))).fetchone()
        duck_check = con.execute(CHECK.format(path=duck_out)).fetchone()
        n = duck_check[0]
        print(f"input: {rows:,} samples of {consumers:,} consumers; {n:,} one-minute buckets out")
        print(f"same output (buckets, samples, sums of mean pending, rates, saturation): Spark {spark_check}, "
              f"DuckDB {duck_check}: {'equal' if spark_check == duck_check else 'DIFFERENT'}")
        print(f"Spark local[2] rollups (read, compute, write Parquet): {spark_s:.2f}s = {rows / spark_s:,.0f} rows/s")
        print(f"DuckDB, the same rollup over the same Parquet, written to Parquet: {duck_s:.2f}s = "
              f"{rows / duck_s:,.0f} rows/s")
        print(f"ratio: DuckDB is {spark_s / duck_s:.1f}x faster on one machine; Spark's case is the cluster")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=5_000_000)
    p.add_argument("--consumers", type=int, default=1_000)
    a = p.parse_args()
    main(a.rows, a.consumers)
