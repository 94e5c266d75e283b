"""The Spark job: Parquet in, Parquet out. Reading and writing happen here and only here.

Run it with `spark-submit pipeline/job.py --input URI --output URI ...` on any master, or through
`jetwatch pipeline run` (which exports from the store, submits this job and loads the results).
The master is never set here: spark-submit's `--master` (default local[*]) decides.

Input layout (written by pipeline/export.py):
    --samples: date=YYYY-MM-DD/hour=H/cluster=C/*.parquet  raw samples (an archive; the job reads its window)
    --input:
    pin_events/*.parquet                       every pin, unpin and consumer deletion
    limits/*.parquet                           latest limits per consumer
    event_counts/*.parquet                     advisories per consumer and minute
    (every input row carries its cluster: several clusters' stores go through one run)
Output layout (read by pipeline/load.py), each row with its cluster:
    pin_sessions/, rollups/granularity=1m|1h/date=.../hour=.../, verdict_history/date=.../hour=.../
"""

from __future__ import annotations

import argparse
import json
import sys

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jetwatch.health.rules import Thresholds
from jetwatch.pipeline.transforms import (
    ACTIVITY_COLUMNS,
    AGE_COLUMNS,
    mark_gap_spans,
    pin_sessions,
    rollups,
    verdict_history,
)


def session() -> SparkSession:
    return (SparkSession.builder.appName("jetwatch-pipeline")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.sql.sources.partitionOverwriteMode", "dynamic")
            .getOrCreate())


def _read(spark: SparkSession, path: str) -> DataFrame:
    return spark.read.parquet(path)


def _read_samples(spark: SparkSession, path: str) -> DataFrame:
    """The samples archive; partitions written before time lag (or the server's activity times)
    were collected have no such columns: their schemas are merged, and an archive with none at all
    gets empty ones."""
    samples = spark.read.option("mergeSchema", "true").parquet(path)
    for column in AGE_COLUMNS:
        if column not in samples.columns:
            samples = samples.withColumn(column, F.lit(None).cast("double"))
    for column in ACTIVITY_COLUMNS:  # partitions from before the server's activity times were exported
        if column not in samples.columns:
            samples = samples.withColumn(column, F.lit(None).cast("timestamp"))
    if "cluster" in samples.columns:  # a partition column: a name such as "7" must stay a name
        samples = samples.withColumn("cluster", F.col("cluster").cast("string"))
    return samples


def run(spark: SparkSession, samples_uri: str, input_uri: str, output_uri: str, since: str, until: str,
        thresholds: Thresholds) -> dict[str, int]:
    lo, hi = F.to_timestamp(F.lit(since)), F.to_timestamp(F.lit(until))
    samples = (_read_samples(spark, samples_uri)
               .where((F.col("date") >= since[:10]) & (F.col("date") <= until[:10]))  # partition pruning
               .where((F.col("ts") >= lo) & (F.col("ts") < hi))
               .drop("date", "hour"))
    # Pins up to the run's end only: the export reads every event there is, and a pin after `until`
    # would be a session ending before it starts. The pages take what came after from the live tail.
    events = _read(spark, f"{input_uri}/pin_events").where(F.col("ts") <= hi)
    limits = _read(spark, f"{input_uri}/limits")
    counts = _read(spark, f"{input_uri}/event_counts")

    gaps = _read(spark, f"{input_uri}/capture_gaps")
    sessions = pin_sessions(events, until).transform(mark_gap_spans, gaps)
    sessions.coalesce(1).write.mode("overwrite").parquet(f"{output_uri}/pin_sessions")

    for granularity in ("1m", "1h"):
        (rollups(samples, limits, granularity, thresholds.saturation_ratio)
         .withColumn("date", F.date_format("bucket", "yyyy-MM-dd"))
         .withColumn("hour", F.hour("bucket"))
         .repartition("date", "hour")
         .write.mode("overwrite").partitionBy("date", "hour")
         .parquet(f"{output_uri}/rollups/granularity={granularity}"))

    (verdict_history(samples, limits, counts, thresholds)
     .withColumn("date", F.date_format("ts", "yyyy-MM-dd"))
     .withColumn("hour", F.hour("ts"))
     .repartition("date", "hour")
     .write.mode("overwrite").partitionBy("date", "hour").parquet(f"{output_uri}/verdict_history"))
    return {"samples": samples.count(), "pin_events": events.count()}


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, Thresholds]:
    p = argparse.ArgumentParser(description="jetwatch Spark job")
    p.add_argument("--samples", required=True, help="URI of the samples archive (file://, hdfs://, s3a://)")
    p.add_argument("--input", required=True, help="URI of this run's other inputs")
    p.add_argument("--output", required=True, help="URI to write results to")
    p.add_argument("--since", required=True, help="RFC 3339 start of the window (whole hours)")
    p.add_argument("--until", required=True, help="RFC 3339 end of the window: open pins end here")
    p.add_argument("--thresholds", default="{}",
                   help="JSON object of health settings by name (health_window, ...); missing ones take their defaults")
    a = p.parse_args(argv)
    return a, Thresholds(**json.loads(a.thresholds))


def main(argv: list[str] | None = None) -> int:
    a, th = parse_args(argv)
    spark = session()
    try:
        counts = run(spark, a.samples.rstrip("/"), a.input.rstrip("/"), a.output.rstrip("/"), a.since, a.until, th)
    finally:
        spark.stop()
    print(f"jetwatch pipeline: {counts['samples']} samples, {counts['pin_events']} pin events processed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
