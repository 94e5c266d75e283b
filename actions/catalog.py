"""Every operator action, declared once: its name, the JetStream call it makes, the words that
confirm it, the parameters its audit row keeps and whether it changes the consumer.

The CLI builds its subcommands from this table, the dashboard its dialog, the audit log its rows;
`perform` runs an action by name and refuses a name it does not know instead of guessing.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jetwatch.core.clock import rfc3339, utcnow
from jetwatch.core.durations import duration
from jetwatch.core.errors import UsageError

if TYPE_CHECKING:  # the CLI builds its parser from this table: what acting needs is imported when acting
    from jetwatch.actions import operations as ops
    from jetwatch.core.jsapi import JetStreamAPI
    from jetwatch.store.database import Store

# What a drain does once in-flight work has finished.
THEN_CHOICES: tuple[str, ...] = ("handoff", "resume", "stay-paused")


@dataclass(frozen=True)
class Action:
    name: str
    api_calls: tuple[str, ...]  # the JetStream API subjects it sends, in order
    summary: str  # one line for help texts
    confirm: str  # the question, with {target} and the action's parameters as placeholders
    audit_params: tuple[str, ...]  # parameters recorded in the audit rows
    changes_state: bool
    audit_results: tuple[str, ...] = ()  # what the outcome row adds from the result: the pin dropped, ...
    per_group: bool = False  # acts on one priority group (unpin, a drain's hand-off), not the whole consumer
    on: str = "server"  # where it acts: the server (a JetStream call), or jetwatch's own store (a silence)


ACTIONS: tuple[Action, ...] = (
    Action("unpin", ("$JS.API.CONSUMER.UNPIN",),
           "Unpin the pinned client of a consumer's priority group.",
           "Unpin the pinned client of {target}", ("group", "expect_pin", "any_holder"), True, ("unpinned_id",),
           per_group=True),
    Action("pause", ("$JS.API.CONSUMER.PAUSE",),
           "Pause a consumer until a time.",
           "Pause {target} until {until}", ("until",), True),
    Action("resume", ("$JS.API.CONSUMER.PAUSE",),
           "Resume a paused consumer.",
           "Resume {target}", (), True),
    Action("drain", ("$JS.API.CONSUMER.PAUSE", "$JS.API.CONSUMER.INFO", "$JS.API.CONSUMER.UNPIN"),
           "Pause a consumer, wait for in-flight work to finish, then hand over, resume or stay paused.",
           "Drain {target}, then {then} (timeout {timeout_s})", ("then", "timeout_s", "stay_until"), True,
           ("pinned_before", "still_in_flight"), per_group=True),
    Action("silence", (),
           "Acknowledge a consumer's current verdict for a while (at most 24 h) with a note: the verdict stays "
           "shown, its alerts are held back until the silence expires or the verdict turns into another.",
           "Silence the alerts of {target} for {for_s} (its verdict stays shown), with the note: {note}",
           ("for_s", "note", "expect_verdict"), False, ("verdict", "until"), on="store"),
    Action("forget", (),
           "Forget a consumer the server no longer lists and no DELETED advisory said was removed (held with its "
           "last known state): it leaves every page at the collector's next cycle.",
           "Forget {target}, which the server no longer lists (it comes back if the server lists it again)",
           (), False, ("verdict",), on="store"),
)
BY_NAME: dict[str, Action] = {a.name: a for a in ACTIONS}


class UnknownAction(UsageError):
    """An action name that is not in the table: nothing is sent."""


def action(name: str) -> Action:
    try:
        return BY_NAME[name]
    except KeyError:
        raise UnknownAction(f"unknown action {name!r}: jetwatch knows {', '.join(BY_NAME)}") from None


def _shown(value: object) -> Any:
    return rfc3339(value) if isinstance(value, dt.datetime) else value


def _said(name: str, value: object, now: dt.datetime) -> Any:
    """A parameter as a person reads it: a time as '2026-11-23 07:27:03 UTC (in 15 min)', to the
    second, never an ISO string with microseconds; seconds (a `_s` parameter) as a duration."""
    if name.endswith("_s") and isinstance(value, (int, float)) and not isinstance(value, bool):
        return duration(value)
    if not isinstance(value, dt.datetime):
        return value
    t = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
    left = (t - now).total_seconds()
    when = f"in {duration(left)}" if left >= 0 else f"{duration(-left)} ago"
    return f"{t.astimezone(dt.UTC):%Y-%m-%d %H:%M:%S} UTC ({when})"


def confirmation(name: str, target: ops.Target, params: Mapping[str, Any]) -> str:
    """The confirmation question, naming the exact target (its group only for an action on the
    group), the same on a terminal and a page."""
    now = utcnow()
    shown = {k: _said(k, v, now) for k, v in params.items()}
    chosen = action(name)
    return chosen.confirm.format(target=target.describe(with_group=chosen.per_group), **shown)


def audit_params(name: str, params: Mapping[str, Any], details: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The parameters the audit row keeps, as given (times in RFC 3339); with a result's `details`,
    also what the outcome row adds (the pin an unpin dropped: `expect_pin` is the pin the operator
    confirmed, `unpinned_id` the one the server dropped)."""
    kept = {k: _shown(params[k]) for k in action(name).audit_params if params.get(k) is not None}
    for k in action(name).audit_results if details else ():
        if details is not None and details.get(k) is not None:
            kept[k] = _shown(details[k])
    return kept


Runner = Callable[["JetStreamAPI", "ops.Target", Mapping[str, Any], "ops.Progress | None"],
                  Awaitable["ops.ActionResult"]]


async def _unpin(api: JetStreamAPI, target: ops.Target, p: Mapping[str, Any], progress: ops.Progress | None) -> ops.ActionResult:
    from jetwatch.actions import operations

    return await operations.unpin(api, target)


async def _pause(api: JetStreamAPI, target: ops.Target, p: Mapping[str, Any], progress: ops.Progress | None) -> ops.ActionResult:
    from jetwatch.actions import operations

    return await operations.pause(api, target, p["until"])


async def _resume(api: JetStreamAPI, target: ops.Target, p: Mapping[str, Any], progress: ops.Progress | None) -> ops.ActionResult:
    from jetwatch.actions import operations

    return await operations.resume(api, target)


async def _drain(api: JetStreamAPI, target: ops.Target, p: Mapping[str, Any], progress: ops.Progress | None) -> ops.ActionResult:
    from jetwatch.actions import operations

    plan = operations.DrainPlan(p["then"], float(p["timeout_s"]), p.get("stay_until"))
    return await operations.drain(api, target, plan, progress)


_RUNNERS: dict[str, Runner] = {"unpin": _unpin, "pause": _pause, "resume": _resume, "drain": _drain}


async def perform(api: JetStreamAPI, name: str, target: ops.Target, params: Mapping[str, Any],
                  progress: ops.Progress | None = None) -> ops.ActionResult:
    """Run the named action; an unknown name raises before anything is sent."""
    if action(name).on != "server":
        raise UnknownAction(f"{name} acts on jetwatch's store, not the server: perform_in_store")
    return await _RUNNERS[name](api, target, params, progress)


StoreRunner = Callable[["Store | None", "ops.Target", Mapping[str, Any], str, "str | None"], "ops.ActionResult"]


def _silence(store: Store | None, target: ops.Target, params: Mapping[str, Any], actor: str,
             action_id: str | None) -> ops.ActionResult:
    from jetwatch.actions import silences

    return silences.silence(store, target, params, actor, action_id)


def _forget(store: Store | None, target: ops.Target, params: Mapping[str, Any], actor: str,
            action_id: str | None) -> ops.ActionResult:
    from jetwatch.actions import forgets

    return forgets.forget(store, target, params, actor, action_id)


_STORE_RUNNERS: dict[str, StoreRunner] = {"silence": _silence, "forget": _forget}


def perform_in_store(store: Store | None, name: str, target: ops.Target, params: Mapping[str, Any], actor: str,
                     action_id: str | None = None) -> ops.ActionResult:
    """Run an action that acts on jetwatch's store (a silence): no connection to the server."""
    if action(name).on != "store":
        raise UnknownAction(f"{name} acts on the server: perform")
    return _STORE_RUNNERS[name](store, target, params, actor, action_id)
