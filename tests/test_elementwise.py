"""The rules' element-wise operations say on one value what numpy says on a column holding it:
the words of a firing consumer are worked out on its row alone, its verdict on the column."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from jetwatch.health import elementwise as ew

VALUES = [0.0, -1.5, 2.0, 30.0, math.nan, math.inf, -math.inf]
PAIRS = list(itertools.product(VALUES, VALUES))


def _same(one: object, column: np.ndarray) -> bool:
    expected = column.item()
    return (isinstance(one, float) and math.isnan(one) and math.isnan(expected)) or one == expected


@pytest.mark.parametrize(("mine", "numpys"), [(ew.fmax, np.fmax), (ew.minimum, np.minimum), (ew.maximum, np.maximum)])
@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_two_values_give_what_numpy_gives_on_columns(mine, numpys, a, b):
    assert _same(mine(a, b), numpys(np.array([a]), np.array([b])))
    assert np.array_equal(mine(np.array([a]), np.array([b])), numpys(np.array([a]), np.array([b])), equal_nan=True)


@pytest.mark.parametrize("x", VALUES)
def test_one_value_gives_what_numpy_gives_on_a_column(x):
    assert _same(ew.nan_to_zero(x), np.where(np.isnan(np.array([x])), 0.0, np.array([x])))
    assert bool(ew.isnan(x)) == bool(np.isnan(np.array([x])).item())
    assert bool(~ew.isnan(x)) == (not math.isnan(x))  # negated as a column's flags are


@pytest.mark.parametrize(("condition", "a", "b"), [(True, 1.0, 2.0), (False, 1.0, 2.0), (np.bool_(False), math.nan, 2.0)])
def test_where_picks_as_numpy_does(condition, a, b):
    assert _same(ew.where(condition, a, b), np.where(np.array([condition]), np.array([a]), np.array([b])))
