"""Load the job's output back into the store, replacing exactly the run's window.

The load is one transaction: a run that failed before it leaves the previous results in place,
and a rerun over the same window replaces, never duplicates.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from jetwatch import sql
from jetwatch.store.database import Store
from jetwatch.store.retention import Cutoffs, prune


def _dataset(path: Path) -> pa.Table:
    """A partitioned Parquet output as one table (partition columns dropped: the rows carry time)."""
    if not path.exists() or not any(path.rglob("*.parquet")):
        return pa.table({})
    table = ds.dataset(str(path), format="parquet", partitioning="hive").to_table()
    keep = [c for c in table.column_names if c not in ("date", "hour", "granularity")]
    table = table.select(keep)
    # Spark's timestamps are UTC instants (the job's session time zone is UTC); say so explicitly.
    fields = [pa.field(f.name, pa.timestamp("us", tz="UTC")) if pa.types.is_timestamp(f.type) else f
              for f in table.schema]
    return table.cast(pa.schema(fields))


def _with_granularity(table: pa.Table, granularity: str) -> pa.Table:
    return table.append_column("granularity", pa.array([granularity] * table.num_rows, pa.string()))


def _of_cluster(table: pa.Table, cluster: str | None) -> pa.Table:
    """The rows of one cluster's store (the store's tables have no cluster column: the file is the
    cluster); output without clusters is all one store's."""
    if cluster is None or "cluster" not in table.column_names:
        return table
    return table.filter(pc.equal(table["cluster"], cluster)).drop(["cluster"])


def load(store: Store, output: Path, since: dt.datetime, until: dt.datetime, retention: dict[str, dt.datetime],
         cluster: str | None = None) -> dict[str, int]:
    """Load the run's results of `cluster` (all of them with None) into `store`."""
    sessions = _of_cluster(_dataset(output / "pin_sessions"), cluster)
    rollup_parts = [_with_granularity(_of_cluster(_dataset(output / "rollups" / f"granularity={g}"), cluster), g)
                    for g in ("1m", "1h")]
    rollups = pa.concat_tables([t for t in rollup_parts if t.num_rows]) if any(t.num_rows for t in rollup_parts) else None
    verdicts = _of_cluster(_dataset(output / "verdict_history"), cluster)
    window: dict[str, Any] = {"since": since, "until": until}

    def tx(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
        con.execute(sql.query("replace_pin_sessions"))
        if sessions.num_rows:
            con.register("session_batch", sessions)
            con.execute(sql.query("insert_pin_sessions"))
        con.execute(sql.query("delete_rollups_window"), window)
        if rollups is not None:
            con.register("rollup_batch", rollups)
            con.execute(sql.query("insert_rollups"), window)
        con.execute(sql.query("delete_verdicts_window"), window)
        if verdicts.num_rows:
            con.register("verdict_batch", verdicts)
            con.execute(sql.query("insert_verdicts"), window)
        prune(con, Cutoffs(retention["samples"], retention["events"], retention["events"]))
        return {"pin_sessions": sessions.num_rows, "rollups": rollups.num_rows if rollups is not None else 0,
                "verdicts": verdicts.num_rows}

    return store.write(tx)
