"""Element-wise operations on a column of consumers and on one consumer's value alike.

The rules are written once, for whole columns (every consumer at once, when they are judged) and
for the one row whose words are being said. numpy's functions on a Python float cost microseconds
each, and the words of tens of thousands of firing rows would pay them many times over a cycle:
each function here is numpy's on arrays and plain Python, with numpy's meaning, on one value.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _arrays(a: Any, b: Any, c: Any = None) -> bool:
    return isinstance(a, np.ndarray) or isinstance(b, np.ndarray) or isinstance(c, np.ndarray)


def isnan(x: Any) -> Any:
    """np.isnan (a numpy bool on one value, so that `~` negates it as on a column)."""
    return np.isnan(x) if isinstance(x, np.ndarray) else np.bool_(x != x)


def fmax(a: Any, b: Any) -> Any:
    """np.fmax: the larger, NaN ignored unless both are."""
    if _arrays(a, b):
        return np.fmax(a, b)
    return b if a != a else a if b != b else (a if a >= b else b)


def minimum(a: Any, b: Any) -> Any:
    """np.minimum: the smaller, NaN if either is."""
    if _arrays(a, b):
        return np.minimum(a, b)
    return a if a != a else b if b != b else (a if a <= b else b)


def maximum(a: Any, b: Any) -> Any:
    """np.maximum: the larger, NaN if either is."""
    if _arrays(a, b):
        return np.maximum(a, b)
    return a if a != a else b if b != b else (a if a >= b else b)


def where(condition: Any, a: Any, b: Any) -> Any:
    """np.where."""
    if _arrays(condition, a, b):
        return np.where(condition, a, b)
    return a if condition else b


def nan_to_zero(x: Any) -> Any:
    """np.nan_to_num(x, nan=0.0), infinities kept (no count here is ever infinite)."""
    if isinstance(x, np.ndarray):
        return np.nan_to_num(x, nan=0.0, posinf=np.inf, neginf=-np.inf)
    return 0.0 if x != x else x
