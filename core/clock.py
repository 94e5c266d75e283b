"""UTC time, the only kind jetwatch stores or sends."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # Arrow only where a column is parsed: the CLI's quick commands never load it
    import pyarrow as pa


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def rfc3339(t: dt.datetime) -> str:
    """As the server writes times: UTC with a Z."""
    return t.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def _rfc3339_shape(text: str) -> bool:
    """Date, 'T' (or space), time, and a Z or ±HH:MM zone: the extended form Go writes (the
    basic and week forms that fromisoformat would also take are not RFC 3339). The lower-case
    't' and 'z' RFC 3339 allows are refused: Go never writes them and the store's cast does not
    read them, so one such value would fail the whole cycle's write, every retry, instead of
    its own entry."""
    return (len(text) >= 20 and text[4] == "-" and text[7] == "-" and text[10] in "T " and text[13] == ":"
            and (text[-1] == "Z" or (text[-6] in "+-" and text[-3] == ":")))


def parse_rfc3339(text: object) -> dt.datetime:
    """A server timestamp (RFC 3339, up to nanoseconds, as Go writes them) as an aware datetime.

    Checked here, in Python, so one bad value is rejected on its own instead of failing the
    store's cast of a whole batch. Raises ValueError saying what is wrong. (fromisoformat, in C,
    keeps this cheap: it runs for every time field of every consumer each cycle.)"""
    if not isinstance(text, str):
        raise ValueError(f"expected an RFC 3339 time string, got {type(text).__name__} {text!r:.60}")
    if not _rfc3339_shape(text):
        raise ValueError(f"not an RFC 3339 time: {text!r:.60}")
    try:
        return dt.datetime.fromisoformat(text[:-1] + "+00:00" if text[-1] == "Z" else text)
    except ValueError:
        raise ValueError(f"not a valid time: {text!r:.60}") from None


def parse_rfc3339_column(text: pa.Array) -> pa.TimestampArray | None:
    """A column of server times parsed by Arrow, in C++, to microseconds cut as parse_rfc3339 and
    the store's cast cut them; None when Arrow cannot take the whole column: a time it cannot read,
    or one outside its nanosecond range (before 1970 a cut fraction would round the other way;
    after 2262 the range ends). Callers parse such a column their slower way."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        nanos = pc.cast(text, pa.timestamp("ns", tz="UTC"))
    except pa.ArrowInvalid:
        return None
    earliest = pc.min(nanos.cast(pa.int64())).as_py()
    if earliest is not None and earliest < 0:
        return None
    return nanos.cast(pa.timestamp("us", tz="UTC"), safe=False)
