"""Window features: what the health rules look at, computed for many consumers at once.

The rules judge each consumer's samples in a window reduced to a handful of numbers (first, last,
min, trend, and when each condition began: health/onsets.py). They are computed in one place,
health/window.py, over arrays: the collector keeps its window there between cycles, and
`window_features` loads any frame of samples into one (the pipeline's window groups, the tests'
sequences), so the pipeline and the collector judge from the same computation.

`sql/queries/window_features.sql` computes the sample-reduction features a second, independent
way (DuckDB's window functions over the same samples); nothing judges with it:
tests/test_window_state.py holds health/window.py equal to it.
"""

from __future__ import annotations

from typing import TypeAlias

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa

from jetwatch import sql
from jetwatch.health.window import WindowState, feature_columns, feature_frame

KEY = ["account", "stream", "consumer"]

SAMPLE_FIELDS = KEY + [
    "ts", "created", "num_pending", "num_ack_pending", "num_waiting", "num_redelivered",
    "delivered_consumer_seq", "delivered_stream_seq", "ack_floor_stream_seq", "paused", "pinned_id",
    "oldest_unacked_age_seconds", "delivered_last_active", "ack_floor_last_active",
]

Frame: TypeAlias = pd.DataFrame | pa.Table
AGE = "oldest_unacked_age_seconds"


def window_features(samples: Frame) -> pd.DataFrame:
    """One row of features per consumer from all its samples in `samples` (one window). Samples
    from before time lag or the server's activity times were collected have none of them."""
    frame = samples.to_pandas() if isinstance(samples, pa.Table) else samples
    if frame.empty:
        return feature_frame({})
    state = WindowState(window=np.inf)
    state.seed(frame)
    return feature_frame(feature_columns(state, np.arange(len(state.keys)), -np.inf))


def window_features_sql(samples: Frame) -> pd.DataFrame:
    """window_features.sql over `samples` in an in-process DuckDB: the independent computation of
    the sample-reduction features (not the onsets) that the tests hold window.py to."""
    if AGE not in (samples.column_names if isinstance(samples, pa.Table) else samples.columns):
        samples = (samples.append_column(AGE, pa.nulls(samples.num_rows, pa.float64())) if isinstance(samples, pa.Table)
                   else samples.assign(**{AGE: pd.Series([float("nan")] * len(samples), index=samples.index, dtype=float)}))
    con = duckdb.connect(config={"threads": 2})
    try:
        con.register("window_samples", samples)
        return con.execute(sql.query("window_features")).df()
    finally:
        con.close()
