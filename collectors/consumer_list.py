"""Sample every consumer of the connected account with CONSUMER.LIST paging.

One STREAM.NAMES walk and one CONSUMER.LIST walk per stream (256 consumers a page), a few
requests in flight at once: never one INFO request per consumer.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

from jetwatch.collectors.consumer_state import MalformedState, SampleBatch, Scope, add_consumer
from jetwatch.collectors.filters import NameFilter
from jetwatch.collectors.state_columns import Fingerprints, add_consumers
from jetwatch.core.jsapi import JetStreamAPI, JetStreamAPIError, NoReply, StreamNotFound


class ConsumerListCollector:
    def __init__(self, api: JetStreamAPI, scope: Scope, name_filter: NameFilter,
                 clock: Callable[[], str], concurrency: int = 8):
        self.api = api
        self.scope = scope
        self.name_filter = name_filter
        self.clock = clock
        self.known_hashes: dict[tuple[str, str, str], str] = {}
        self.fingerprints: Fingerprints = {}  # the latest cycle's configs, to skip unchanged ones
        self._limit = asyncio.Semaphore(concurrency)

    async def collect(self) -> SampleBatch:
        names = [s for s in await self.api.stream_names() if self.name_filter.stream_ok(s)]
        return self.batch_from_pages(await self.fetch(names))

    async def fetch(self, names: list[str]) -> list[tuple[str, list[Any] | None | Exception]]:
        """Each stream's CONSUMER.LIST entries, at most `concurrency` requests in flight."""
        return list(zip(names, await asyncio.gather(*(self._stream(s) for s in names))))

    def batch_from_pages(self, pages: list[tuple[str, list[Any] | None | Exception]]) -> SampleBatch:
        """The cycle's batch from each stream's CONSUMER.LIST entries (None: the stream was
        deleted meanwhile; an exception: listing it failed). One stream that failed, or one
        entry that is malformed, is set aside with the reason; every other consumer is kept."""
        batch = SampleBatch(accounts={self.scope.account})
        now = self.clock()
        fingerprints: Fingerprints = {}
        for stream, consumers in pages:
            if consumers is None:
                continue  # deleted between STREAM.NAMES and CONSUMER.LIST
            if isinstance(consumers, Exception):
                batch.failed_streams.append((self.scope.account, stream))
                batch.errors.append(f"listing the consumers of stream {stream!r} failed: {consumers}")
                continue
            batch.streams += 1
            if consumers and isinstance(consumers[-1], dict):
                batch.saw_server_time(consumers[-1].get("ts"))  # the page's last reply
            if self.name_filter.filters_consumers:
                consumers = [info for info in consumers
                             if not isinstance(info, dict) or self.name_filter.consumer_ok(str(info.get("name", "")))]
            if add_consumers(batch, consumers, self.scope, now, self.known_hashes, self.fingerprints, fingerprints):
                continue
            for info in consumers:  # something on the page is malformed: entry by entry, to reject it alone
                try:
                    add_consumer(batch, info, self.scope, now, self.known_hashes)
                except MalformedState as exc:
                    batch.reject(f"CONSUMER.LIST.{stream}", exc, info, self.scope.account, stream)
        self.fingerprints = fingerprints
        return batch

    async def _stream(self, stream: str) -> list[dict] | None | Exception:
        async with self._limit:
            try:
                return await self.api.consumer_list(stream)
            except StreamNotFound:
                return None
            except NoReply as exc:
                return NoReply(f"{exc} (may the collector's user publish to $JS.API.CONSUMER.LIST.{stream}?)")
            except (JetStreamAPIError, ValueError) as exc:  # a refusal, or a reply that is not JSON
                return exc
