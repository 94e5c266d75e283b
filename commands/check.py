"""`jetwatch check`: one line and a monitoring-plugin exit status from the worst kept verdict.

Schedulers run it every minute, so it answers at once: it reads each store's kept verdicts with
DuckDB alone (`check_verdicts.sql`: the verdict, its level, when it was judged and the silence
beside it) and never loads pandas, numpy or the health rules' numerics; what a verdict means
comes from the verdict table (health/verdicts.py), whether a silence holds from health/silences.py,
whether a cluster's data is stale from health/freshness.py: the same facts `status` and the pages
read.
"""

from __future__ import annotations

import argparse
import datetime as dt
import fnmatch
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from jetwatch.core.clock import utcnow
from jetwatch.core.durations import duration
from jetwatch.core.settings import Settings
from jetwatch.health import freshness, silences
from jetwatch.health.verdicts import SEVERITY
from jetwatch.store import clusters
from jetwatch.store.database import StoreError

EXIT = {"OK": 0, "WARNING": 1, "CRITICAL": 2, "UNKNOWN": 3}
LEVEL_STATE = {"critical": "CRITICAL", "warning": "WARNING"}  # info, ok, unknown (COLLECTING): OK
# Worst over several stores, in the order aggregating plugins use (check_multi's default): a CRITICAL
# is never hidden behind another cluster's UNKNOWN, and an UNKNOWN is never hidden behind an OK.
WORST = ("OK", "UNKNOWN", "WARNING", "CRITICAL")
NO_VERDICTS = "no verdicts in the store yet (is `jetwatch collect` running?)"
FILTERS = (("account", "account", "accounts"), ("stream", "stream", "streams"), ("consumer", "consumer", "consumers"))
NAMES_SHOWN = 10  # a typo's answer lists this many of the names there are
NAMED = 5  # consumers named in the line, worst first

Row = dict[str, Any]  # one consumer as check_verdicts.sql gives it, with its `cluster`


@dataclass(frozen=True)
class Read:
    """One store's verdicts (all of them, unfiltered), or why they could not be read."""
    path: str
    cluster: str | None  # None: the store could not be read, so its cluster is not known either
    rows: list[Row]
    error: StoreError | None = None

    @property
    def name(self) -> str:
        return f"cluster {self.cluster}" if self.cluster is not None else f"the store {self.path}"


def _glob(value: Any, patterns: Sequence[str] | None) -> bool:
    return not patterns or any(fnmatch.fnmatchcase(str(value), p) for p in patterns)


def read_stores(settings: Settings, args: argparse.Namespace) -> list[Read]:
    """Every store of the fleet whose cluster --cluster keeps; a store that cannot be read is kept
    (with its error) whatever --cluster says, since its cluster is not known."""
    found = clusters.read_fleet(settings.dbs, settings.db, settings.lock_timeout,
                                lambda store, cluster: [{**r, "cluster": cluster} for r in store.rows("check_verdicts")],
                                lambda cluster: _glob(cluster, getattr(args, "clusters", None)))
    return [Read(r.path, r.cluster, r.value or [], r.error) for r in found]


def filtered(rows: list[Row], args: argparse.Namespace) -> list[Row]:
    """The rows --account, --stream, --consumer and --verdict keep."""
    wanted = {v.upper() for v in args.verdict or ()}
    return [r for r in rows if all(_glob(r[c], getattr(args, c, None)) for c, _, _ in FILTERS)
            and (not wanted or r["verdict"] in wanted)]


def worst_first(rows: list[Row]) -> list[Row]:
    """Worst verdict first, then account, stream, consumer and cluster."""
    return sorted(rows, key=lambda r: (SEVERITY.get(r["verdict"], len(SEVERITY)), r["account"] is None,
                                       r["account"] or "", r["stream"], r["consumer"], str(r["cluster"])))


def _silenced(r: Row, now: dt.datetime) -> bool:
    return silences.holds(r["verdict"], r["silenced_verdict"], r["silenced_until"], now)


def _newest(rows: list[Row]) -> dt.datetime | None:
    times = [r["judged_at"] for r in rows if r["judged_at"] is not None]
    return max(times) if times else None


def summary(rows: list[Row], now: dt.datetime, stale_after: float, named: bool = False) -> tuple[str, str]:
    """(state, one line) of (filtered, worst-first) verdicts; `named`: each consumer with its cluster."""
    if not rows:
        return "UNKNOWN", NO_VERDICTS
    newest = _newest(rows)
    age = None if newest is None else (now - newest).total_seconds()
    if age is not None and age > stale_after:
        return "UNKNOWN", f"the newest verdict is {duration(age)} old (collector stopped?); last known below"
    # A silenced verdict is counted and named, but does not raise the state: its alert is held back.
    held = [_silenced(r, now) for r in rows]
    states = ["OK" if h else LEVEL_STATE.get(r["level"], "OK") for r, h in zip(rows, held)]
    state = "CRITICAL" if "CRITICAL" in states else "WARNING" if "WARNING" in states else "OK"
    bad = [r for r, s in zip(rows, states) if s != "OK"]
    tally = Counter(r["verdict"] for r in rows)
    counts = ", ".join(f"{n} {v}" for v, n in sorted(tally.items(), key=lambda kv: (-kv[1], SEVERITY.get(kv[0], 99))))

    def who(r: Row) -> str:
        return f"{r['cluster'] + ': ' if named else ''}{r['stream']}/{r['consumer']}"

    worst = "; ".join(f"{who(r)} {r['verdict']}" for r in bad[:NAMED])
    more = f" (+{len(bad) - NAMED} more)" if len(bad) > NAMED else ""
    hushed = "; ".join([f"{who(r)} {silences.words(r, now)}" for r, h in zip(rows, held) if h][:NAMED])
    return state, (f"{len(rows)} consumers: {counts}" + (f" | {worst}{more}" if worst else "")
                   + (f" | silenced: {hushed}" if hushed else ""))


def unmatched(rows: list[Row], args: argparse.Namespace, where: str = "the store has") -> tuple[str, str]:
    """(state, words) for filters that leave nothing of `rows` (verdicts, unfiltered). A name filter
    that matches no name at all is UNKNOWN, said with the names there are ('no stream TYPO: the
    store has stream S'); consumers that are there but in none of the --verdict verdicts are OK."""
    for column, one, many in FILTERS:
        patterns = getattr(args, column, None)
        if patterns and not any(_glob(r[column], patterns) for r in rows):
            names = sorted({str(r[column]) for r in rows})
            more = f" (+{len(names) - NAMES_SHOWN} more)" if len(names) > NAMES_SHOWN else ""
            return "UNKNOWN", (f"no {one} {', '.join(patterns)}: {where} "
                               f"{one if len(names) == 1 else many} {', '.join(names[:NAMES_SHOWN])}{more}")
    if args.verdict:
        return "OK", f"no consumer asked for is {' or '.join(v.upper() for v in args.verdict)}"
    return "UNKNOWN", "no consumer matches the filters together"


def unseen(read: Read, args: argparse.Namespace, now: dt.datetime, stale_after: float) -> str | None:
    """Why one store leaves its cluster unseen (UNKNOWN), else None: it cannot be read, holds no
    verdicts, or the verdicts asked for (else any of its verdicts) are older than stale_after."""
    if read.error is not None:
        return f"{read.name} not read: {read.error}"
    if not read.rows:
        return f"{read.name}: {NO_VERDICTS}"
    judged = filtered(read.rows, args) or read.rows
    found = freshness.stale({str(read.cluster): _newest(judged)}, now, stale_after)
    return freshness.line(found[0]) if found else None


def fleet_summary(reads: list[Read], args: argparse.Namespace, now: dt.datetime,
                  stale_after: float) -> tuple[str, str]:
    """(state, one line) over every store: the worst of the verdicts of the stores seen, and
    UNKNOWN for each store not seen, said by name."""
    if not reads:
        return "UNKNOWN", f"no store of a cluster matching {', '.join(args.clusters)}"
    if len(reads) == 1:  # one store: exactly as before clusters
        r = reads[0]
        if r.error is not None:
            return "UNKNOWN", str(r.error)
        shown = worst_first(filtered(r.rows, args))
        if not shown and r.rows:
            return unmatched(r.rows, args)
        return summary(shown, now, stale_after)
    missing = {r.path: unseen(r, args, now, stale_after) for r in reads}
    seen = worst_first([row for r in reads if missing[r.path] is None for row in filtered(r.rows, args)])
    words = [w for w in missing.values() if w]
    if not seen:
        if words:
            return "UNKNOWN", "; ".join(words)
        every = [row for r in reads for row in r.rows]
        return unmatched(every, args, "the stores have") if every else (
            "UNKNOWN", "no verdicts match the filters in any store")
    state, line = summary(seen, now, stale_after, named=True)
    if words:
        state = max(state, "UNKNOWN", key=WORST.index)
        line += " | UNKNOWN: " + "; ".join(words)
    return state, line


def check(args: argparse.Namespace, settings: Settings) -> int:
    try:
        reads = read_stores(settings, args)
    except StoreError as exc:  # no store at all where --db/--dbs point, or two of one cluster
        print(f"JETWATCH UNKNOWN - {exc}")
        return EXIT["UNKNOWN"]
    state, line = fleet_summary(reads, args, utcnow(), settings.stale_after)
    print(f"JETWATCH {state} - {line}")
    return EXIT[state]
