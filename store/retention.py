"""What the store forgets, and when: one pass over everything that grows.

Run by the collector on a schedule (`--retention-every`), so a store without a pipeline (collect
and dashboard only, or a pipeline that is down) stays bounded too; the pipeline's load runs the
same pass. Raw samples are deleted only where hourly rollups cover them (see
sql/queries/retention_covered_hours.sql), so an outage of the pipeline never loses unrolled history.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass

import duckdb

from jetwatch import sql

# A collector's status row outlives its process by this much (one row per host:pid otherwise
# accumulates forever across restarts).
COLLECTOR_STATUS_KEEP = dt.timedelta(days=1)


@dataclass(frozen=True)
class Cutoffs:
    samples: dt.datetime  # raw samples (only where rollups cover them)
    events: dt.datetime   # advisories, dropped-message reads, inferred pins, pin holders, pull settings, rejects, verdict changes, configs, drains, runs, ended silences
    collectors: dt.datetime  # status rows of collectors silent since then

    @classmethod
    def at(cls, now: dt.datetime, raw_retention_s: float, event_retention_s: float) -> Cutoffs:
        return cls(now - dt.timedelta(seconds=raw_retention_s), now - dt.timedelta(seconds=event_retention_s),
                   now - COLLECTOR_STATUS_KEEP)


EVENT_TABLES = ("retention_events", "retention_rejects", "retention_inferred", "retention_verdict_changes",
                "retention_configs", "retention_drains", "retention_pipeline_runs", "retention_pin_confirmations",
                "retention_pin_holders", "retention_dropped_reads", "retention_silences", "retention_unpin_requests",
                "retention_pin_holder_exits", "retention_pull_settings")


def _deleted(con: duckdb.DuckDBPyConnection, name: str, params: Mapping[str, object]) -> int:
    row = con.execute(sql.query(name), params).fetchone()
    return int(row[0]) if row else 0


def prune(con: duckdb.DuckDBPyConnection, cutoffs: Cutoffs, collector: str = "") -> dict[str, int]:
    """Delete what is past retention, in the caller's transaction; returns rows deleted per query."""
    cut = {"cutoff": cutoffs.samples}
    con.execute(sql.query("retention_covered_hours"), cut)  # a temp table: gone with the connection
    sealed = _deleted(con, "retention_sealed_samples", cut)
    done = {"retention_samples": _deleted(con, "retention_samples", cut) + sealed,
            "retention_consumer_ids": _deleted(con, "retention_consumer_ids", {}) if sealed else 0}
    for name in EVENT_TABLES:
        done[name] = _deleted(con, name, {"cutoff": cutoffs.events})
    done["retention_collector_status"] = _deleted(con, "retention_collector_status",
                                                  {"cutoff": cutoffs.collectors, "self": collector})
    return done
