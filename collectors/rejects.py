"""Rejected inputs, kept within a budget.

Every reject is worth a row until a flood makes it worthless: 3,000 junk messages would otherwise
be 3,000 rows of raw payload. Each origin (`advisory`, `consumer_state`) may store `per_minute`
rejects a minute, each raw payload cut to `raw_chars`; beyond that, rejects are only counted, and
one row per origin and minute says how many were dropped and for what reasons.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

REJECTS_PER_MINUTE = 50
RAW_CHARS = 4096
DROPPED_PREFIX = "dropped "  # the dropped-count rows' error starts with this


@dataclass
class _Window:
    start: dt.datetime
    kept: int = 0
    dropped: int = 0
    reasons: Counter[str] = field(default_factory=Counter)


@dataclass
class Admitted:
    """What to write for one batch of rejects: rows to insert, and the minute's dropped count
    (replacing the row written earlier for the same minute), if any were dropped."""

    rows: list[tuple[str, str, str]]
    dropped: dict[str, Any] | None = None


class RejectBudget:
    def __init__(self, per_minute: int = REJECTS_PER_MINUTE, raw_chars: int = RAW_CHARS):
        self.per_minute = per_minute
        self.raw_chars = raw_chars
        self._windows: dict[str, _Window] = {}

    def admit(self, origin: str, now: dt.datetime, rejects: Iterable[tuple[str, str, str]]) -> Admitted:
        """The rejects of this batch that fit the minute's budget, the rest counted."""
        minute = now.replace(second=0, microsecond=0)
        window = self._windows.get(origin)
        if window is None or window.start != minute:
            window = self._windows[origin] = _Window(minute)
        rows, dropped_now = [], 0
        for subject, error, raw in rejects:
            if window.kept < self.per_minute:
                window.kept += 1
                rows.append((subject, error, raw[:self.raw_chars]))
            else:
                window.dropped += 1
                dropped_now += 1
                window.reasons[error[:120]] += 1
        if not dropped_now:
            return Admitted(rows)
        summary = {"dropped": window.dropped, "limit_per_minute": self.per_minute,
                   "reasons": dict(window.reasons.most_common(10))}
        return Admitted(rows, {
            "ts": window.start, "origin": origin,
            "error": f"{DROPPED_PREFIX}{window.dropped} more rejects in this minute (over the limit of "
                     f"{self.per_minute} a minute); most common: {window.reasons.most_common(1)[0][0]}",
            "raw": json.dumps(summary)})
