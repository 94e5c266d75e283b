"""Export from the store to Parquet: the pipeline's input.

Raw samples go to a persistent archive partitioned by date and hour (a rerun replaces exactly the
partitions of its window); pin events, limits and event counts are small and written whole for
each run.
"""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from jetwatch.store.database import Store

SAMPLE_PARTITIONING = ds.partitioning(pa.schema([("date", pa.string()), ("hour", pa.int32())]), flavor="hive")


def _arrow(store: Store, name: str, params: dict) -> pa.Table:
    return store.queries([(name, params)], arrow=(name,))[0]


def _write_one(table: pa.Table, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("*.parquet"):
        old.unlink()
    pq.write_table(table, directory / "part-0.parquet")


def prune_archive(archive: Path, cutoff: dt.datetime) -> int:
    """Delete the archive's hourly partitions that ended before `cutoff` (the raw retention: their
    rollups are in the store); returns how many went. The archive otherwise grows forever."""
    gone = 0
    for part in sorted((archive / "samples").glob("date=*/hour=*")):
        try:
            day = dt.datetime.strptime(part.parent.name.removeprefix("date="), "%Y-%m-%d")
            start = day.replace(tzinfo=dt.timezone.utc) + dt.timedelta(hours=int(part.name.removeprefix("hour=")))
        except ValueError:
            continue  # not ours
        if start + dt.timedelta(hours=1) <= cutoff:
            shutil.rmtree(part)
            gone += 1
    for day_dir in (archive / "samples").glob("date=*"):
        if day_dir.is_dir() and not any(day_dir.iterdir()):
            day_dir.rmdir()
    return gone


def export(store: Store, archive: Path, run_input: Path, since: dt.datetime, until: dt.datetime) -> int:
    """Write the window's samples into the archive and the run's other inputs; returns sample rows."""
    window = {"since": since, "until": until}
    samples = _arrow(store, "export_samples", window)
    if samples.num_rows:
        ds.write_dataset(samples, archive / "samples", format="parquet", partitioning=SAMPLE_PARTITIONING,
                         existing_data_behavior="delete_matching", basename_template="part-{i}.parquet")
    else:
        # An empty window still needs a schema for Spark to read: one empty file in its own partition.
        empty = archive / "samples" / f"date={since:%Y-%m-%d}" / f"hour={since.hour}"
        if not empty.exists():
            _write_one(samples.drop(["date", "hour"]), empty)
    _write_one(_arrow(store, "export_pin_events", {}), run_input / "pin_events")
    _write_one(_arrow(store, "export_limits", {}), run_input / "limits")
    _write_one(_arrow(store, "export_capture_gaps", {}), run_input / "capture_gaps")
    _write_one(_arrow(store, "export_event_counts", window), run_input / "event_counts")
    return samples.num_rows
