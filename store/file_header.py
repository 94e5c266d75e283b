"""What a DuckDB file's own header says its length must be.

A store cut short past its header (a copy stopped half-way, a full disk during a backup) opens
as if nothing were wrong, and DuckDB finds the hole only when a query reaches a missing block:
a collector could run for hours on it before a write or a page fails. The header counts the
file's blocks, so a shorter file is told at once, for the price of reading 12 KiB.

The layout is DuckDB's (storage_info.hpp): three 4 KiB header blocks, the main one holding the
magic bytes "DUCK", then two database headers, the current one being the one with the higher
iteration; each begins with an 8-byte checksum, then iteration, meta block, free list, block
count and block size as little-endian 64-bit words. Blocks follow the three header blocks. A
file whose header does not look like that is left to DuckDB to judge.
"""

from __future__ import annotations

import struct
from pathlib import Path

HEADER_BLOCK = 4096
HEADERS_LENGTH = 3 * HEADER_BLOCK
MAGIC = b"DUCK"
_MAGIC_AT = 8
_WORDS = struct.Struct("<QQQQQQ")  # checksum, iteration, meta block, free list, block count, block size
_SMALLEST_BLOCK = 1 << 12
_LARGEST_BLOCK = 1 << 28


def expected_length(head: bytes) -> int | None:
    """The length in bytes the header of this file says it has at least (None: not a DuckDB
    header this code can read, or too short to hold one)."""
    if len(head) < HEADERS_LENGTH or head[_MAGIC_AT:_MAGIC_AT + len(MAGIC)] != MAGIC:
        return None
    headers = [_WORDS.unpack_from(head, at) for at in (HEADER_BLOCK, 2 * HEADER_BLOCK)]
    _, _, _, _, blocks, block_size = max(headers, key=lambda words: words[1])
    if block_size & (block_size - 1) or not _SMALLEST_BLOCK <= block_size <= _LARGEST_BLOCK:
        return None
    return HEADERS_LENGTH + blocks * block_size


def shortfall(path: Path) -> tuple[int, int] | None:
    """(length the header says, length the file has) for a file shorter than its header says;
    None for a file that is whole, missing, or not one this code can read the header of."""
    try:
        with path.open("rb") as file:
            head = file.read(HEADERS_LENGTH)
            length = file.seek(0, 2)
    except OSError:
        return None
    expected = expected_length(head)
    if expected is None or length >= expected:
        return None
    return expected, length
