"""Sample every consumer of every account through the servers' HTTP `/jsz` endpoints.

A few requests cover a whole deployment. Only a consumer's leader reports fresh pending counts
and pin state, so each consumer is taken from the server that leads it.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from typing import Any, Callable

from collectors.consumer_state import MalformedState, SampleBatch, Scope, add_consumer
from collectors.filters import NameFilter
from jetwatch.jsapi import NoReply

JSZ_QUERY = "/jsz?accounts=true&streams=true&consumers=true&config=true"


def _get(url: str, timeout: float) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 (operator-given URL)
        return json.loads(resp.read())


def leads(consumer: dict[str, Any], server_name: str) -> bool:
    cluster = consumer.get("cluster") or {}
    return not cluster.get("leader") or cluster.get("leader") == server_name


class JszCollector:
    def __init__(self, urls: tuple[str, ...], name_filter: NameFilter, clock: Callable[[], str],
                 timeout: float = 5.0):
        self.urls = tuple(u.rstrip("/") for u in urls)
        self.name_filter = name_filter
        self.clock = clock
        self.timeout = timeout
        self.known_hashes: dict[tuple[str, str, str], str] = {}

    async def _fetch(self, url: str) -> dict[str, Any] | None:
        try:
            return await asyncio.to_thread(_get, url + JSZ_QUERY, self.timeout)
        except OSError:
            return None

    async def collect(self) -> SampleBatch:
        replies = await asyncio.gather(*(self._fetch(u) for u in self.urls))
        if not any(replies):
            raise NoReply(f"no monitoring endpoint answered: {', '.join(self.urls)}")
        batch = SampleBatch()
        now = self.clock()
        seen: set[tuple[str, str, str]] = set()
        for reply in filter(None, replies):
            server = reply.get("server_name") or reply.get("server_id") or "?"
            for account in reply.get("account_details") or []:
                scope = Scope(account=account.get("name") or account.get("id") or "$G", server=server)
                batch.accounts.add(scope.account)
                for stream in account.get("stream_detail") or []:
                    name = stream.get("name", "")
                    if not self.name_filter.stream_ok(name):
                        continue
                    batch.streams += 1
                    for info in stream.get("consumer_detail") or []:
                        key = (scope.account, name, str(info.get("name")))
                        if key in seen or not leads(info, server) or not self.name_filter.consumer_ok(key[2]):
                            continue
                        seen.add(key)
                        try:
                            add_consumer(batch, {"stream_name": name, **info}, scope, now, self.known_hashes)
                        except MalformedState as exc:
                            batch.rejects.append(("/jsz", str(exc), json.dumps(info)[:10000]))
        return batch
