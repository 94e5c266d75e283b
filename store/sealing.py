"""Sealing: the oldest span of raw samples moved, sorted by consumer, to where a read of one
consumer can skip the others.

The collector appends every cycle by time, so each of `samples_recent`'s row groups holds every
consumer, and one consumer's hour means reading that hour of the whole fleet (at 100,000 consumers,
most of a 100-million-sample store). `samples_sealed` holds the same rows ordered by consumer number
and time, a span at a time, so its zone maps skip all but that consumer's few row groups. The view
`samples` is both tables; a move is one transaction, so no reader ever sees a row twice or not at all.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass

import duckdb

from jetwatch import sql
from jetwatch.store.database import SEALED_ROW_GROUP_ROWS, Store, StoreError, one_row

# Most samples sorted at once: a pass sorts its span in parts of its consumers' numbers, since
# DuckDB holds what it sorts in memory: a whole large span sorted at once would take hundreds of
# MiB beside the collector; parts bound that for a little more time.
SORT_ROWS = 750_000
NUMBERS_END = 2**32  # past every consumer number (UINTEGER)


@dataclass(frozen=True)
class Sealed:
    rows: int                      # samples moved by this pass
    until: dt.datetime | None      # they were every sample before this time (None: nothing was due)
    next_in: dt.timedelta          # until the next span is due, at this rate of samples (0: due now)

    @property
    def behind(self) -> bool:
        """Another whole span waits already: an upgraded store, or a collector that could not seal."""
        return self.next_in <= dt.timedelta(0)


def _count(con: duckdb.DuckDBPyConnection, name: str, params: dict[str, object]) -> int:
    row = con.execute(sql.query(name), params).fetchone()
    return int(row[0]) if row else 0


def _bounds(con: duckdb.DuckDBPyConnection, params: dict[str, object], due: int) -> list[int]:
    """Consumer numbers where the parts of a pass begin, and one past the last number."""
    parts = max(1, math.ceil(due / SORT_ROWS))
    inner: list[int] = []
    if parts > 1:
        fractions = [k / parts for k in range(1, parts)]
        inner = one_row(con.execute(sql.query("seal_bounds"), {**params, "fractions": fractions}))[0]
    return [0, *inner, NUMBERS_END]


def seal(con: duckdb.DuckDBPyConnection, span: dt.timedelta) -> Sealed:
    """Seal the oldest `span` of unsealed cycles once they span more than that, in the caller's
    transaction. Judged on the collector's time of each cycle (`sampled_at`), never the servers'
    clocks: one server minutes ahead or behind would keep every pass due, and each cycle would
    seal a few rows. One clock on both sides of the comparison, so a jump of it costs one odd pass."""
    oldest, newest = one_row(con.execute(sql.query("seal_oldest")))
    if oldest is None:
        return Sealed(0, None, span)
    if newest - oldest < span:
        return Sealed(0, None, span - (newest - oldest))
    until = oldest + span
    params = {"until": until}
    con.execute(sql.query("seal_consumer_ids"), params)
    bounds = _bounds(con, params, _count(con, "seal_due", params))
    moved = sum(_count(con, "seal_samples", {**params, "lo": lo, "hi": hi}) for lo, hi in zip(bounds, bounds[1:]))
    removed = _count(con, "seal_delete_recent", params)
    if moved != removed:  # a consumer without a number would be lost from the view: refuse the move
        raise StoreError(f"Sealing the samples before {until.isoformat()} copied {moved} rows but would remove "
                         f"{removed}: nothing was moved. Report this with the message above.")
    return Sealed(moved, until, max(dt.timedelta(0), span - (newest - until)))


def seal_pass(store: Store, span: dt.timedelta) -> Sealed:
    """One sealing pass in a transaction of its own, its rows in row groups of DuckDB's own size
    (fewer row groups for a consumer's read to skip), not the collector's smaller ones."""
    return store.write(lambda con: seal(con, span), row_group_rows=SEALED_ROW_GROUP_ROWS)
