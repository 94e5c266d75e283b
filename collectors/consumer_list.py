"""Sample every consumer of the connected account with CONSUMER.LIST paging.

One STREAM.NAMES walk and one CONSUMER.LIST walk per stream (256 consumers a page), a few
requests in flight at once: never one INFO request per consumer.
"""

from __future__ import annotations

import asyncio
import json
from typing import Callable

from jetwatch.collectors.consumer_state import MalformedState, SampleBatch, Scope, add_consumer
from jetwatch.collectors.filters import NameFilter
from jetwatch.core.jsapi import JetStreamAPI, StreamNotFound


class ConsumerListCollector:
    def __init__(self, api: JetStreamAPI, scope: Scope, name_filter: NameFilter,
                 clock: Callable[[], str], concurrency: int = 8):
        self.api = api
        self.scope = scope
        self.name_filter = name_filter
        self.clock = clock
        self.known_hashes: dict[tuple[str, str, str], str] = {}
        self._limit = asyncio.Semaphore(concurrency)

    async def collect(self) -> SampleBatch:
        names = [s for s in await self.api.stream_names() if self.name_filter.stream_ok(s)]
        pages = await asyncio.gather(*(self._stream(s) for s in names))
        batch = SampleBatch(accounts={self.scope.account})
        now = self.clock()
        for stream, consumers in zip(names, pages):
            if consumers is None:
                continue  # deleted between STREAM.NAMES and CONSUMER.LIST
            batch.streams += 1
            for info in consumers:
                if not isinstance(info, dict) or not self.name_filter.consumer_ok(str(info.get("name", ""))):
                    continue
                try:
                    add_consumer(batch, info, self.scope, now, self.known_hashes)
                except MalformedState as exc:
                    batch.rejects.append((f"CONSUMER.LIST.{stream}", str(exc), json.dumps(info)[:10000]))
        return batch

    async def _stream(self, stream: str) -> list[dict] | None:
        async with self._limit:
            try:
                return await self.api.consumer_list(stream)
            except StreamNotFound:
                return None
