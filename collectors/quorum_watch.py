"""A consumer whose leader stepped down for want of a quorum, as the server says it at once.

A replicated consumer's leader that hears from too few of its peers for `lostQuorumInterval`
steps down and publishes QUORUM_LOST (nats-server's jetstream_cluster.go); a new leader publishes
LEADER_ELECTED. The capture stream stores both, but it may have lost its own quorum or its
server in the same failure, so the collector also reads them with a plain subscription on the
account's connection: what arrives is evidence for that consumer (health/cluster.py), NO_LEADER
in the server's own words, held until a leader is elected or the consumer is sampled afresh.
The server sends a copy of each to the system account with the account named in it: where the
collector has a system-account connection (it samples every account), that copy names the
consumers of accounts its own connection is not in.
Anyone allowed to publish on the advisory subjects could send one: the evidence is only ever
about the consumer it names, and a fresh sample of it ends it.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Callable, Container, Iterable, Mapping

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from jetwatch.core.clock import parse_rfc3339
from jetwatch.core.jsadvisory import TYPE_PREFIX
from jetwatch.health.cluster import NO_LEADER, Evidence, EvidenceKey

log = logging.getLogger("jetwatch.collector")

PREFIX = "$JS.EVENT.ADVISORY.CONSUMER."
SUBJECTS = (PREFIX + "QUORUM_LOST.>", PREFIX + "LEADER_ELECTED.>")
LOST = TYPE_PREFIX + "consumer_quorum_lost"
ELECTED = TYPE_PREFIX + "consumer_leader_elected"
# Consumers remembered at most: a bound, so advisories cannot grow the collector without end.
MAX_REMEMBERED = 10_000
# An advisory's own time is believed this far before its receipt, no further (nor after it).
TRUSTED_SKEW_S = 30.0


class QuorumWatch:
    """Who lost its quorum, by (account, stream, consumer): the advisory's time (epoch seconds,
    the server's clock) and the replicas it named, until a leader is elected or it is sampled."""

    def __init__(self, nc: Client, account: str, watched: Callable[[str | None, str | None], bool],
                 now: Callable[[], float], system_nc: Client | None = None) -> None:
        self.nc = nc
        self.system_nc = system_nc
        self.account = account
        self.watched = watched
        self.now = now  # epoch seconds on the server's clock, as the collector last measured it
        # (first said, last said, the replicas it names): dated from the first, ended by a sample after the last
        self.lost: dict[tuple[str, str, str], tuple[float, float, tuple[str, ...]]] = {}
        self._subs: list[Subscription] = []

    async def open(self) -> None:
        for subject in SUBJECTS:
            self._subs.append(await self.nc.subscribe(subject, cb=self._arrived))
            if self.system_nc is not None:
                self._subs.append(await self.system_nc.subscribe(subject, cb=self._arrived_system))

    async def close(self) -> None:
        for sub in self._subs:
            try:
                await sub.unsubscribe()
            except Exception as exc:  # a connection already closed: nothing left to undo
                log.debug("unsubscribing the quorum advisories: %s", exc)
        self._subs.clear()

    async def _arrived(self, msg: Msg) -> None:
        self.take(msg.data, self.now())

    async def _arrived_system(self, msg: Msg) -> None:
        self.take(msg.data, self.now(), system=True)

    def take(self, data: bytes, received: float, system: bool = False) -> None:
        """One advisory as published, received at `received` (epoch seconds, the server's clock),
        on the account's connection or (`system`) the system account's, whose copy names the
        account; anything that is not a well-formed one of the two kinds about a watched consumer
        is ignored (the capture stream keeps and rejects it with words). Its time is taken as
        said only within TRUSTED_SKEW_S before its receipt: a forged or skewed time can neither
        date the loss long before nor keep it from ending. A loss is said in the log once, not
        again for each copy or repeat while it lasts."""
        try:
            doc = json.loads(data)
            kind, stream, consumer = doc["type"], doc["stream"], doc["consumer"]
            said = parse_rfc3339(doc["timestamp"]).timestamp()
            account = doc["account"] if system else self.account
        except (ValueError, KeyError, TypeError):
            return
        at = min(max(said, received - TRUSTED_SKEW_S), received)
        if not (isinstance(account, str) and account and isinstance(stream, str) and isinstance(consumer, str)
                and self.watched(stream, consumer)):
            return
        key = (account, stream, consumer)
        words = {"account": account, "stream": stream, "consumer": consumer}
        if kind == LOST and (key in self.lost or len(self.lost) < MAX_REMEMBERED):
            first = self.lost.get(key)
            self.lost[key] = (at if first is None else min(first[0], at), at, _silent(doc.get("replicas")))
            if first is None:
                log.warning("%s > %s lost its quorum (QUORUM_LOST): its leader stepped down; replicas not current: "
                            "%s", stream, consumer, ", ".join(self.lost[key][2]) or "not named", extra=words)
        elif kind == ELECTED and self.lost.pop(key, None) is not None:
            log.info("%s > %s has a leader again (LEADER_ELECTED: %s)", stream, consumer, doc.get("leader"), extra=words)

    def sampled(self, keys: Iterable[tuple[str, str, str]], since: float) -> None:
        """Consumers sampled afresh by a cycle that began at `since` (epoch seconds): a leader
        answered for each, so a quorum lost before then is over (one said again after it is not)."""
        for key in keys:
            lost = self.lost.get(key)
            if lost is not None and lost[1] < since:
                del self.lost[key]

    def keep_only(self, known: Container[tuple[str, str, str]]) -> None:
        """Forget consumers the collector does not know (deleted since, or never there: a forged
        name), so that they neither keep a state nor fill the bound."""
        for key in [k for k in self.lost if k not in known]:
            del self.lost[key]

    def evidence(self, now: float) -> Mapping[EvidenceKey, Evidence]:
        """The evidence of each consumer still without a leader since its QUORUM_LOST, dated from it."""
        return {key: Evidence(NO_LEADER, _words(at, silent), silent, held_s=max(0.0, now - at))
                for key, (at, _, silent) in self.lost.items()}


def _silent(replicas: object) -> tuple[str, ...]:
    """The replicas the advisory names as not current or offline (the peers the leader lost)."""
    if not isinstance(replicas, list):
        return ()
    return tuple(str(r.get("name")) for r in replicas
                 if isinstance(r, dict) and (not r.get("current") or r.get("offline")) and r.get("name"))


def _words(at: float, silent: tuple[str, ...]) -> str:
    when = dt.datetime.fromtimestamp(at, dt.UTC).strftime("%H:%M:%S UTC")
    lost = f" (not current: {', '.join(silent)})" if silent else ""
    return f"its leader stepped down for want of a quorum at {when} (QUORUM_LOST){lost}"
