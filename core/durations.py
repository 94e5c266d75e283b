"""Durations in words, the one way every page, table, tile and command says them.

An age, an ETA, a pin's length or a wait reads '42 s', '4 min 12 s', '3 h 5 min', '2 d 4 h':
two units at most, so a cell or a tile stays short, and never a bare number of seconds whose
unit the reader must guess. Pure (no pandas, no Streamlit), so the bottom layer can hold it and
the health rules, the dashboard and the commands all use it.
"""

from __future__ import annotations

import math

_UNITS = (("d", 86400), ("h", 3600), ("min", 60), ("s", 1))
_PAIRS = tuple(zip(_UNITS, _UNITS[1:]))


def _seconds(value: object) -> float | None:
    """`value` as seconds, None when it is missing (None, NaN, NaT) or not a number."""
    if value is None:
        return None
    if type(value) is float:  # the common case, read by the rules' words for every row they name
        return None if value != value else value
    try:
        seconds = float(value)  # type: ignore[arg-type]  # numbers, numpy scalars
    except (TypeError, ValueError):
        return None
    return None if math.isnan(seconds) else seconds


def duration(seconds: object) -> str:
    """A duration as people say it: '42 s', '4 min 12 s', '3 h 5 min', '2 d 4 h' (the larger
    unit and the next one, the next left out when it is zero); '' when unknown, '∞' for ever."""
    value = _seconds(seconds)
    if value is None:
        return ""
    if math.isinf(value):
        return "∞"
    if 0 < value < 0.95:
        return f"{value:.1f} s"  # a sub-second interval (a refresh, a timeout) is not "0 s"
    s = int(round(max(0.0, value)))
    for (big, size), (small, small_size) in _PAIRS:
        if s >= size:
            rest = s % size // small_size
            return f"{s // size} {big} {rest} {small}" if rest else f"{s // size} {big}"
    return f"{s} s"


def ago(seconds: object) -> str:
    """How long ago, in the same words: '4 min 12 s ago' ('never' when unknown)."""
    said = duration(seconds)
    return f"{said} ago" if said else "never"
