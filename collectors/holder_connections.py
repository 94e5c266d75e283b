"""Whether the workers holding a stalled consumer's messages are gone or only stopped: what CONNZ
says of the connections they announced their pulls on (core/pull_announce.py).

A consumer whose holders went silent (STALLED: nothing acknowledged, delivered or pulled) looks
the same from the server's consumer state whether its workers died or hang. Their connections
tell: closed, the workers are gone (start them); open, they are stopped (look at them, restart
them). Asked after a cycle for the consumers judged so, off the cycle's path, and read by the next
judging (collectors/judging.py `PullsAnnounced.holders`). Only workers that announce their pulls
can be asked about, and only where the collector can ask CONNZ (--monitor-url, --system-context).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from jetwatch.collectors.pin_holders import Connz, holder_exit

log = logging.getLogger("jetwatch.holder_connections")
Key = tuple[str, str, str]
# (names of the announcing workers whose connection is open, names of those whose connection closed)
Holders = tuple[tuple[str, ...], tuple[str, ...]]


class HolderConnections:
    def __init__(self, connz: Connz) -> None:
        self.connz = connz
        self.said: dict[Key, Holders] = {}
        # The announcements each stalled consumer's workers made when it was first asked about: a
        # worker gone stops announcing, and what it announced last still names its connection.
        self.announced: dict[Key, list[Mapping[str, Any]]] = {}
        self._task: asyncio.Task[None] | None = None

    def ask(self, keys: Sequence[Key], announced: Mapping[Key, Sequence[Mapping[str, Any]]], now: dt.datetime) -> None:
        """Ask about `keys`' announced connections in the background, one round at a time (a
        round still running is left to finish: the next cycle asks again)."""
        if self._task is not None and not self._task.done():
            return
        self._task = asyncio.get_running_loop().create_task(self.check(keys, announced, now))

    async def check(self, keys: Sequence[Key], announced: Mapping[Key, Sequence[Mapping[str, Any]]],
                    now: dt.datetime) -> None:
        said: dict[Key, Holders] = {}
        self.announced = {key: _merged(self.announced.get(key, []), announced.get(key) or ()) for key in keys}
        for key in keys:
            connected: list[str] = []
            gone: list[str] = []
            for row in self.announced[key]:
                try:
                    found = await holder_exit(self.connz, "", row.get("client_id"), row.get("server_id"), now)
                except Exception as exc:  # one connection not asked about costs that fact only
                    log.warning("asking CONNZ about %s's connection failed: %s", row.get("name"), exc)
                    continue
                if found["state"] == "open":
                    connected.append(str(row.get("name")))
                elif found["state"] == "closed":
                    gone.append(str(row.get("name")))
            if connected or gone:
                said[key] = (tuple(sorted(set(connected))), tuple(sorted(set(gone) - set(connected))))
        self.said = said
        log.debug("CONNZ on the announced workers of %d stalled consumer(s): %s", len(keys), said)


def _merged(before: Sequence[Mapping[str, Any]], now: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Each announcing connection once, its latest announcement kept."""
    rows = {(r.get("server_id"), r.get("client_id"), r.get("name")): r for r in [*before, *now]}
    return list(rows.values())
