"""How the health model reads a column of numbers, wherever it comes from: a frame's column
(numpy-typed or nullable), a list, or the collector's object arrays of numbers and None."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd


def array(values: object) -> Any:
    """A numpy-typed column as its array; anything else (an extension type, a list) as it is."""
    return values.to_numpy() if isinstance(values, pd.Series) and isinstance(values.dtype, np.dtype) else values


def floats(values: object) -> np.ndarray:
    """The values as floats, NaN where missing or not a number. numpy reads numbers and None
    directly (None: NaN); pandas' coercion only for what it cannot (text, nullable types)."""
    values = array(values)
    if isinstance(values, np.ndarray) and values.dtype.kind in "fiub":
        return values.astype(np.float64, copy=False)
    if isinstance(values, np.ndarray) and values.dtype == object:
        try:
            return values.astype(np.float64)
        except (TypeError, ValueError):
            pass
    return pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(np.float64, na_value=np.nan)
