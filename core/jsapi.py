"""The JetStream API calls jetwatch makes, one method per call, raw JSON in and out.

nats-py's typed JetStream manager drops fields it does not know (`priority_groups`, `ts`), so
jetwatch sends the requests itself and keeps the server's reply as it came.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import nats.errors
from nats.aio.client import Client

from jetwatch.core.errors import JetwatchError, UsageError

# Server error codes jetwatch acts on (nats-server errors.json).
ERR_CONSUMER_NOT_FOUND = 10014
ERR_STREAM_NOT_FOUND = 10059
ERR_GROUP_NOT_IN_CONFIG = 10160

_NAME_FORBIDDEN = re.compile(r"[\s.*>]")
_GROUP = re.compile(r"^[a-zA-Z0-9/_=-]{1,16}$")


class JetStreamAPIError(JetwatchError):
    """The server refused an API request; `code`, `err_code` and `description` are its words."""

    def __init__(self, subject: str, code: int, err_code: int, description: str):
        super().__init__(f"{description} (status {code}, error {err_code})")
        self.subject = subject
        self.code = code
        self.err_code = err_code
        self.description = description


class ConsumerNotFound(JetStreamAPIError):
    pass


class StreamNotFound(JetStreamAPIError):
    pass


class GroupNotInConfig(JetStreamAPIError):
    pass


class NoReply(JetwatchError):
    """The server did not answer in time: it is down, unreachable, or JetStream is off."""


_BY_ERR_CODE = {
    ERR_CONSUMER_NOT_FOUND: ConsumerNotFound,
    ERR_STREAM_NOT_FOUND: StreamNotFound,
    ERR_GROUP_NOT_IN_CONFIG: GroupNotInConfig,
}


class InvalidName(UsageError, ValueError):
    """A stream or consumer name that cannot be put in an API subject."""


def check_name(kind: str, name: str) -> str:
    if not name or _NAME_FORBIDDEN.search(name):
        raise InvalidName(
            f"{kind} name {name!r} cannot be used: names must be non-empty and contain no spaces, "
            "'.', '*' or '>'"
        )
    return name


def check_group(group: str) -> str:
    if not _GROUP.match(group):
        raise InvalidName(f"group name {group!r} is not valid: 1-16 of A-Z a-z 0-9 / _ = -")
    return group


def _checked(full: str, reply: dict[str, Any]) -> dict[str, Any]:
    err = reply.get("error")
    if err:
        if not isinstance(err, dict):  # not the server's shape: a refusal all the same, in its own words
            raise JetStreamAPIError(full, 0, 0, f"{err!r:.200}")
        code, err_code = (v if isinstance(v, int) and not isinstance(v, bool) else 0
                          for v in (err.get("code", 0), err.get("err_code", 0)))
        description = err.get("description", "")
        cls = _BY_ERR_CODE.get(err_code, JetStreamAPIError)
        raise cls(full, code, err_code, description if isinstance(description, str) else f"{description!r:.200}")
    return reply


class _Envelope(msgspec.Struct):
    total: Any = 0
    error: Any = None
    consumers: list[msgspec.Raw] | None = None  # each entry's bytes, skipped over, not decoded


_ENVELOPE = msgspec.json.Decoder(_Envelope)


def _extent(full: str, data: bytes) -> tuple[int, int]:
    """(entries on the page, total) of a list page, raising a refusal as `request` does. A page
    msgspec will not read this way (not an object, `consumers` not a list, a NaN) is decoded as
    `request` decodes it, so that the paging is the same either way. msgspec does not check the
    UTF-8 of the entries it skips: the collector's read does (collectors/list_pages.py). A page
    that is not an object, whose `consumers` is not a list or whose `total` is not a count is
    refused with a ValueError saying so (the stream's listing fails in those words)."""
    try:
        page = _ENVELOPE.decode(data)
    except (msgspec.DecodeError, RecursionError):
        reply = json.loads(data)
        if not isinstance(reply, dict):
            raise ValueError(f"the reply to {full} is {type(reply).__name__} {reply!r:.40}, not a list page") from None
        _checked(full, reply)
        consumers, total = reply.get("consumers"), reply.get("total", 0)
        if consumers is not None and not isinstance(consumers, list):
            raise ValueError(f"the reply to {full} lists consumers as {type(consumers).__name__} "
                             f"{consumers!r:.40}, not a list") from None
        count = len(consumers or [])
    else:
        if page.error:
            _checked(full, json.loads(data))
        count, total = len(page.consumers or []), page.total
    if isinstance(total, bool) or not isinstance(total, int):
        raise ValueError(f"the reply to {full} gives its total as {type(total).__name__} {total!r:.40}, not a count")
    return count, total


class JetStreamAPI:
    """JetStream API requests over an existing connection."""

    def __init__(self, nc: Client, prefix: str = "$JS.API", timeout: float = 5.0):
        self.nc = nc
        self.prefix = prefix
        self.timeout = timeout

    async def _reply(self, subject: str, payload: dict[str, Any] | None) -> tuple[str, bytes]:
        """The full subject and the reply's bytes, not yet decoded."""
        body = b"" if payload is None else json.dumps(payload).encode()
        full = f"{self.prefix}.{subject}"
        try:
            msg = await self.nc.request(full, body, timeout=self.timeout)
        except nats.errors.NoRespondersError:
            raise NoReply(f"no JetStream on the server answered {full}: is JetStream enabled for this account?") from None
        except nats.errors.TimeoutError:
            raise NoReply(f"no reply to {full} within {self.timeout:g}s") from None
        if msg.headers and msg.headers.get("Status") == "503":
            raise NoReply(f"no JetStream on the server answered {full}: is JetStream enabled for this account?")
        return full, msg.data

    async def request(self, subject: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        full, data = await self._reply(subject, payload)
        return _checked(full, json.loads(data))

    async def _pages(self, subject: str, key: str) -> AsyncIterator[list[Any]]:
        offset = 0
        while True:
            reply = await self.request(subject, {"offset": offset})
            items = reply.get(key) or []
            yield items
            offset += len(items)
            if not items or offset >= reply.get("total", 0):
                return

    async def stream_names(self) -> list[str]:
        names: list[str] = []
        async for page in self._pages("STREAM.NAMES", "streams"):
            names.extend(page)
        return names

    async def stream_list(self) -> AsyncIterator[list[dict[str, Any]]]:
        """Every stream's info (config and state), a page at a time (256 a page)."""
        async for page in self._pages("STREAM.LIST", "streams"):
            yield page

    async def consumer_list(self, stream: str) -> list[dict[str, Any]]:
        """Every consumer of a stream with its full state, 256 a page."""
        out: list[dict[str, Any]] = []
        async for page in self._pages(f"CONSUMER.LIST.{check_name('stream', stream)}", "consumers"):
            out.extend(page)
        return out

    async def consumer_list_pages(self, stream: str) -> list[bytes]:
        """Every page of a stream's CONSUMER.LIST as the server sent it (the collector reads them
        straight into Arrow, collectors/list_pages.py); a refusal is raised as `request` raises it.
        Only each page's envelope is decoded here, to page on."""
        subject = f"CONSUMER.LIST.{check_name('stream', stream)}"
        pages: list[bytes] = []
        offset = 0
        while True:
            full, data = await self._reply(subject, {"offset": offset})
            count, total = _extent(full, data)
            pages.append(data)
            offset += count
            if not count or offset >= total:
                return pages

    async def consumer_names(self, stream: str) -> list[str]:
        """The names of a stream's consumers, paged (what one INFO per consumer needs first)."""
        names: list[str] = []
        async for page in self._pages(f"CONSUMER.NAMES.{check_name('stream', stream)}", "consumers"):
            names.extend(page)
        return names

    async def consumer_info(self, stream: str, consumer: str) -> dict[str, Any]:
        return await self.request(f"CONSUMER.INFO.{check_name('stream', stream)}.{check_name('consumer', consumer)}")

    async def stream_info(self, stream: str) -> dict[str, Any]:
        return await self.request(f"STREAM.INFO.{check_name('stream', stream)}")

    async def add_stream(self, config: dict[str, Any]) -> dict[str, Any]:
        return await self.request(f"STREAM.CREATE.{check_name('stream', config['name'])}", config)

    async def update_stream(self, config: dict[str, Any]) -> dict[str, Any]:
        return await self.request(f"STREAM.UPDATE.{check_name('stream', config['name'])}", config)

    async def add_consumer(self, stream: str, config: dict[str, Any]) -> dict[str, Any]:
        name = config.get("durable_name") or config["name"]
        return await self.request(
            f"CONSUMER.CREATE.{check_name('stream', stream)}.{check_name('consumer', name)}",
            {"stream_name": stream, "config": config},
        )

    async def delete_consumer(self, stream: str, consumer: str) -> dict[str, Any]:
        return await self.request(f"CONSUMER.DELETE.{check_name('stream', stream)}.{check_name('consumer', consumer)}")

    async def unpin(self, stream: str, consumer: str, group: str) -> dict[str, Any]:
        return await self.request(
            f"CONSUMER.UNPIN.{check_name('stream', stream)}.{check_name('consumer', consumer)}",
            {"group": check_group(group)},
        )

    async def reset(self, stream: str, consumer: str, seq: int = 0) -> dict[str, Any]:
        """Reset the consumer to start again at stream sequence `seq` (0: just after its ack floor),
        nats-server 2.14+: its delivered consumer sequence starts over; `reset_seq` in the reply."""
        return await self.request(
            f"CONSUMER.RESET.{check_name('stream', stream)}.{check_name('consumer', consumer)}",
            {"seq": seq} if seq else None,
        )

    async def pause(self, stream: str, consumer: str, until_rfc3339: str | None) -> dict[str, Any]:
        """Pause until the given time; None resumes (an empty body)."""
        subject = f"CONSUMER.PAUSE.{check_name('stream', stream)}.{check_name('consumer', consumer)}"
        if until_rfc3339 is None:
            return await self.request(subject, None)
        return await self.request(subject, {"pause_until": until_rfc3339})
