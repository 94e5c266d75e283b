"""UTC time, the only kind jetwatch stores or sends."""

from __future__ import annotations

import datetime as dt


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def rfc3339(t: dt.datetime) -> str:
    """As the server writes times: UTC with a Z."""
    return t.astimezone(dt.timezone.utc).isoformat().replace("+00:00", "Z")
