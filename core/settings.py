"""One settings object for every jetwatch process.

Each setting is declared once, as (name, default, help). The same declaration gives the
command-line flag, the `JETWATCH_<NAME>` environment variable and the README's reference table,
so a setting cannot exist in one place and be missing from another. Precedence, lowest first:
default, NATS context (connection settings only), environment, flag.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from jetwatch.core.errors import UsageError


class SettingsError(UsageError, ValueError):
    """A setting has a value jetwatch cannot use; the message says which and what to do."""


def parse_duration(text: str | float | int) -> float:
    """Seconds from '500ms', '5s', '2m', '1h', '7d' or a bare number of seconds."""
    if isinstance(text, (int, float)):
        return float(text)
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*", str(text))
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
        return now - dt.timedelta(seconds=seconds) if backwards else now + dt.timedelta(seconds=seconds)
    except SettingsError:
        pass
    try:
        # Servers write nanoseconds; Python keeps microseconds.
        t = dt.datetime.fromisoformat(re.sub(r"(\.\d{6})\d+", r"\1", text.strip().replace("Z", "+00:00")))
    except ValueError:
        raise SettingsError(f"'{text}' is neither an RFC 3339 time (2026-11-22T10:00:00Z) nor a duration "
                            "(10m, 2h)") from None
    return t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)


def parse_size(text: str | int) -> int:
    """Bytes from '256MB', '1GB', '512KB' or a bare number of bytes."""
    if isinstance(text, int):
        return text
    m = re.fullmatch(r"\s*(\d+)\s*(B|KB|MB|GB|TB)?\s*", str(text), re.IGNORECASE)
    if not m:
        raise SettingsError(f"'{text}' is not a size: write a number with a unit, such as 256MB or 1GB")
    mult = {"b": 1, "kb": 1 << 10, "mb": 1 << 20, "gb": 1 << 30, "tb": 1 << 40}
    return int(m.group(1)) * mult[(m.group(2) or "b").lower()]


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
    """How many per-consumer series /metrics exports: `non_ok` or `all`."""
    value = str(text).strip().lower().replace("-", "_")
    if value not in ("non_ok", "all"):
        raise SettingsError(f"'{text}' is not a metrics cardinality: write non_ok (per-consumer series for "
                            "non-OK consumers only) or all")
    return value


def parse_list(text: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    if isinstance(text, (list, tuple)):
        return tuple(text)
    return tuple(p.strip() for p in str(text).split(",") if p.strip())


@dataclass(frozen=True)
class Setting:
    name: str
    default: Any
    help: str
    parse: Callable[[Any], Any] = str
    group: str = "general"
    secret: bool = False

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
    Setting("connect_timeout", 5.0, "Seconds to wait for a connection before giving up on it.", parse_duration, "connection"),
    Setting("request_timeout", 5.0, "Seconds to wait for a JetStream API reply.", parse_duration, "connection"),
    # store
    Setting("db", "jetwatch-data/jetwatch.duckdb", "Path of the DuckDB store file.", str, "store"),
    Setting("lock_timeout", 15.0, "Longest wait for the store file when another process holds it.", parse_duration, "store"),
    Setting("raw_retention", 7 * 86400.0, "How long raw samples are kept; older history lives on as rollups.", parse_duration, "store"),
    Setting("event_retention", 90 * 86400.0, "How long advisories and rejects are kept.", parse_duration, "store"),
    # collection
    Setting("interval", 5.0, "Seconds between samples of consumer state.", parse_duration, "collect"),
    Setting("monitor_url", (), "HTTP monitoring URL(s) of every server, comma separated: samples via /jsz instead of CONSUMER.LIST.", parse_list, "collect"),
    Setting("system_context", None, "Name of a `nats` CLI context for a system-account user: samples every account via `$SYS.REQ.SERVER.PING.JSZ` instead of CONSUMER.LIST.", str, "collect"),
    Setting("capture_stream", "JETWATCH_ADVISORIES", "Name of the JetStream stream that captures consumer advisories durably.", str, "collect"),
    Setting("capture_max_age", 7 * 86400.0, "Longest time the capture stream keeps an advisory.", parse_duration, "collect"),
    Setting("capture_max_bytes", 256 << 20, "Largest size of the capture stream.", parse_size, "collect"),
    Setting("inference_grace", 10.0, "How long a pin change seen only in sampled state waits for its advisory before it is recorded as inferred.", parse_duration, "collect"),
    Setting("include_streams", (), "Only these streams (glob patterns, comma separated).", parse_list, "collect"),
    Setting("exclude_streams", (), "Never these streams (glob patterns, comma separated).", parse_list, "collect"),
    Setting("include_consumers", (), "Only these consumers (glob patterns, comma separated).", parse_list, "collect"),
    Setting("exclude_consumers", (), "Never these consumers (glob patterns, comma separated).", parse_list, "collect"),
    Setting("show_internal", False, "Also watch jetwatch's capture stream and KV_*/OBJ_* streams.", parse_bool, "collect"),
    # health
    Setting("health_window", 300.0, "Window of samples a verdict is judged over.", parse_duration, "health"),
    Setting("health_min_samples", 3, "Fewest samples in the window for a verdict (else COLLECTING).", int, "health"),
    Setting("health_min_span", 60.0, "Shortest time the window's samples must span for a verdict.", parse_duration, "health"),
    Setting("saturation_ratio", 0.9, "Share of max_ack_pending or max_waiting that counts as SATURATED.", float, "health"),
    Setting("unpinned_after", 30.0, "How long a pinned_client consumer with work pending may go without a pin before UNPINNED.", parse_duration, "health"),
    Setting("flapping_switches", 4, "More pin switches than this in the window is FLAPPING.", int, "health"),
    Setting("redelivery_share", 0.1, "Share of deliveries that are redeliveries above which the verdict is REDELIVERING.", float, "health"),
    Setting("stale_after", 30.0, "Data older than this is marked stale on screen.", parse_duration, "dashboard"),
    # exporters: /metrics and Alertmanager, fed by the collector's verdicts each cycle
    Setting("metrics_address", None, "Serve Prometheus metrics at HOST:PORT/metrics (PORT alone: 127.0.0.1:PORT). Off when empty.", str, "exporters"),
    Setting("metrics_cardinality", "non_ok", "Per-consumer series for `non_ok` consumers only, or for `all`; fleet totals are always exported.", parse_cardinality, "exporters"),
    Setting("alertmanager", None, "Alertmanager URL: post firing and resolved alerts to its /api/v2/alerts each cycle. Off when empty.", str, "exporters"),
    Setting("alert_after", 120.0, "How long a consumer stays non-OK before its alert fires (the rules' `for`).", parse_duration, "exporters"),
    Setting("dashboard_url", "http://127.0.0.1:8501/", "The dashboard's address, for the alerts' runbook links.", str, "exporters"),
    # dashboard and actions
    Setting("address", "127.0.0.1", "Address the dashboard listens on.", str, "dashboard"),
    Setting("port", 8501, "Port the dashboard listens on.", int, "dashboard"),
    Setting("refresh", 2.0, "Seconds between refreshes of the live views.", parse_duration, "dashboard"),
    Setting("operator_secret", None, "Secret that enables operator actions in the dashboard.", str, "dashboard", secret=True),
    Setting("operator_secret_file", None, "File holding the operator secret.", str, "dashboard"),
    # pipeline and `up`
    Setting("data_dir", "jetwatch-data", "Directory for the embedded server, Parquet exports and pipeline output.", str, "pipeline"),
    Setting("pipeline_every", 120.0, "How often `up` runs the pipeline.", parse_duration, "pipeline"),
    Setting("spark_master", None, "Spark master URL for the pipeline (default: local[*] or spark-submit's).", str, "pipeline"),
)

_BY_NAME = {s.name: s for s in SETTINGS}


@dataclass(frozen=True)
class Settings:
    """Resolved settings; pass it down, never read the environment elsewhere."""

    values: Mapping[str, Any] = field(default_factory=dict)
    system: "Settings | None" = None  # the system-account connection, from --system-context

    def __getattr__(self, name: str) -> Any:
        if name in _BY_NAME:
            return self.values.get(name, _BY_NAME[name].default)
        raise AttributeError(name)

    def replace(self, **changes: Any) -> "Settings":
        unknown = set(changes) - set(_BY_NAME)
        if unknown:
            raise SettingsError(f"unknown setting(s): {', '.join(sorted(unknown))}")
        return dataclasses.replace(self, values={**self.values, **changes})

    def redacted(self) -> dict[str, Any]:
        return {
            s.name: ("***" if s.secret and self.values.get(s.name) else getattr(self, s.name))
            for s in SETTINGS
        }


def add_arguments(parser: argparse.ArgumentParser, groups: tuple[str, ...]) -> None:
    """Add a flag for each setting of the named groups; unset flags stay None."""
    for setting in SETTINGS:
        if setting.group in groups:
            parser.add_argument(setting.flag, dest=setting.name, default=None, help=setting.help,
                                metavar=setting.name.upper())


def _parse(setting: Setting, raw: Any, origin: str) -> Any:
    try:
        return setting.parse(raw)
    except (SettingsError, ValueError) as exc:
        raise SettingsError(f"{origin} {setting.flag if origin == 'flag' else setting.env}: {exc}") from None


def read_context(name: str, env: Mapping[str, str]) -> dict[str, Any]:
    """Connection settings from a `nats` CLI context file, as the CLI stores them."""
    base = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else Path.home() / ".config"
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
    mapping = {"url": "server", "user": "user", "password": "password", "token": "token",
               "nkey": "nkey", "creds": "creds", "ca": "tls_ca", "cert": "tls_cert", "key": "tls_key"}
    return {ours: data[theirs] for theirs, ours in mapping.items() if data.get(theirs)}


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
    system = None
    if values.get("system_context") and values.get("monitor_url"):
        raise SettingsError("--monitor-url and --system-context both say how to sample consumers: give one of them")
    if values.get("system_context"):
        # Only the connection: the server and timeouts unless the context names its own server.
        shared = {k: values[k] for k in ("server", "connect_timeout", "request_timeout") if k in values}
        found = read_context(values["system_context"], env)
        system = Settings({**shared, **{k: _parse(_BY_NAME[k], raw, "context") for k, raw in found.items()}})
    return Settings(values, system)


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
    """The README's configuration table, generated from SETTINGS."""
    lines = ["| flag | environment | default | meaning |", "|---|---|---|---|"]
    for s in SETTINGS:
        default = _shown(s)
        lines.append(f"| `{s.flag}` | `{s.env}` | {default} | {s.help} |")
    return "\n".join(lines)
