"""When the cluster under a consumer cannot serve it.

A consumer is served by its leader alone. When no server leads it (its leader's server died, or
its replicas lost their quorum), or the cluster's JetStream API does not answer at all (the meta
group has no leader), nothing sampled of it is fresh: the collector keeps its last known state,
and its verdict says what the cluster shows, ranked above every worker verdict (a worker is not
STALLED because its consumer has no leader). The collector gathers the evidence while sampling
(a CONSUMER.LIST reply naming the consumer under `missing`, a /jsz entry that names no leader, a
503 or no reply from the API, for a stream or the whole account); this module words it, and
tells which consumers it is about. Only evidence about a consumer (or its stream, or its
account's API) counts: never the collector's own trouble reaching one server.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

NO_LEADER = "NO_LEADER"
API_UNAVAILABLE = "API_UNAVAILABLE"
OFFLINE = "OFFLINE"

# Evidence keyed by (account, stream, consumer), (account, stream) or (account,): about one
# consumer, every consumer of a stream, or every consumer of an account.
EvidenceKey = tuple[str, ...]


@dataclass(frozen=True)
class Evidence:
    """What showed, this cycle, that the cluster cannot serve a consumer: the verdict it makes,
    what was seen in words, and the servers known not to answer (where the sampling knows)."""

    verdict: str
    seen: str
    servers: tuple[str, ...] = ()
    # How long before this cycle the sampling already saw what this rests on (a server silent for
    # a while before the cluster confirmed it gone): the verdict's since counts from then.
    held_s: float = 0.0
    # What the verdict's words open with, and what it stops, where that is not "everything" (a leader cut off from its peers still serves
    # the clients connected to it).
    stops: str = "nothing is delivered or acknowledged until a leader is elected"
    headline: str = "no server leads it"


# What a consumer's leader showed by answering for it this cycle, while its stream's or account's
# evidence says the cluster cannot serve: that evidence is not about this consumer (an R1 consumer
# on a server that still runs delivers while the meta group has no leader).
ANSWERED = Evidence("ANSWERED", "its leader answered for it")


# How the verdict of a consumer the server no longer lists (and nothing said was removed) opens:
# the collector holds it with these words, and only such a consumer can be forgotten.
UNLISTED = "not listed by the server since "


# A peer a leader has not heard from for this long is gone to it, whatever its `current` says yet:
# raft heartbeats come every second.
PEER_SILENT_S = 5.0


def without_quorum(replicas: object) -> tuple[str, float] | None:
    """What a leader's own report of its replicas says when it cannot have a quorum (too few
    peers current, online and heard from lately), in words, with how long it has been so (since
    the last of the peers it needed was heard from); None when it can, or the report says nothing
    of its peers (one replica). A leader that lost its peers keeps answering as leader for many
    seconds before it steps down, and commits nothing meanwhile."""
    if not isinstance(replicas, list) or not replicas:
        return None
    peers = [r for r in replicas if isinstance(r, dict)]
    silent = [r for r in peers if not _reachable(r)]
    if 1 + len(peers) - len(silent) > (len(peers) + 1) // 2:
        return None
    names = ", ".join(str(r.get("name")) for r in silent)
    heard = [a / 1e9 for r in silent if isinstance(a := r.get("active"), int) and not isinstance(a, bool)]
    return (f"its leader reaches {len(peers) - len(silent)} of its {len(peers)} peers ({names} not heard from): "
            "no quorum", min(heard) if heard else 0.0)


REPLICA_AT_RISK = "replica_not_current"


def replicas_at_risk(replicas: object) -> dict[str, Any] | None:
    """The finding for a leader that keeps its quorum while some of its peers are offline, not
    heard from for PEER_SILENT_S, or not current and never heard from since it leads (`active` 0:
    a leader elected after the peer died has no time for it): it still serves, and one more
    failure stops it (not a verdict; a restart of another of its servers now is an outage). A peer
    a few entries behind and heard from lately is not one: under steady traffic a healthy follower
    often is, for a moment. None when every peer is heard from, or when too few are for a quorum
    (`without_quorum`'s NO_LEADER)."""
    if not isinstance(replicas, list) or not replicas or without_quorum(replicas) is not None:
        return None
    peers = [r for r in replicas if isinstance(r, dict)]
    behind = [r for r in peers if r.get("offline") or silent_for(r) >= PEER_SILENT_S
              or (not r.get("current") and silent_for(r) == 0)]
    if not behind:
        return None
    names = ", ".join(str(r.get("name")) for r in behind)
    return {"kind": REPLICA_AT_RISK,
            "reason": (f"{'replica' if len(behind) == 1 else 'replicas'} {names} of its {len(peers) + 1} "
                       f"{'is' if len(behind) == 1 else 'are'} offline or not heard from for {PEER_SILENT_S:.0f} s "
                       "or more: the consumer keeps its quorum and serves, but one more failure stops it"),
               "fix": (f"bring {names} back or let it catch up (`nats server report jetstream` shows its lag); until "
                       "then, restart or upgrade none of the consumer's other servers"),
               "numbers": {"replicas": names, "peers": len(peers)}}


def silent_for(replica: dict[str, Any]) -> float:
    """Seconds since the leader last heard from the peer (0 where its report does not say)."""
    active = replica.get("active")
    return active / 1e9 if isinstance(active, int) and not isinstance(active, bool) else 0.0


def _reachable(replica: dict[str, Any]) -> bool:
    return bool(replica.get("current")) and not replica.get("offline") and silent_for(replica) < PEER_SILENT_S


def about(keys: Sequence[tuple[str, str, str]], evidence: Mapping[EvidenceKey, Evidence]) -> list[tuple[int, Evidence]]:
    """(position, evidence) of each consumer among `keys` the evidence is about: its own first,
    else its stream's, else its account's; none for a consumer whose own is ANSWERED."""
    if not evidence:
        return []
    found = []
    for i, (account, stream, consumer) in enumerate(keys):
        ev = (evidence.get((account, stream, consumer)) or evidence.get((account, stream))
              or evidence.get((account,)))
        if ev is not None and ev is not ANSWERED:
            found.append((i, ev))
    return found


def finding(ev: Evidence, leader: object, as_of: object) -> dict[str, Any]:
    """The verdict's finding for one consumer, given its last known leader and the time of the
    state it keeps (both as sampled last; None when never known)."""
    led = f"last led by {leader}" if isinstance(leader, str) and leader else "its last leader not known"
    shown = f"shown as last known, sampled {as_of}" if as_of else "never sampled"
    down = f"; servers not answering: {', '.join(ev.servers)}" if ev.servers else ""
    if ev.verdict == NO_LEADER:
        reason = f"{ev.headline}: {ev.seen}; {led}; {ev.stops} ({shown}){down}"
    elif ev.verdict == OFFLINE:
        reason = (f"{ev.headline}: {ev.seen}; nothing is delivered or acknowledged until a server that supports it "
                  f"runs it ({shown}); {led}")
    else:
        reason = (f"the cluster's JetStream API does not answer ({ev.seen}): this consumer's state is unknown "
                  f"({shown}); {led}; a consumer whose server still runs may still deliver{down}")
    numbers = {"leader": leader if isinstance(leader, str) else "", "servers": ", ".join(ev.servers)}
    if ev.verdict == OFFLINE:
        numbers["offline_reason"] = ev.seen
    return {"verdict": ev.verdict, "reason": reason, "numbers": numbers}


@dataclass(frozen=True)
class Outage:
    """One failure of the cluster as on-call reads it: every consumer it stops, at once, instead of
    as many unrelated rows. A consumer without a leader is grouped with its stream's others; the
    API not answering with its account's, since that is what it is about."""

    cluster: str | None
    verdict: str
    account: str | None
    stream: str | None  # None: every stream of the account (API_UNAVAILABLE)
    consumers: tuple[str, ...]
    since: float | None  # epoch seconds: the earliest of its consumers' since
    servers: tuple[str, ...]


def outages(rows: Sequence[Mapping[str, Any]]) -> list[Outage]:
    """The cluster failures among verdict rows (cluster, account, stream, consumer, verdict,
    since in epoch seconds, findings), worst and largest first."""
    groups: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for row in rows:
        verdict = row.get("verdict")
        if verdict not in (NO_LEADER, API_UNAVAILABLE, OFFLINE):
            continue
        servers = _servers(row.get("findings"), verdict)
        stream = row.get("stream") if verdict != API_UNAVAILABLE else None
        groups.setdefault((row.get("cluster"), verdict, row.get("account"), stream, servers), []).append(row)
    found = []
    for (cluster, verdict, account, stream, servers), members in groups.items():
        sinces = [float(s) for m in members if isinstance(s := m.get("since"), (int, float)) and s == s]
        found.append(Outage(cluster, verdict, account, stream,
                            tuple(sorted(str(m.get("consumer")) for m in members)), min(sinces) if sinces else None,
                            servers))
    return sorted(found, key=lambda o: (o.verdict != API_UNAVAILABLE, -len(o.consumers), str(o.stream)))


def _servers(findings: object, verdict: str) -> tuple[str, ...]:
    for f in findings if isinstance(findings, list) else ():
        if isinstance(f, dict) and f.get("verdict") == verdict:
            named = (f.get("numbers") or {}).get("servers")
            if isinstance(named, str) and named:
                return tuple(s.strip() for s in named.split(","))
    return ()


def outage_line(o: Outage, since: str, shown: int = 5) -> str:
    """One line for an outage: how many consumers, which, since when, which servers, and what it
    means; `since` already in words."""
    names = ", ".join(o.consumers[:shown]) + (f" and {len(o.consumers) - shown} more" if len(o.consumers) > shown else "")
    n = len(o.consumers)
    them = f"{n} consumer{'s' if n != 1 else ''}"
    down = f"; servers not answering: {', '.join(o.servers)}" if o.servers else ""
    where = f" in cluster {o.cluster}" if o.cluster else ""
    if o.verdict == NO_LEADER:
        return (f"{them} of stream {o.stream}{where} ({names}): no server leads {'them' if n != 1 else 'it'} since "
                f"{since}{down}. Nothing is delivered or acknowledged until a leader is elected.")
    if o.verdict == OFFLINE:
        return (f"{them} of stream {o.stream}{where} ({names}): a running server cannot load "
                f"{'them' if n != 1 else 'it'} since {since} (an asset it does not support, as after a downgrade). "
                "Nothing is delivered or acknowledged until a server that supports it runs it.")
    account = f" of account {o.account}" if o.account else ""
    return (f"{them}{account}{where} ({names}): the cluster's JetStream API does not answer since {since}{down}. "
            "Their state is shown as last known, not judged.")
