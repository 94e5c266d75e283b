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


# Embeddings and overrides (U+202A-U+202E), isolates (U+2066-U+2069), and the LRM/RLM marks.
BIDI = re.compile("[\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def visible(text: object) -> str:
    """`text` with every bidi control character replaced by a visible ⟨U+XXXX⟩ mark (U+202E turns
    `\u202eorders` into "sredro" on screen): a name shown can never disguise itself as another."""
    return BIDI.sub(lambda m: f"⟨U+{ord(m.group()):04X}⟩", str(text))
