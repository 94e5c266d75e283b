"""The row a captured advisory is kept as: what the collector stores in `advisories` and hands to
the counts behind /metrics, the dropped-message reader and the pin holders' exit checks.

A TypedDict, not a struct: the store takes rows as dicts by column name, and a batch goes to it
unchanged. Its texts are storable (core/text.py) and within the collector's bounds; `raw` is the
advisory's JSON object as it came.
"""

from __future__ import annotations

from typing import TypedDict

from jetwatch.core.jsadvisory import UNPINNED


class AdvisoryRow(TypedDict):
    id: str
    ts: str  # the advisory's time, RFC 3339
    received_at: str
    kind: str  # the type without its prefix (core/jsadvisory.py `Advisory.kind`)
    subject: str
    account: str  # the capturing connection's account
    stream: str | None
    consumer: str | None
    group_name: str | None
    pinned_id: str | None
    reason: str | None
    raw: str


def timed_out(row: AdvisoryRow) -> bool:
    """Whether the advisory is a pin lost to priority_timeout: its holder stopped pulling, or left."""
    return row["kind"] == UNPINNED and row["reason"] == "timeout"
