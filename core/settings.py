"""One settings object for every jetwatch process.

Each setting is declared once, as (name, default, help). The same declaration gives the
command-line flag, the `JETWATCH_<NAME>` environment variable and the reference table in
docs/configuration.md, so a setting cannot exist in one place and be missing from another. Precedence, lowest first:
default, NATS context (connection settings only), environment, flag.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jetwatch.core.errors import UsageError
from jetwatch.core.urls import split_userinfo


class SettingsError(UsageError, ValueError):
    """A setting has a value jetwatch cannot use; the message says which and what to do."""


# The longest duration any setting takes, beside its own range: a century. Longer ones (or "1e400")
# would be taken by a setting without a maximum and overflow the first date computed from them.
MAX_DURATION_SECONDS = 36500 * 86400.0
# The largest count or size any setting takes: what a server (a stream's max_bytes) or a socket can hold.
MAX_INT = (1 << 63) - 1
# --monitor-max-bytes by default, also for the monitoring readers built without settings: a /jsz of
# 100,000 consumers with their configs, with room for long names, metadata and replicas
# (docs/configuration.md says how it was chosen).
MONITOR_MAX_BYTES = 512 << 20


def parse_duration(text: str | float | int) -> float:
    """Seconds from '500ms', '5s', '2m', '1h', '7d' or a bare number of seconds."""
    if isinstance(text, (int, float)):
        return float(text)
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*", str(text), re.ASCII)
    if not m:
        raise SettingsError(
            f"'{text}' is not a duration: write a number with a unit, such as 500ms, 5s, 2m, 1h or 7d"
        )
    value, unit = float(m.group(1)), m.group(2) or "s"
    return value * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}[unit]


def parse_instant(text: str, now: dt.datetime, backwards: bool = False) -> dt.datetime:
    """An RFC 3339 time, or a duration from `now` (ahead, or back when `backwards`) such as 10m."""
    try:
        seconds = parse_duration(text)
    except SettingsError:
        pass
    else:
        try:
            return now - dt.timedelta(seconds=seconds) if backwards else now + dt.timedelta(seconds=seconds)
        except OverflowError:
            raise SettingsError(f"'{text:.40}' from now is past the last date there is") from None
    try:
        # Servers write nanoseconds; Python keeps microseconds.
        t = dt.datetime.fromisoformat(re.sub(r"(\.\d{6})\d+", r"\1", text.strip().replace("Z", "+00:00")))
    except ValueError:
        raise SettingsError(f"'{text}' is neither an RFC 3339 time (2026-11-22T10:00:00Z) nor a duration "
                            "(10m, 2h)") from None
    return t if t.tzinfo else t.replace(tzinfo=dt.UTC)


def parse_size(text: str | int) -> int:
    """Bytes from '256MB', '1GB', '512KB' or a bare number of bytes."""
    if isinstance(text, int):
        return text
    m = re.fullmatch(r"\s*(\d+)\s*(B|KB|MB|GB|TB)?\s*", str(text), re.IGNORECASE | re.ASCII)
    if not m:
        raise SettingsError(f"'{text}' is not a size: write a number with a unit, such as 256MB or 1GB")
    mult = {"b": 1, "kb": 1 << 10, "mb": 1 << 20, "gb": 1 << 30, "tb": 1 << 40}
    digits = m.group(1).lstrip("0") or "0"
    if len(digits) > 19 or int(digits) * mult[(m.group(2) or "b").lower()] > MAX_INT:
        raise SettingsError(f"'{text:.40}' is larger than any size a server takes (at most {MAX_INT} bytes)")
    return int(digits) * mult[(m.group(2) or "b").lower()]


def parse_bool(text: str | bool) -> bool:
    if isinstance(text, bool):
        return text
    low = str(text).strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off", ""):
        return False
    raise SettingsError(f"'{text}' is not true or false")


def parse_cardinality(text: str) -> str:
    """How many per-consumer series /metrics exports: `auto`, `non_ok` or `all`."""
    value = str(text).strip().lower().replace("-", "_")
    if value not in ("auto", "non_ok", "all"):
        raise SettingsError(f"'{text}' is not a metrics cardinality: write auto (every consumer up to "
                            "--metrics-all-up-to, non-OK ones above), non_ok (non-OK consumers only) or all")
    return value


def parse_account_map(text: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """`ACCOUNT=CONTEXT` or `ACCOUNT=/path/user.creds` pairs, checked here so a typo is said at start."""
    pairs = parse_list(text)
    for pair in pairs:
        account, _, where = pair.partition("=")
        if not account.strip() or not where.strip():
            raise SettingsError(f"'{pair}' is not ACCOUNT=CONTEXT or ACCOUNT=/path/to/user.creds")
    return tuple(f"{a.strip()}={w.strip()}" for a, _, w in (p.partition("=") for p in pairs))


DEFAULT_CLUSTER = "default"  # the cluster of a store no collector has claimed (one written before clusters)
_CLUSTER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def parse_cluster(text: str) -> str:
    """A cluster label: letters, digits, `_`, `.` and `-`, up to 64 (it goes into labels and links)."""
    value = str(text).strip()
    if not _CLUSTER_NAME.fullmatch(value):
        raise SettingsError(f"'{text}' is not a cluster name: use letters, digits, '_', '.' and '-' "
                            "(up to 64, starting with a letter or digit), such as eu-prod")
    return value


def parse_server_map(text: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """`CLUSTER=URL` pairs: where actions on each cluster's consumers connect."""
    pairs = parse_list(text)
    out = []
    for pair in pairs:
        cluster, _, url = pair.partition("=")
        if not url.strip():
            raise SettingsError(f"'{pair}' is not CLUSTER=URL (such as eu-prod=nats://nats-eu:4222)")
        out.append(f"{parse_cluster(cluster)}={url.strip()}")
    return tuple(out)


def parse_host_port(text: str) -> str:
    """`HOST:PORT`, `:PORT` or `PORT` (the host then 127.0.0.1), the port from 0 (any free one) to
    65535: checked here, so a wrong one is said at start rather than when the socket is made."""
    value = str(text).strip()
    if not value:
        return value
    port = value.rpartition(":")[2]
    if not (port.isascii() and port.isdigit()):
        raise SettingsError(f"'{text}' is not HOST:PORT (for example 127.0.0.1:9464)")
    if len(port.lstrip("0")) > 5 or int(port) > 65535:
        raise SettingsError(f"port {port[:12]} is out of range: allowed from 0 to 65535 (HOST:PORT, such as "
                            "127.0.0.1:9464)")
    return value


def parse_list(text: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    if isinstance(text, (list, tuple)):
        return tuple(text)
    return tuple(p.strip() for p in str(text).split(",") if p.strip())


def parse_url_list(text: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """URLs, comma separated, each one urllib can split (its credentials are taken out of it)."""
    urls = parse_list(text)
    for url in urls:
        try:
            split_userinfo(url)
        except ValueError as exc:  # an unclosed IPv6 bracket, a port that is not a number
            raise SettingsError(f"{url.rpartition('@')[2][:60]!r} is not a URL ({exc}); write "
                                "http://host:8222") from None
    return urls


@dataclass(frozen=True)
class Setting:
    name: str
    default: Any
    help: str
    parse: Callable[[Any], Any] = str
    group: str = "general"
    secret: bool = False
    minimum: float | None = None  # allowed range, inclusive, in the parsed unit (seconds, bytes)
    maximum: float | None = None
    has_flag: bool = True  # False: environment (or a file setting) only, so it never shows in `ps`

    @property
    def env(self) -> str:
        return "JETWATCH_" + self.name.upper()

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


SETTINGS: tuple[Setting, ...] = (
    # connection
    Setting("server", None, "NATS server URL(s), comma separated. With none, `up` starts an embedded server.", str, "connection"),
    Setting("context", None, "Name of a `nats` CLI context to read connection settings from.", str, "connection"),
    Setting("user", None, "User name for user/password authentication.", str, "connection"),
    Setting("password", None, "Password for user/password authentication.", str, "connection", secret=True),
    Setting("token", None, "Authentication token.", str, "connection", secret=True),
    Setting("nkey", None, "Path to an NKey seed file.", str, "connection"),
    Setting("creds", None, "Path to a credentials (JWT + seed) file.", str, "connection"),
    Setting("tls_ca", None, "CA certificate file to verify the server.", str, "connection"),
    Setting("tls_cert", None, "Client certificate file (mutual TLS).", str, "connection"),
    Setting("tls_key", None, "Client key file (mutual TLS).", str, "connection"),
    Setting("connect_timeout", 5.0, "Seconds to wait for a connection before giving up on it.", parse_duration, "connection", minimum=0.1, maximum=3600.0),
    Setting("request_timeout", 5.0, "Seconds to wait for a JetStream API reply.", parse_duration, "connection", minimum=0.1, maximum=3600.0),
    # connection: actions on other accounts' consumers
    Setting("account_contexts", (), "The credentials actions on each account's consumers connect with, comma separated `ACCOUNT=CONTEXT` (a `nats` CLI context name) or `ACCOUNT=/path/user.creds`, on the server the action names (--server, or its cluster's; a context's own URL only when there is none). An action on an account neither mapped nor the connection's own is refused before anything is sent.", parse_account_map, "connection"),
    # connection: several clusters
    Setting("server_for", (), "Where actions on each cluster's consumers connect, comma separated `CLUSTER=URL` (the connection's credentials are used). Without an entry, an action goes to the server that cluster's collector last reported (its `collector_status.server_url`).", parse_server_map, "connection"),
    # store
    Setting("db", "jetwatch-data/jetwatch.duckdb", "Path of the DuckDB store file.", str, "store"),
    # store: several clusters, one store each
    Setting("cluster", DEFAULT_CLUSTER, "Name of the cluster (or account) the collector watches. A store belongs to the cluster that first wrote it, and a collector of another cluster refuses to write into it: one store per cluster. Every row that leaves a store (pages, exports, /metrics, alerts) carries it.", parse_cluster, "store"),
    Setting("dbs", (), "The stores of a fleet, comma separated: store files, or directories whose `*.duckdb` files are all read. The dashboard, the pipeline, `status`, `check` and `audit verify` read all of them (instead of --db); each is its own cluster.", parse_list, "store"),
    Setting("lock_timeout", 15.0, "Longest wait for the store file when another process holds it.", parse_duration, "store", minimum=0.1, maximum=86400.0),
    Setting("raw_retention", 7 * 86400.0, "How long raw samples are kept; older history lives on as rollups.", parse_duration, "store", minimum=3600.0),
    Setting("event_retention", 90 * 86400.0, "How long advisories and rejects are kept.", parse_duration, "store", minimum=3600.0),
    # store: writers first, retention in the collector
    Setting("write_backlog", 200_000, "Most samples the collector keeps in memory while the store file is held by another process; they are written with the next cycle that gets the file (beyond this the oldest cycles are given up, and counted).", int, "store", minimum=1000),
    Setting("seal_every", 120.0, "Span of raw samples the collector seals at a time, by its own clock of the cycles: once its unsealed samples span this, it stores the oldest span again ordered by consumer, so that one consumer's history is read without the rest of the fleet's. Shorter: smaller, more frequent moves.", parse_duration, "store", minimum=1.0, maximum=86400.0),
    Setting("retention_every", 600.0, "How often the collector deletes what is past --raw-retention and --event-retention (raw samples only where hourly rollups cover them) and reclaims the space.", parse_duration, "store", minimum=1.0, maximum=86400.0),
    # collection
    Setting("interval", 5.0, "Seconds between samples of consumer state.", parse_duration, "collect", minimum=0.1, maximum=3600.0),
    Setting("monitor_url", (), "HTTP monitoring URL(s) of every server, comma separated: samples via /jsz instead of CONSUMER.LIST.", parse_url_list, "collect"),
    Setting("monitor_max_bytes", MONITOR_MAX_BYTES, "Largest reply the collector reads from a monitoring port (/jsz, /varz, /connz of --monitor-url): a longer one is given up, said in the collector's status, and the cycle goes on without that server's report. The default holds a /jsz of 100,000 consumers with their configs several times over (docs/configuration.md says how it was chosen).", parse_size, "collect", minimum=1 << 20),
    Setting("system_context", None, "Name of a `nats` CLI context for a system-account user: samples every account via `$SYS.REQ.SERVER.PING.JSZ` instead of CONSUMER.LIST.", str, "collect"),
    Setting("capture_stream", "JETWATCH_ADVISORIES", "Name of the JetStream stream that captures consumer advisories durably.", str, "collect"),
    Setting("capture_max_age", 7 * 86400.0, "Longest time the capture stream keeps an advisory.", parse_duration, "collect", minimum=60.0),
    Setting("capture_max_bytes", 256 << 20, "Largest size of the capture stream.", parse_size, "collect", minimum=1 << 20),
    Setting("inference_grace", 10.0, "How long a pin change seen only in sampled state waits for its advisory before it is recorded as inferred.", parse_duration, "collect", minimum=0.0, maximum=86400.0),
    Setting("deploy_window", 60.0, "Pins of at least --deploy-groups consumers moving (other than by an operator or a leader change) within this time of each other are a deploy; so is a pin whose next holder announced another version. Pin switches are counted in /metrics by cause once this has passed.", parse_duration, "collect", minimum=1.0, maximum=86400.0),
    Setting("deploy_groups", 3, "How many consumers' pins must move within --deploy-window for the moves to count as a deploy.", int, "collect", minimum=2, maximum=100000),
    Setting("holder_pulls", 1, "Pull requests a pin holder keeps waiting at once (1 for a pull loop; 2 for clients that pull ahead, such as the JavaScript client's consume()): with nothing pending, waiting pulls beyond this many are a standby's.", int, "collect", minimum=0, maximum=1000),
    Setting("capture_unpin_requests", True, "Read the server's API audit advisory ($JS.EVENT.ADVISORY.API) to name the client behind each unpin not made through jetwatch. The server then publishes an advisory for every JetStream API call of the account, jetwatch's own listing included (only unpin requests are kept): off saves that traffic where the collector samples with CONSUMER.LIST at scale.", parse_bool, "collect"),
    Setting("include_streams", (), "Only these streams (glob patterns, comma separated).", parse_list, "collect"),
    Setting("exclude_streams", (), "Never these streams (glob patterns, comma separated).", parse_list, "collect"),
    Setting("include_consumers", (), "Only these consumers (glob patterns, comma separated).", parse_list, "collect"),
    Setting("exclude_consumers", (), "Never these consumers (glob patterns, comma separated).", parse_list, "collect"),
    Setting("show_internal", False, "Also watch jetwatch's capture stream and KV_*/OBJ_* streams.", parse_bool, "collect"),
    Setting("lag_every", 0.0, "How often the collector reads the oldest messages' timestamps from the streams (0: every cycle); in between, an age whose floor has not moved still grows from its cached timestamp, and the rest are estimates.", parse_duration, "collect", minimum=0.0, maximum=86400.0),
    Setting("lag_concurrency", 128, "Most message reads (DIRECT.GET or STREAM.MSG.GET) for time lag in flight at once (they are pipelined over one subscription, this many per round trip).", int, "collect", minimum=1, maximum=1024),
    Setting("lag_rotation", 5, "Consumers that are OK get their ages read in turn, each once every this many cycles (every non-OK consumer is read each cycle); an age not read is shown as an estimate.", int, "collect", minimum=1, maximum=100),
    # health
    Setting("health_window", 300.0, "Window of samples a verdict is judged over.", parse_duration, "health", minimum=1.0, maximum=30 * 86400.0),
    Setting("health_min_samples", 3, "Fewest samples in the window for a verdict (else COLLECTING).", int, "health", minimum=1),
    Setting("health_min_span", 20.0, "Shortest time the window's samples must span for a verdict (the shortest rule duration: no rule can name anything sooner).", parse_duration, "health", minimum=0.0, maximum=30 * 86400.0),
    Setting("saturation_ratio", 0.9, "Share of max_ack_pending or max_waiting that counts as SATURATED.", float, "health", minimum=0.01, maximum=1.0),
    Setting("unpinned_after", 30.0, "How long a pinned_client consumer with work pending may go without a pin before UNPINNED.", parse_duration, "health", minimum=0.0),
    Setting("flapping_switches", 4, "More pin switches than this in the window is FLAPPING.", int, "health", minimum=0),
    Setting("redelivery_share", 0.1, "Share of deliveries that are redeliveries above which the verdict is REDELIVERING.", float, "health", minimum=0.0, maximum=1.0),
    Setting("stalled_after", 20.0, "How long work in flight may go unacknowledged before STALLED, where the consumer acknowledged faster before (its own rhythm, doubled, if longer); at the latest STALLED when ack_wait passes with nothing acknowledged or delivered.", parse_duration, "health", minimum=0.0, maximum=30 * 86400.0),
    Setting("no_pullers_after", 20.0, "How long work may wait with nothing in flight and no pull before NO_PULLERS (a consumer's own pull rhythm, doubled, if longer).", parse_duration, "health", minimum=0.0, maximum=30 * 86400.0),
    Setting("pin_idle_after", 20.0, "How long a pinned client may go without pulling while work waits and another client's pull waits, before PIN_IDLE (its own pull rhythm, doubled, if longer).", parse_duration, "health", minimum=0.0, maximum=30 * 86400.0),
    Setting("lagging_after", 30.0, "How long the oldest unacknowledged message may keep getting older before LAGGING (the consumer's own catch-up rhythm, doubled, if longer).", parse_duration, "health", minimum=0.0, maximum=30 * 86400.0),
    Setting("loss_within", 3600.0, "LOSING when the stream's limits (max_age, max_msgs, max_bytes with discard old) will remove messages a consumer has not processed within this time, at the current arrival and acknowledgement rates.", parse_duration, "health", minimum=0.0, maximum=365 * 86400.0),
    Setting("losing_after", 60.0, "How long a loss within --loss-within must stay projected, every cycle, before LOSING (messages already removed unprocessed are LOSING at once): a pause of the workers projects one for as long as it lasts, and a projection is a verdict only once it holds.", parse_duration, "health", minimum=0.0, maximum=30 * 86400.0),
    Setting("reset_shown_for", 86400.0, "How long after a consumer reset it stays a config finding once the health window no longer holds it (0: only while the window does).", parse_duration, "health", minimum=0.0, maximum=30 * 86400.0),
    Setting("no_leader_after", 15.0, "How long the cluster must keep showing that it cannot serve a consumer (no server leads it, its JetStream API does not answer, or a running server cannot load it) before NO_LEADER, API_UNAVAILABLE or OFFLINE: a leader election takes seconds and is no incident.", parse_duration, "health", minimum=0.0, maximum=3600.0),
    Setting("clear_after", 10.0, "How long a verdict's cause must be gone before the verdict eases (alerts do not flap).", parse_duration, "health", minimum=0.0, maximum=86400.0),
    Setting("lagging_age", 600.0, "A consumer whose oldest unacknowledged message is older than this is at least LAGGING, whatever its trend.", parse_duration, "health", minimum=1.0, maximum=30 * 86400.0),
    Setting("demo", False, "The dashboard runs beside `jetwatch up`'s demo workload: the Fleet says what the demo scripts on each consumer and what jetwatch should say about it.", parse_bool, "dashboard", has_flag=False),
    Setting("stale_after", 30.0, "A cluster whose newest data is older than this is named as stale: on every page, by `status` (on stderr) and by `check` (UNKNOWN). Each cluster is judged on its own.", parse_duration, "dashboard", minimum=0.0),
    # exporters: /metrics and Alertmanager, fed by the collector's verdicts each cycle
    Setting("metrics_address", None, "Serve Prometheus metrics at HOST:PORT/metrics (PORT alone: 127.0.0.1:PORT). Off when empty.", parse_host_port, "exporters"),
    Setting("metrics_cardinality", "auto", "Per-consumer series for `all` consumers, for `non_ok` consumers only, or `auto`: all while the fleet has at most --metrics-all-up-to consumers (a dashboard then has every consumer's history from before it went wrong), non-OK only above; fleet totals are always exported.", parse_cardinality, "exporters"),
    Setting("metrics_all_up_to", 1000, "Under `--metrics-cardinality auto`, the most consumers whose every series is exported: about 25 series each, so 25,000 at the default, which one Prometheus holds at ease; above it, only non-OK consumers (and findings) are.", int, "exporters", minimum=0, maximum=10_000_000),
    Setting("alertmanager", None, "Alertmanager URL: post firing and resolved alerts to its /api/v2/alerts each cycle. Off when empty.", str, "exporters"),
    Setting("alert_after", 0.0, "How long a consumer stays non-OK before its alert fires, beyond its verdict's own duration (the rules' `for`: none by default, as each verdict already holds for its rule's duration).", parse_duration, "exporters", minimum=0.0),
    Setting("dashboard_url", "http://127.0.0.1:8501/", "The dashboard's address, for the alerts' runbook links.", str, "exporters"),
    # dashboard and actions
    Setting("address", "127.0.0.1", "Address the dashboard listens on.", str, "dashboard"),
    Setting("port", 8501, "Port the dashboard listens on.", int, "dashboard", minimum=1, maximum=65535),
    Setting("refresh", 2.0, "Seconds between refreshes of the live views.", parse_duration, "dashboard", minimum=0.1, maximum=3600.0),
    Setting("operator_secret", None, "Former shared secret for operator actions: it no longer enables them (the dashboard says so; use --operators-file). Environment only: no flag, so it never shows in `ps`.", str, "dashboard", secret=True, has_flag=False),
    Setting("operator_secret_file", None, "File holding the former operator secret (no longer enables actions).", str, "dashboard"),
    # dashboard security: operators, sessions, hosts
    Setting("operators_file", None, "File of operator identities (name and salted scrypt hash a line; `jetwatch operator add NAME` writes it). Without it (or --trusted-user-header) the dashboard is read-only.", str, "dashboard"),
    Setting("trusted_user_header", None, "HTTP header a trusted reverse proxy (oauth2-proxy style) sets to the signed-in operator's name. Only behind a proxy that strips it from clients.", str, "dashboard"),
    Setting("session_ttl", 8 * 3600.0, "How long an operator stays signed in (across reloads and new tabs) before signing in again.", parse_duration, "dashboard", minimum=1.0, maximum=30 * 86400.0),
    Setting("allowed_hosts", (), "Host names users type to reach the dashboard, besides its listen address (comma separated); other Host or Origin headers are refused.", parse_list, "dashboard"),
    # pipeline and `up`
    Setting("data_dir", "jetwatch-data", "Directory for the embedded server, Parquet exports and pipeline output.", str, "pipeline"),
    Setting("pipeline_every", 120.0, "How often `up` runs the pipeline.", parse_duration, "pipeline", minimum=1.0),
    Setting("spark_master", None, "Spark master URL for the pipeline (default: local[*] or spark-submit's).", str, "pipeline"),
    Setting("spark_nice", 5, "Niceness added to the local Spark job's processes, so that a run yields the host's cores to the collector and the dashboard beside it (0: an equal share, for a host that runs only the pipeline).", int, "pipeline", minimum=0, maximum=19),
)

_BY_NAME = {s.name: s for s in SETTINGS}


class _Typed:
    """Each setting's type, as Settings' attribute of its name, for the type checker: annotations
    only, so at run time every one is read from the values (Settings.__getattr__). Its parse
    function's type, Optional where the default is None; tests/test_settings.py holds this list
    to SETTINGS, name by name and in order."""

    server: str | None
    context: str | None
    user: str | None
    password: str | None
    token: str | None
    nkey: str | None
    creds: str | None
    tls_ca: str | None
    tls_cert: str | None
    tls_key: str | None
    connect_timeout: float
    request_timeout: float
    account_contexts: tuple[str, ...]
    server_for: tuple[str, ...]
    db: str
    cluster: str
    dbs: tuple[str, ...]
    lock_timeout: float
    raw_retention: float
    event_retention: float
    write_backlog: int
    seal_every: float
    retention_every: float
    interval: float
    monitor_url: tuple[str, ...]
    monitor_max_bytes: int
    system_context: str | None
    capture_stream: str
    capture_max_age: float
    capture_max_bytes: int
    inference_grace: float
    deploy_window: float
    deploy_groups: int
    holder_pulls: int
    capture_unpin_requests: bool
    include_streams: tuple[str, ...]
    exclude_streams: tuple[str, ...]
    include_consumers: tuple[str, ...]
    exclude_consumers: tuple[str, ...]
    show_internal: bool
    lag_every: float
    lag_concurrency: int
    lag_rotation: int
    health_window: float
    health_min_samples: int
    health_min_span: float
    saturation_ratio: float
    unpinned_after: float
    flapping_switches: int
    redelivery_share: float
    stalled_after: float
    no_pullers_after: float
    pin_idle_after: float
    lagging_after: float
    loss_within: float
    losing_after: float
    reset_shown_for: float
    no_leader_after: float
    clear_after: float
    lagging_age: float
    demo: bool
    stale_after: float
    metrics_address: str | None
    metrics_cardinality: str
    metrics_all_up_to: int
    alertmanager: str | None
    alert_after: float
    dashboard_url: str
    address: str
    port: int
    refresh: float
    operator_secret: str | None
    operator_secret_file: str | None
    operators_file: str | None
    trusted_user_header: str | None
    session_ttl: float
    allowed_hosts: tuple[str, ...]
    data_dir: str
    pipeline_every: float
    spark_master: str | None
    spark_nice: int


@dataclass(frozen=True)
class Settings(_Typed):
    """Resolved settings; pass it down, never read the environment elsewhere."""

    values: Mapping[str, Any] = field(default_factory=dict)
    system: Settings | None = None  # the system-account connection, from --system-context
    accounts: Mapping[str, Settings] = field(default_factory=dict)  # per-account connections for actions

    if not TYPE_CHECKING:  # the type checker reads each setting's type from _Typed instead
        def __getattr__(self, name: str) -> Any:
            if name in _BY_NAME:
                return self.values.get(name, _BY_NAME[name].default)
            raise AttributeError(name)

    def replace(self, **changes: Any) -> Settings:
        unknown = set(changes) - set(_BY_NAME)
        if unknown:
            raise SettingsError(f"unknown setting(s): {', '.join(sorted(unknown))}")
        return dataclasses.replace(self, values={**self.values, **changes})

    def redacted(self) -> dict[str, Any]:
        return {
            s.name: ("***" if s.secret and self.values.get(s.name) else getattr(self, s.name))
            for s in SETTINGS
        }


def add_arguments(parser: argparse.ArgumentParser, groups: tuple[str, ...], without: tuple[str, ...] = ()) -> None:
    """Add a flag for each setting of the named groups (but those named in `without`, whose flag
    means something else to this command); unset flags stay None."""
    for setting in SETTINGS:
        if setting.group in groups and setting.has_flag and setting.name not in without:
            parser.add_argument(setting.flag, dest=setting.name, default=None, help=setting.help,
                                metavar=setting.name.upper())


_KINDS: dict[Callable[[Any], Any], str] = {int: "a whole number", float: "a number"}


def _parse(setting: Setting, raw: object, origin: str) -> Any:
    """The one place every flag, variable and context value is parsed and range-checked."""
    try:
        value = setting.parse(raw)
        check_range(setting, value)
        return value
    except SettingsError as exc:
        said = str(exc)
    except (ValueError, OverflowError):  # int() and float() in their own words: said in the setting's
        said = f"{str(raw)[:40]!r} is not {_KINDS.get(setting.parse, 'a value it takes')}: allowed {allowed_range(setting)}"
    raise SettingsError(f"{origin} {setting.flag if origin == 'flag' else setting.env}: {said}") from None


def _in_units(setting: Setting, value: float) -> str:
    """A value written as the user writes it for this setting: 500ms, 5s, 2h, 1MB, 0.9."""
    if setting.parse is parse_duration:
        if value and value < 1:
            return f"{value * 1000:g}ms"
        for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
            if value >= size and value % size == 0:
                return f"{value / size:g}{unit}"
        return f"{value:g}s"
    if setting.parse is parse_size:
        for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
            if value >= size and value % size == 0:
                return f"{value / size:g}{unit}"
        return f"{value:g}B"
    return f"{value:g}"


def allowed_range(setting: Setting) -> str:
    lo, hi = setting.minimum, setting.maximum
    if lo is not None and hi is not None:
        return f"from {_in_units(setting, lo)} to {_in_units(setting, hi)}"
    if lo is not None:
        return f"at least {_in_units(setting, lo)}"
    return f"at most {_in_units(setting, hi)}" if hi is not None else "any value"


def check_range(setting: Setting, value: object) -> None:
    """Refuse a value outside the setting's declared range, saying the range."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return
    if isinstance(value, int) and not -MAX_INT <= value <= MAX_INT:  # before any float arithmetic on it
        raise SettingsError(f"{str(value)[:40]}… is out of range: allowed {allowed_range(setting)}")
    if not math.isfinite(value):  # `float` reads "nan" and "inf", and NaN passes every comparison
        raise SettingsError(f"{value} is not a number: allowed {allowed_range(setting)}")
    if (setting.minimum is not None and value < setting.minimum) or (
            setting.maximum is not None and value > setting.maximum):
        raise SettingsError(f"{_in_units(setting, value)} is out of range: allowed {allowed_range(setting)}")
    if setting.parse is parse_duration and value > MAX_DURATION_SECONDS:
        raise SettingsError(f"{_in_units(setting, value)} is longer than a century (36500d), the longest duration "
                            f"any setting takes: allowed {allowed_range(setting)}, up to 36500d")


def read_context(name: str, env: Mapping[str, str]) -> dict[str, Any]:
    """Connection settings from a `nats` CLI context file, as the CLI stores them."""
    base = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else Path.home() / ".config"
    if not name or "/" in name or "\x00" in name or name in (".", ".."):
        raise SettingsError(f"NATS context {name[:64]!r} is not a context name: give the name `nats context ls` "
                            "shows (no '/')")
    path = base / "nats" / "context" / f"{name}.json"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise SettingsError(
            f"NATS context '{name}' not found at {path}: create it with `nats context add {name}` "
            "or pass --server"
        ) from None
    except json.JSONDecodeError as exc:
        raise SettingsError(f"NATS context file {path} is not valid JSON ({exc})") from None
    except UnicodeDecodeError:
        raise SettingsError(f"NATS context file {path} is not valid JSON (not UTF-8 text)") from None
    except (OSError, ValueError) as exc:  # a directory, no permission, a name no file system takes
        raise SettingsError(f"NATS context {name[:64]!r} cannot be read at {str(path)!r}: "
                            f"{exc.strerror if isinstance(exc, OSError) else 'no file can have that name'}") from None
    if not isinstance(data, dict):
        raise SettingsError(f"NATS context file {path} is not a JSON object, as `nats context add` writes it")
    mapping = {"url": "server", "user": "user", "password": "password", "token": "token",
               "nkey": "nkey", "creds": "creds", "ca": "tls_ca", "cert": "tls_cert", "key": "tls_key"}
    for theirs in mapping:
        if data.get(theirs) and not isinstance(data[theirs], str):
            raise SettingsError(f"NATS context file {path} gives {theirs} as {type(data[theirs]).__name__}, not text")
    return lift_userinfo({ours: data[theirs] for theirs, ours in mapping.items() if data.get(theirs)})


def lift_userinfo(values: dict[str, Any]) -> dict[str, Any]:
    """Move `user:password@` (or `token@`) out of the server URLs into the user/password (or
    token) settings, so only bare addresses are ever logged, stored, shown or handed on. Settings
    given on their own win over the ones in the URL."""
    if not values.get("server"):
        return values
    bare, found_user, found_password = [], None, None
    for url in str(values["server"]).split(","):
        if not url.strip():
            continue
        try:
            clean, user, password = split_userinfo(url)
        except ValueError as exc:  # urllib's: an unclosed IPv6 bracket, a port that is not a number
            raise SettingsError(f"--server (JETWATCH_SERVER, or the context's url): {url.rpartition('@')[2][:60]!r} is not a "
                                f"server URL ({exc}); write nats://host:4222") from None
        bare.append(clean)
        found_user, found_password = found_user or user, found_password or password
    lifted = {**values, "server": ",".join(bare)}
    if found_user and found_password is None:
        lifted.setdefault("token", found_user)
    elif found_user:
        lifted.setdefault("user", found_user)
        lifted.setdefault("password", found_password)
    return lifted


def resolve(args: argparse.Namespace | None = None, env: Mapping[str, str] | None = None) -> Settings:
    env = os.environ if env is None else env
    flags = {k: v for k, v in vars(args or argparse.Namespace()).items() if k in _BY_NAME and v is not None}
    values: dict[str, Any] = {}
    context = flags.get("context") or env.get("JETWATCH_CONTEXT")
    if context:
        for name, raw in read_context(context, env).items():
            values[name] = _parse(_BY_NAME[name], raw, "context")
    for setting in SETTINGS:
        if setting.env in env and env[setting.env] != "":
            values[setting.name] = _parse(setting, env[setting.env], "environment variable")
    for name, raw in flags.items():
        values[name] = _parse(_BY_NAME[name], raw, "flag")
    values = lift_userinfo(values)
    system = None
    if values.get("system_context") and values.get("monitor_url"):
        raise SettingsError("--monitor-url and --system-context both say how to sample consumers: give one of them")
    if values.get("system_context"):
        # Only the connection: the server and timeouts unless the context names its own server.
        shared: dict[str, Any] = {k: values[k] for k in ("server", "connect_timeout", "request_timeout") if k in values}
        found = read_context(values["system_context"], env)
        system = Settings({**shared, **{k: _parse(_BY_NAME[k], raw, "context") for k, raw in found.items()}})
    return Settings(values, system, _account_connections(values, env))


def _account_connections(values: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Settings]:
    """The connection each mapped account's actions use: a creds file (a value with a `/` or ending
    in `.creds`), else a `nats` CLI context, on the same server unless the context names its own."""
    shared = {k: values[k] for k in ("server", "connect_timeout", "request_timeout", "tls_ca", "tls_cert", "tls_key")
              if k in values}
    found: dict[str, Settings] = {}
    for pair in values.get("account_contexts") or ():
        account, _, where = pair.partition("=")
        if "/" in where or where.endswith(".creds"):
            if not Path(where).is_file():
                raise SettingsError(f"--account-contexts {account}={where}: no credentials file there")
            found[account] = Settings({**shared, "creds": where})
        else:
            context = {k: _parse(_BY_NAME[k], raw, "context") for k, raw in read_context(where, env).items()}
            found[account] = Settings({**shared, **context})
    return found


def _shown(setting: Setting) -> str:
    value = setting.default
    if value in (None, ()):
        return ""
    if setting.parse is parse_duration:
        for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
            if value >= size and value % size == 0:
                return f"`{value / size:g}{unit}`"
        return f"`{value:g}s`"
    if setting.parse is parse_size:
        return f"`{value >> 20}MB`"
    return f"`{value}`"


def reference_markdown() -> str:
    """docs/configuration.md's table, generated from SETTINGS (`jetwatch settings`)."""
    lines = ["| flag | environment | default | meaning |", "|---|---|---|---|"]
    for s in SETTINGS:
        default = _shown(s)
        allowed = f" Allowed: {allowed_range(s)}." if s.minimum is not None or s.maximum is not None else ""
        flag = f"`{s.flag}`" if s.has_flag else "(none)"
        lines.append(f"| {flag} | `{s.env}` | {default} | {s.help}{allowed} |")
    return "\n".join(lines)
