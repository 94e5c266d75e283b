"""Alerts from the verdicts, straight to Alertmanager's v2 API (no Prometheus needed).

The consumer alerts are declared once here, by verdict; deploy/prometheus/jetwatch-rules.yml
holds the same alerts as Prometheus rules over `jetwatch_consumer_verdict`, and a test keeps the
two in step (names, severities, verdicts, annotations). As Prometheus does, every firing alert is
re-sent each cycle with an `endsAt` a few cycles ahead (Alertmanager expires alerts it stops
hearing about), and a resolved alert is sent once with `endsAt` = now (retried until delivered).

Alert identity is the label set; its `startsAt` is when it fired: the verdict's `since` (kept in
the store) plus `--alert-after`. So a restarted collector sends the very same alert again, which
Alertmanager treats as the one it already has: no new notification, nothing lost; and a verdict
that changed while the collector was down is resolved from the store's previous `since`.
"""

from __future__ import annotations

import base64
import datetime as dt
import http.client
import json
import logging
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote_plus, urlsplit

import pandas as pd

from jetwatch.core import deadline_http
from jetwatch.core.clock import rfc3339
from jetwatch.core.pin_announce import HolderKey, holder_key
from jetwatch.core.urls import split_userinfo
from jetwatch.exporters.metrics import pin_holder_label
from jetwatch.health import silences

log = logging.getLogger("jetwatch.alerts")


@dataclass(frozen=True)
class ConsumerAlert:
    name: str
    verdicts: tuple[str, ...]
    severity: str


CONSUMER_ALERTS: tuple[ConsumerAlert, ...] = (
    ConsumerAlert("JetwatchConsumerNotServed", ("NO_LEADER", "API_UNAVAILABLE", "OFFLINE"), "critical"),
    ConsumerAlert("JetwatchConsumerUnhealthy", ("STALLED", "NO_PULLERS", "PIN_IDLE", "SATURATED", "STREAM_FULL"), "critical"),
    ConsumerAlert("JetwatchConsumerUnhealthy", ("REDELIVERING", "LAGGING"), "warning"),
    ConsumerAlert("JetwatchConsumerLosingMessages", ("LOSING",), "critical"),
    ConsumerAlert("JetwatchPinnedGroupUnpinned", ("UNPINNED",), "warning"),
    ConsumerAlert("JetwatchConsumerFlapping", ("FLAPPING",), "warning"),
)
BY_VERDICT: dict[str, ConsumerAlert] = {v: a for a in CONSUMER_ALERTS for v in a.verdicts}


def consumer_link(dashboard_url: str, account: str, stream: str, consumer: str, cluster: str) -> str:
    """The dashboard's deep link to one consumer of one cluster (Go's `urlquery` escaping, as in
    the rules; an empty cluster opens the first cluster that has the consumer)."""
    base = dashboard_url if dashboard_url.endswith("/") else dashboard_url + "/"
    return (f"{base}consumer?account={quote_plus(account)}&stream={quote_plus(stream)}"
            f"&consumer={quote_plus(consumer)}&cluster={quote_plus(cluster)}")


def labels_for(alert: ConsumerAlert, verdict: str, cluster: str, account: str, stream: str, consumer: str,
               group: str) -> dict[str, str]:
    """The rule's labels: alertname, severity and the metric's labels; an empty label is no label
    (as in Prometheus)."""
    labels = {"alertname": alert.name, "severity": alert.severity, "cluster": cluster, "account": account,
              "stream": stream, "consumer": consumer, "group": group, "verdict": verdict}
    return {k: v for k, v in labels.items() if v}


def annotations_for(labels: dict[str, str], dashboard_url: str, holder: str = "") -> dict[str, str]:
    """The rules' annotations, rendered for these labels; `holder`: who holds the consumer's pin,
    as `jetwatch_consumer_pin_info`'s `pin_holder` says it ('' for no pin)."""
    stream, consumer, account = labels["stream"], labels["consumer"], labels["account"]
    return {
        "summary": f"{stream}/{consumer} is {labels['verdict']}",
        "description": f"jetwatch judged consumer {consumer} of stream {stream} (account {account}) "
                       f"{labels['verdict']}; its findings and actions are on the dashboard."
                       + (f" The pin is held by {holder}." if holder else ""),
        "runbook_url": consumer_link(dashboard_url, account, stream, consumer, labels.get("cluster", "")),
    }


def _text(value: object) -> str:
    return "" if value is None or (not isinstance(value, (list, tuple)) and pd.isna(value)) else str(value)


def _group(row: object) -> str:
    pinned = _text(getattr(row, "pin_group", None))
    if pinned:
        return pinned
    groups = getattr(row, "priority_groups", None)
    return str(groups[0]) if groups is not None and not isinstance(groups, float) and len(groups) else ""


def _holder(row: object, holders: dict[HolderKey, tuple[str, str]]) -> str:
    """Who holds the row's pin, as /metrics says it to the rules ('' for no pin)."""
    pin = _text(getattr(row, "pinned_id", None))
    key = holder_key(getattr(row, "account", None), getattr(row, "stream", None), getattr(row, "consumer", None), pin)
    return pin_holder_label(pin, holders.get(key)) if pin else ""


def _silenced(consumers: pd.DataFrame) -> pd.Series:
    """Which consumers' alerts a silence holds back (the `silenced` column health/silences.py's
    `attach` adds; none without it)."""
    if "silenced" not in consumers:
        return pd.Series(False, index=consumers.index)
    return consumers["silenced"].fillna(False).astype(bool)


def held_back(consumers: pd.DataFrame, now: dt.datetime) -> dict[tuple, str]:
    """The alerts a silence holds back now, by label set, each with the silence in words."""
    out: dict[tuple, str] = {}
    if consumers.empty:
        return out
    for row in consumers[_silenced(consumers) & consumers["verdict"].isin(list(BY_VERDICT))].itertuples(index=False):
        labels = labels_for(BY_VERDICT[row.verdict], row.verdict, _text(getattr(row, "cluster", None)),
                            row.account, row.stream, row.consumer, _group(row))
        out[tuple(sorted(labels.items()))] = silences.words(row._asdict(), now)
    return out


def firing(consumers: pd.DataFrame, now: dt.datetime, after_s: float, dashboard_url: str,
           resend_s: float, holders: dict[HolderKey, tuple[str, str]] | None = None) -> dict[tuple, dict[str, Any]]:
    """The alerts firing now, by label set: consumers whose verdict has an alert and has held
    for at least `after_s`, and no silence holds back; each naming its pin's holder (`holders`:
    pin id -> (announced name, verification))."""
    out: dict[tuple, dict[str, Any]] = {}
    if consumers.empty:
        return out
    candidates = consumers[consumers["verdict"].isin(list(BY_VERDICT)) & ~_silenced(consumers)]
    for row in candidates.itertuples(index=False):
        since = pd.Timestamp(row.since)
        fired_at = since + pd.Timedelta(seconds=after_s)
        if fired_at > pd.Timestamp(now):
            continue
        labels = labels_for(BY_VERDICT[row.verdict], row.verdict, _text(getattr(row, "cluster", None)),
                            row.account, row.stream, row.consumer, _group(row))
        out[tuple(sorted(labels.items()))] = {
            "labels": labels, "annotations": annotations_for(labels, dashboard_url, _holder(row, holders or {})),
            "startsAt": rfc3339(fired_at.to_pydatetime()),
            "endsAt": rfc3339(now + dt.timedelta(seconds=resend_s)),
            "generatorURL": consumer_link(dashboard_url, row.account, row.stream, row.consumer,
                                          labels.get("cluster", "")),
        }
    return out


def resolved_from_changes(changes: pd.DataFrame, consumers: pd.DataFrame, now: dt.datetime, after_s: float,
                          dashboard_url: str) -> dict[tuple, dict[str, Any]]:
    """Alerts a transition of this cycle ended: the old verdict had an alert and had held long
    enough to fire. Found from the store's previous `since`, so they are resolved even when the
    collector restarted in between."""
    out: dict[tuple, dict[str, Any]] = {}
    if changes.empty or "from_since" not in changes:
        return out
    where = consumers.set_index(["account", "stream", "consumer"]) if not consumers.empty else None
    for row in changes.itertuples(index=False):
        alert = BY_VERDICT.get(_text(row.from_verdict))
        if alert is None or pd.isna(row.from_since):
            continue
        fired_at = pd.Timestamp(row.from_since) + pd.Timedelta(seconds=after_s)
        if fired_at > pd.Timestamp(now):
            continue
        cluster = group = ""
        key = (row.account, row.stream, row.consumer)
        if where is not None and key in where.index:
            state = where.loc[key]
            cluster = _text(state.get("cluster"))
            group = _group(state)
        labels = labels_for(alert, row.from_verdict, cluster, row.account, row.stream, row.consumer, group)
        out[tuple(sorted(labels.items()))] = {
            "labels": labels, "annotations": annotations_for(labels, dashboard_url),
            "startsAt": rfc3339(fired_at.to_pydatetime()), "endsAt": rfc3339(now),
            "generatorURL": consumer_link(dashboard_url, row.account, row.stream, row.consumer,
                                          labels.get("cluster", "")),
        }
    return out


# Alertmanager answers a post with a few bytes (an empty body, or a short error): only the first
# few hundred are ever said, so a longer reply is not Alertmanager's and is not read.
REPLY_BYTES = 4 << 10


class AlertmanagerClient:
    """Posts alerts to Alertmanager's /api/v2/alerts; remembers what fired to resolve it.

    A post has a total deadline (`timeout_s`), not only a socket timeout: an Alertmanager (or a
    proxy in front of it) that trickles its answer a byte at a time keeps every read alive and
    would hold a post, and every later one behind it, for ever. At the deadline, or when the
    collector stops (`abort`), the socket is shut down under the blocked read."""

    def __init__(self, url: str, after_s: float, dashboard_url: str, interval_s: float, timeout_s: float = 5.0):
        bare, user, password = split_userinfo(url)
        self.url = bare.rstrip("/") + "/api/v2/alerts"  # as said in errors and logs: no credentials
        self._auth = None if user is None else "Basic " + base64.b64encode(
            f"{user}:{password or ''}".encode()).decode()
        self.after_s = after_s
        self.dashboard_url = dashboard_url
        self.resend_s = max(4 * interval_s, 60.0)  # Alertmanager keeps an alert this long unheard
        self.timeout_s = timeout_s
        self.firing: dict[tuple, dict[str, Any]] = {}
        self.unsent_resolved: dict[tuple, dict[str, Any]] = {}
        self.posts = 0
        self._lock = threading.Lock()  # post() runs on a worker thread, alerts_for() on the loop
        self._open: http.client.HTTPConnection | None = None  # the post under way, to cut
        self._aborted = False

    def alerts_for(self, consumers: pd.DataFrame, changes: pd.DataFrame, now: dt.datetime,
                   holders: dict[HolderKey, tuple[str, str]] | None = None) -> list[dict[str, Any]]:
        """This cycle's post: every firing alert (naming its pin's holder, from `holders`), and
        every alert resolved since the last post."""
        now_firing = firing(consumers, now, self.after_s, self.dashboard_url, self.resend_s, holders)
        resolved = resolved_from_changes(changes, consumers, now, self.after_s, self.dashboard_url)
        held = held_back(consumers, now)
        with self._lock:
            for key, alert in self.firing.items():
                if key not in now_firing and key not in resolved:
                    resolved[key] = {**alert, "endsAt": rfc3339(now)}
                if key in held and key in resolved:  # ended by a silence, not by a recovery: said so
                    resolved[key] = {**resolved[key], "annotations": {**resolved[key]["annotations"],
                                                                      "silenced": held[key]}}
            self.unsent_resolved.update({k: v for k, v in resolved.items() if k not in now_firing})
            for key in now_firing:  # firing again: no longer resolved
                self.unsent_resolved.pop(key, None)
            self.firing = now_firing
            return list(now_firing.values()) + list(self.unsent_resolved.values())

    def _connection(self) -> tuple[http.client.HTTPConnection, str]:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise OSError(f"--alertmanager {self.url.removesuffix('/api/v2/alerts')!r} is not an http:// or "
                          "https:// URL: alerts are not sent")
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        return deadline_http.connection(parts.hostname, parts.port, parts.scheme == "https", self.timeout_s), path

    def abort(self) -> None:
        """The collector is stopping: cut the post under way, and send none after it."""
        with self._lock:
            self._aborted = True
            conn = self._open
        if conn is not None:
            deadline_http.cut(conn)

    def post(self, alerts: list[dict[str, Any]]) -> None:
        """One POST (blocking: run it off the event loop), over within `timeout_s` whatever the
        other end does. Resolved alerts are forgotten only once Alertmanager took them."""
        if not alerts:
            return
        conn, path = self._connection()
        late = threading.Event()

        def deadline() -> None:
            late.set()
            deadline_http.cut(conn)

        timer = threading.Timer(self.timeout_s, deadline)
        with self._lock:
            if self._aborted:
                return
            self._open = conn
        timer.start()
        try:
            headers = {"Content-Type": "application/json", **({"Authorization": self._auth} if self._auth else {})}
            conn.request("POST", path, body=json.dumps(alerts).encode(), headers=headers)
            reply = conn.getresponse()
            status = reply.status
            body = deadline_http.read_capped(reply, REPLY_BYTES, f"Alertmanager at {self.url}")
        except deadline_http.TooLarge as exc:
            if status >= 300:  # a refusal all the same (a proxy's error page, say): its status is what counts
                raise OSError(f"Alertmanager at {self.url} refused the alerts: HTTP {status} (its reply, longer than "
                              f"{REPLY_BYTES:,} bytes, was not read)") from None
            raise OSError(f"{exc}: alerts are re-sent next cycle; check that {self.url} is Alertmanager's (it answers "
                          "a post with a few bytes)") from None
        except (OSError, http.client.HTTPException) as exc:
            if late.is_set():
                raise OSError(f"Alertmanager at {self.url} did not answer within {self.timeout_s:g}s (it accepted "
                              "the connection but its reply never completed): alerts are re-sent next cycle; "
                              "check that Alertmanager (or a proxy in front of it) is healthy") from None
            if self._aborted:
                raise OSError(f"the post to Alertmanager at {self.url} was cut: the collector is stopping") from None
            raise OSError(f"cannot reach Alertmanager at {self.url} ({exc}): alerts are re-sent next cycle") from None
        finally:
            timer.cancel()
            with self._lock:
                self._open = None
            conn.close()
        if status >= 300:
            raise OSError(f"Alertmanager at {self.url} refused the alerts: HTTP {status} "
                          f"{body[:300].decode(errors='replace')}")
        resolved_sent = {tuple(sorted(a["labels"].items())): a["endsAt"] for a in alerts}
        with self._lock:
            self.posts += 1
            self.unsent_resolved = {k: v for k, v in self.unsent_resolved.items()
                                    if resolved_sent.get(k) != v["endsAt"]}
