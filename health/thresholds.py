"""Per-consumer thresholds from the consumer's own metadata, where a team set them; else the settings.

Two conventions are read from `config.metadata`:

- The ecosystem's, `io.nats.monitor.*`, which natscli's `nats server check consumer` and the
  `nats audit` check JETSTREAM_005 read (nats-io/jsm.go `monitor/consumer.go`,
  `ExtractConsumerHealthCheckOptions`), as Synadia Insights' CONSUMER checks do. Only the keys
  whose meaning is jetwatch's own are taken, each for the jetwatch threshold it means
  (`NATS_MONITOR` below, with why); the others are count thresholds jetwatch has no rule for, and
  are named as not applied rather than bent into one. `io.nats.monitor.enabled: false` turns them
  off, as it turns off the audit's check.
- jetwatch's own, `io.jetwatch.<setting>` for any threshold in `OVERRIDABLE` (such as
  `io.jetwatch.stalled_after: 2m`), in the setting's own units and range. Where both name the same
  threshold, jetwatch's own key wins.

A value that cannot be read is said (a problem, in words) and the setting stands: metadata is
written by whoever may edit the consumer, and never stops judging.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jetwatch.core.settings import SETTINGS, Setting, SettingsError, check_range

# The thresholds a consumer may set for itself: what its rules compare against. The health
# window, the samples a verdict needs and the clearing time are the judge's, the same for all.
OVERRIDABLE: tuple[str, ...] = ("stalled_after", "no_pullers_after", "pin_idle_after", "lagging_after",
                                "lagging_age", "unpinned_after", "loss_within", "saturation_ratio",
                                "redelivery_share", "flapping_switches")
_SETTING: dict[str, Setting] = {s.name: s for s in SETTINGS if s.name in OVERRIDABLE}

INPUT = "threshold_"  # a consumer's own value of threshold X, as the rules take it: `threshold_X`
JETWATCH_PREFIX = "io.jetwatch."
MONITOR_PREFIX = "io.nats.monitor."
ENABLED = "io.nats.monitor.enabled"

# natscli's consumer keys that mean a jetwatch threshold: the same quantity (how long without an
# acknowledgement, or without a delivery, before it is critical), judged by jetwatch's rule.
NATS_MONITOR: dict[str, tuple[str, ...]] = {
    # Time since the last acknowledgement before CRITICAL. jetwatch's STALLED is that, while work is in
    # flight; with nothing in flight there is nothing to acknowledge, and jetwatch says nothing.
    "io.nats.monitor.last-ack-critical": ("stalled_after",),
    # Time since the last delivery before CRITICAL. jetwatch's NO_PULLERS and PIN_IDLE are that, while
    # work waits; a consumer with nothing to deliver is not late to jetwatch.
    "io.nats.monitor.last-delivery-critical": ("no_pullers_after", "pin_idle_after"),
}
# natscli's keys with no jetwatch threshold of the same meaning: read, said, not applied.
NOT_APPLIED: dict[str, str] = {
    "io.nats.monitor.outstanding-ack-critical": "a count of messages in flight; jetwatch's SATURATED is a share "
                                                "of the consumer's own max_ack_pending (--saturation-ratio)",
    "io.nats.monitor.waiting-critical": "a count of waiting pulls; waiting pulls are idle workers to jetwatch, "
                                        "SATURATED only near max_waiting",
    "io.nats.monitor.unprocessed-critical": "a count of messages not yet delivered; jetwatch judges a backlog by "
                                            "its trend and age (LAGGING, --lagging-age), not its size",
    "io.nats.monitor.redelivery-critical": "a count of messages being redelivered; jetwatch's REDELIVERING is a "
                                           "share of deliveries (--redelivery-share)",
    "io.nats.monitor.pinned": "a demand that every group be pinned, at once; jetwatch's UNPINNED waits "
                              "--unpinned-after with work pending",
}

# Go's time.ParseDuration units, and jsm.go's ParseDuration's own (d, w, M, y).
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0,
          "d": 86400.0, "D": 86400.0, "w": 7 * 86400.0, "W": 7 * 86400.0, "M": 30 * 86400.0,
          "y": 365 * 86400.0, "Y": 365 * 86400.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h|d|D|w|W|M|y|Y)")


def go_duration(text: str) -> float:
    """Seconds of a duration as natscli reads metadata (jsm.go's ParseDuration: Go's units such as
    `1m30s` or `500ms`, plus `d`, `w`, `M` and `y`); stricter than it, every character must count."""
    value = str(text).strip()
    if value == "0":
        return 0.0
    if not value or not re.fullmatch(f"(?:{_PART.pattern})+", value):
        raise ValueError(f"{text!r} is not a duration such as 90s, 2m or 1h30m")
    return sum(float(n) * _UNITS[u] for n, u in _PART.findall(value))


def _jetwatch_value(setting: Setting, raw: str) -> float:
    """An `io.jetwatch.*` value, read as the setting's flag is (a duration also in Go's form), in
    the setting's range."""
    try:
        value = setting.parse(raw)
    except (SettingsError, ValueError):
        if setting.parse in (int, float):
            raise ValueError(f"{raw!r} is not {'a whole number' if setting.parse is int else 'a number'}") from None
        value = go_duration(raw)
    check_range(setting, value)
    return float(value)


@dataclass(frozen=True)
class ConsumerThresholds:
    """What one consumer's metadata sets: each threshold's value and the key it came from, the
    keys read but not applied (with why), and what could not be read (in words)."""

    values: Mapping[str, float] = field(default_factory=dict)
    sources: Mapping[str, str] = field(default_factory=dict)  # threshold -> metadata key
    not_applied: Mapping[str, str] = field(default_factory=dict)  # metadata key -> why
    problems: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.values or self.not_applied or self.problems)

    def as_dict(self) -> dict[str, Any]:
        return {"from_metadata": {name: {"value": self.values[name], "key": self.sources[name]}
                                  for name in sorted(self.values)},
                "not_applied": dict(self.not_applied), "problems": list(self.problems)}


NONE = ConsumerThresholds()


def from_metadata(metadata: Any) -> ConsumerThresholds:
    """The thresholds a consumer's `config.metadata` sets (NONE where it sets none)."""
    if not isinstance(metadata, Mapping):
        return NONE
    keys = [k for k in metadata if isinstance(k, str) and (k.startswith(MONITOR_PREFIX) or k.startswith(JETWATCH_PREFIX))]
    if not keys:
        return NONE
    values: dict[str, float] = {}
    sources: dict[str, str] = {}
    not_applied: dict[str, str] = {}
    problems: list[str] = []
    enabled = True
    if ENABLED in metadata:
        word = str(metadata[ENABLED]).strip().lower()
        if word in ("0", "f", "false"):
            enabled = False
        elif word not in ("1", "t", "true"):
            problems.append(f"{ENABLED}: {metadata[ENABLED]!r} is not true or false; read as true")
    for key in sorted(keys):
        raw = metadata[key]
        if key in NATS_MONITOR:
            if not enabled:
                not_applied[key] = f"{ENABLED} is false"
                continue
            try:
                seconds = go_duration(raw)
            except ValueError as exc:
                problems.append(f"{key}: {exc}; the settings stand")
                continue
            if seconds <= 0:  # natscli: zero or less turns the check off
                not_applied[key] = "zero or less turns natscli's check off"
                continue
            for name in NATS_MONITOR[key]:
                longest = _SETTING[name].maximum if name in _SETTING else None
                if longest is not None and seconds > longest:
                    problems.append(f"{key}: {raw} is longer than {name} allows; the setting stands")
                    continue
                if sources.get(name, "").startswith(JETWATCH_PREFIX):
                    continue
                values[name], sources[name] = seconds, key
        elif key in NOT_APPLIED:
            not_applied[key] = NOT_APPLIED[key]
        elif key.startswith(JETWATCH_PREFIX):
            name = key[len(JETWATCH_PREFIX):]
            if name not in _SETTING:
                problems.append(f"{key}: jetwatch has no per-consumer threshold {name!r} "
                                f"(it has {', '.join(OVERRIDABLE)})")
                continue
            try:
                values[name] = _jetwatch_value(_SETTING[name], str(raw))
            except (SettingsError, ValueError) as exc:
                problems.append(f"{key}: {exc}; not applied")
                continue
            sources[name] = key
        # other io.nats.monitor.* keys (the stream's, such as msgs-warn) are not the consumer's
    return ConsumerThresholds(values, sources, not_applied, tuple(problems))


def input_columns(metadata: Iterable[Any]) -> dict[str, list[float | None]]:
    """The rules' `threshold_<name>` columns of consumers whose metadata (a JSON text each, or
    None) is given: each consumer's own value, None where it sets none (the setting then holds).
    The collector and the pipeline both read a consumer's thresholds through here."""
    parsed = [from_metadata(json.loads(m)) if isinstance(m, str) else NONE for m in metadata]
    return {INPUT + name: [p.values.get(name) for p in parsed] for name in OVERRIDABLE}
