"""Which streams and consumers jetwatch watches."""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

INTERNAL_PREFIXES = ("KV_", "OBJ_")


@dataclass(frozen=True)
class NameFilter:
    include_streams: tuple[str, ...] = ()
    exclude_streams: tuple[str, ...] = ()
    include_consumers: tuple[str, ...] = ()
    exclude_consumers: tuple[str, ...] = ()
    show_internal: bool = False
    capture_stream: str = "JETWATCH_ADVISORIES"

    def internal(self, stream: str) -> bool:
        return stream == self.capture_stream or stream.startswith(INTERNAL_PREFIXES)

    def stream_ok(self, stream: str) -> bool:
        if self.internal(stream) and not self.show_internal:
            return False
        return _allowed(stream, self.include_streams, self.exclude_streams)

    def consumer_ok(self, consumer: str) -> bool:
        return _allowed(consumer, self.include_consumers, self.exclude_consumers)

    @property
    def filters_consumers(self) -> bool:
        """Whether consumer_ok can say no at all (else a caller may skip asking it per consumer)."""
        return bool(self.include_consumers or self.exclude_consumers)


def _allowed(name: str, include: tuple[str, ...], exclude: tuple[str, ...]) -> bool:
    if include and not any(fnmatchcase(name, p) for p in include):
        return False
    return not any(fnmatchcase(name, p) for p in exclude)
