"""Typed views of the JetStream API's info replies: the fields jetwatch reads, by name and type,
instead of `info.get("config") or {}` at each reader.

JetStreamAPI keeps each reply as the server sent it (core/jsapi.py); a reader that wants fields
takes this view of it. As tolerant as the readers were: every field has the server's default when
it is missing, unknown fields are left out (the raw reply still has them), and a number written as
a string is read as the number. A field of another type than the server's is a ValueError
(msgspec.ValidationError), as `int(...)` on it was.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec

T = TypeVar("T", bound=msgspec.Struct)


def _view(reply: Mapping[str, Any], kind: type[T]) -> T:
    return msgspec.convert(reply, kind, strict=False)


class ConsumerConfig(msgspec.Struct, kw_only=True):
    priority_policy: str | None = None  # "pinned_client", "overflow", ... or none
    priority_groups: list[str] | None = None


class PriorityGroupState(msgspec.Struct, kw_only=True):
    """One priority group's state in a consumer's info (pinned_client consumers)."""

    group: str | None = None
    pinned_client_id: str | None = None
    pinned_ts: str | None = None


class ConsumerInfo(msgspec.Struct, kw_only=True):
    """`$JS.API.CONSUMER.INFO`'s reply (and each entry of CONSUMER.LIST's): the fields read."""

    config: ConsumerConfig | None = None
    num_pending: int = 0
    num_ack_pending: int = 0
    priority_groups: list[PriorityGroupState] | None = None

    @classmethod
    def of(cls, reply: Mapping[str, Any]) -> ConsumerInfo:
        return _view(reply, cls)

    @property
    def settings(self) -> ConsumerConfig:
        """The consumer's config, empty when the reply had none."""
        return self.config or ConsumerConfig()

    def pinned(self) -> tuple[str | None, str | None]:
        """The first priority group and the client pinned in it (None when nothing is)."""
        if not self.priority_groups:
            return None, None
        first = self.priority_groups[0]
        return first.group, first.pinned_client_id or None


class StreamConfig(msgspec.Struct, kw_only=True):
    """A stream's config: a limit of 0 (or the server's -1) is no limit."""

    name: str | None = None
    subjects: list[str] | None = None
    allow_direct: bool = False
    discard: str | None = None  # "old" or "new"; the server's default is "old"
    max_age: int = 0  # ns
    max_msgs: int = 0
    max_bytes: int = 0


class StreamState(msgspec.Struct, kw_only=True):
    """A stream's state; an empty stream's times are Go's zero time, "0001-01-01T00:00:00Z"."""

    messages: int = 0
    bytes: int = 0
    first_seq: int = 0
    first_ts: str | None = None
    last_seq: int = 0
    last_ts: str | None = None


class StreamInfo(msgspec.Struct, kw_only=True):
    """`$JS.API.STREAM.INFO`'s reply (and each entry of STREAM.LIST's): the fields read."""

    config: StreamConfig | None = None
    state: StreamState | None = None
    created: str | None = None

    @classmethod
    def of(cls, reply: Mapping[str, Any]) -> StreamInfo:
        return _view(reply, cls)

    @property
    def settings(self) -> StreamConfig:
        """The stream's config, empty when the reply had none."""
        return self.config or StreamConfig()

    @property
    def current(self) -> StreamState:
        """The stream's state, empty when the reply had none."""
        return self.state or StreamState()
