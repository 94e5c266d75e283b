"""Pipeline: 1-minute rollups of a large synthetic sample history on Spark (local[2]), rows per
second, next to the same aggregation done by DuckDB over the same Parquet in the same run."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import duckdb

from jetwatch.pipeline.transforms import rollups

GENERATE = """
COPY (
    SELECT '$G' AS account, 'S' || ((n % $consumers) // 100) AS stream, 'c' || (n % $consumers) AS consumer,
           TIMESTAMPTZ '2026-11-01 00:00:00+00' + to_seconds(5 * (n // $consumers)) AS ts,
           NULL::TIMESTAMPTZ AS created, (n % 97)::BIGINT AS num_pending, (n % 5)::BIGINT AS num_ack_pending,
           1::BIGINT AS num_waiting, 0::BIGINT AS num_redelivered, (n // $consumers * 3)::BIGINT AS delivered_consumer_seq,
           (n // $consumers * 3)::BIGINT AS delivered_stream_seq, (n // $consumers * 3)::BIGINT AS ack_floor_consumer_seq,
           (n // $consumers * 3)::BIGINT AS ack_floor_stream_seq, false AS paused, NULL::VARCHAR AS pinned_id
    FROM range($rows) t(n)
) TO '{path}' (FORMAT PARQUET)
"""
DUCKDB_ROLLUP = """
SELECT account, stream, consumer, date_trunc('minute', ts) AS bucket, count(*) AS samples,
       min(num_pending), avg(num_pending), max(num_pending), quantile_cont(num_pending, 0.95),
       min(num_ack_pending), avg(num_ack_pending), max(num_ack_pending), quantile_cont(num_ack_pending, 0.95),
       min(num_waiting), avg(num_waiting), max(num_waiting), quantile_cont(num_waiting, 0.95),
       sum(d_delivered) / sum(d_seconds), sum(d_acked) / sum(d_seconds)
FROM (
    SELECT *, delivered_consumer_seq - lag(delivered_consumer_seq) OVER w AS d_delivered,
           ack_floor_consumer_seq - lag(ack_floor_consumer_seq) OVER w AS d_acked,
           epoch(ts) - epoch(lag(ts) OVER w) AS d_seconds
    FROM read_parquet('{path}')
    WINDOW w AS (PARTITION BY account, stream, consumer ORDER BY ts)
)
GROUP BY ALL
"""


def main(rows: int, consumers: int) -> None:
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
        t = time.perf_counter()
        n = duckdb.sql(DUCKDB_ROLLUP.format(path=path)).to_arrow_table().num_rows
        duck_s = time.perf_counter() - t
        print(f"input: {rows:,} samples of {consumers:,} consumers; {n:,} one-minute buckets out")
        print(f"Spark local[2] rollups: {spark_s:.2f}s = {rows / spark_s:,.0f} rows/s")
        print(f"DuckDB, same aggregation over the same Parquet: {duck_s:.2f}s = {rows / duck_s:,.0f} rows/s")
        print(f"ratio: DuckDB is {spark_s / duck_s:.1f}x faster on one machine; Spark's case is the cluster")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=5_000_000)
    p.add_argument("--consumers", type=int, default=1_000)
    a = p.parse_args()
    main(a.rows, a.consumers)
