"""Window features: what the health rules look at, computed for many consumers at once.

The rules judge trends over a window, not single readings. Each consumer's samples in a window
are reduced to a handful of numbers (first, last, min, slope, ...) by one SQL query,
`sql/queries/window_features.sql`. Here it runs in an in-process DuckDB over whatever frame is
given (the pipeline's window groups, the tests' sequences); the dashboard runs the same query
inside the store, next to the samples, and judges its result with `evaluate_features`.
"""

from __future__ import annotations

from typing import Union

import duckdb
import pandas as pd
import pyarrow as pa

from jetwatch import sql

KEY = ["account", "stream", "consumer"]

SAMPLE_FIELDS = KEY + [
    "ts", "created", "num_pending", "num_ack_pending", "num_waiting", "num_redelivered",
    "delivered_consumer_seq", "delivered_stream_seq", "ack_floor_stream_seq", "paused", "pinned_id",
    "oldest_unacked_age_seconds",
]

Frame = Union[pd.DataFrame, pa.Table]
AGE = "oldest_unacked_age_seconds"


def window_features(samples: Frame) -> pd.DataFrame:
    """One row of features per consumer from its samples in one window. Samples from before
    time lag was collected (older Parquet, crafted sequences) have no age column: no age."""
    if AGE not in (samples.column_names if isinstance(samples, pa.Table) else samples.columns):
        samples = (samples.append_column(AGE, pa.nulls(samples.num_rows, pa.float64())) if isinstance(samples, pa.Table)
                   else samples.assign(**{AGE: pd.Series([float("nan")] * len(samples), index=samples.index, dtype=float)}))
    con = duckdb.connect(config={"threads": 2})
    try:
        con.register("window_samples", samples)
        return con.execute(sql.query("window_features")).df()
    finally:
        con.close()
