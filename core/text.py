"""Text from outside, as a UTF-8 store can keep it."""

from __future__ import annotations

import json
import json.scanner
import re
from typing import Any

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


# A JSON escape of a surrogate (`\ud800`–`\udfff`): only text holding one can decode to a lone one.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _storable_decoder() -> json.JSONDecoder:
    decoder = json.JSONDecoder(object_pairs_hook=lambda pairs: {storable(k): v for k, v in pairs})
    scan = decoder.parse_string  # type: ignore[attr-defined]

    def parse_string(text: str, end: int, strict: bool = True) -> tuple[str, int]:
        value, at = scan(text, end, strict)
        return storable(value), at

    decoder.parse_string = parse_string  # type: ignore[attr-defined]
    decoder.scan_once = json.scanner.py_make_scanner(decoder)  # type: ignore[attr-defined]
    return decoder


_STORABLE = _storable_decoder()


def loads_storable(raw: bytes) -> Any:
    """`json.loads(raw)` with every string (keys as well) made `storable`, as Go's decoder reads a
    reply: a lone surrogate written as a JSON escape is U+FFFD. Raises what json.loads raises (and
    RecursionError sooner: the scanner that can replace is Python's, used only for text that holds
    such an escape)."""
    if not _SURROGATE_ESCAPE.search(raw):
        return json.loads(raw)
    return _STORABLE.decode(raw.decode())
