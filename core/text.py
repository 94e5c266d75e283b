"""Text from outside, as a UTF-8 store can keep it."""

from __future__ import annotations

import re

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def storable(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD. JSON may write one as an escape
    (`"\\ud800"`), and Python decodes it into a str no UTF-8 encoder (Arrow's, DuckDB's) accepts:
    one such value fails the whole write it is part of. Go's JSON decoder makes the same
    replacement, so the store keeps what the server itself would have read."""
    return text if text.isascii() else _LONE_SURROGATE.sub(REPLACEMENT, text)
