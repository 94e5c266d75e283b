"""Export from the stores to Parquet: the pipeline's input.

Raw samples go to a persistent archive partitioned by date, hour and cluster (a rerun replaces
exactly the partitions of its window and cluster, never another cluster's); pin events, limits and
event counts are small and written whole for each run, every store's rows in one file. Every
exported row carries its store's cluster (store/clusters.py): the `cluster` partition of the
samples, a `cluster` column in the rest.
"""

from __future__ import annotations

import datetime as dt
import shutil
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from jetwatch.health import thresholds
from jetwatch.store.clusters import identity
from jetwatch.store.database import Store

SAMPLE_PARTITIONING = ds.partitioning(pa.schema([("date", pa.string()), ("hour", pa.int32()),
                                                 ("cluster", pa.string())]), flavor="hive")


def _arrow(store: Store, name: str, params: dict) -> pa.Table:
    return store.queries([(name, params)], arrow=(name,))[0]


def _limits(store: Store, name: str, params: dict) -> pa.Table:
    """The latest limits, each consumer's own thresholds beside them (`threshold_<name>`, read from
    its metadata as the collector reads it; null: the setting holds) instead of the metadata."""
    table = _arrow(store, name, params)
    metadata = table.column("monitor_metadata").to_pylist()
    table = table.drop_columns(["monitor_metadata"])
    for column, values in thresholds.input_columns(metadata).items():
        table = table.append_column(column, pa.array(values, pa.float64()))
    return table


def _with_cluster(table: pa.Table, cluster: str) -> pa.Table:
    return table.append_column("cluster", pa.array([cluster] * table.num_rows, pa.string()))


def _write_one(table: pa.Table, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("*.parquet"):
        old.unlink()
    pq.write_table(table, directory / "part-0.parquet")


def prune_archive(archive: Path, cutoff: dt.datetime) -> int:
    """Delete the archive's hourly partitions that ended before `cutoff` (the raw retention: their
    rollups are in the store); returns how many went. The archive otherwise grows forever."""
    gone = 0
    for legacy in (archive / "samples").glob("date=*/hour=*/*.parquet"):
        legacy.unlink()  # written before clusters (no cluster level): every run re-exports its window
    for part in sorted((archive / "samples").glob("date=*/hour=*")):
        try:
            day = dt.datetime.strptime(part.parent.name.removeprefix("date="), "%Y-%m-%d")
            start = day.replace(tzinfo=dt.UTC) + dt.timedelta(hours=int(part.name.removeprefix("hour=")))
        except ValueError:
            continue  # not ours
        if start + dt.timedelta(hours=1) <= cutoff:
            shutil.rmtree(part)
            gone += 1
    for day_dir in (archive / "samples").glob("date=*"):
        if day_dir.is_dir() and not any(day_dir.iterdir()):
            day_dir.rmdir()
    return gone


def export(stores: Store | Sequence[tuple[str, Store]], archive: Path, run_input: Path, since: dt.datetime,
           until: dt.datetime) -> int:
    """Write the window's samples of every store into the archive and the run's other inputs (every
    store's rows together, each with its cluster); returns sample rows. `stores` is one store (its
    own cluster) or (cluster, store) pairs."""
    pairs = [(identity(stores).cluster, stores)] if isinstance(stores, Store) else list(stores)
    window = {"since": since, "until": until}
    rows = 0
    for cluster, store in pairs:
        samples = _arrow(store, "export_samples", window)
        rows += samples.num_rows
        if samples.num_rows:
            ds.write_dataset(_with_cluster(samples, cluster), archive / "samples", format="parquet",
                             partitioning=SAMPLE_PARTITIONING, existing_data_behavior="delete_matching",
                             basename_template="part-{i}.parquet")
        else:
            # An empty window still needs a schema for Spark to read: one empty file in its own partition.
            empty = archive / "samples" / f"date={since:%Y-%m-%d}" / f"hour={since.hour}" / f"cluster={cluster}"
            if not empty.exists():
                _write_one(samples.drop(["date", "hour"]), empty)
    for name, query, params in (("pin_events", "export_pin_events", {}), ("limits", "export_limits", {}),
                                ("capture_gaps", "export_capture_gaps", {}),
                                ("event_counts", "export_event_counts", window)):
        read = _limits if name == "limits" else _arrow
        tables = [_with_cluster(read(store, query, params), cluster) for cluster, store in pairs]
        _write_one(pa.concat_tables(tables, promote_options="default"), run_input / name)
    return rows
