"""Every operator action, declared once: its name, the JetStream call it makes, the words that
confirm it, the parameters its audit row keeps and whether it changes the consumer.

The CLI builds its subcommands from this table, the dashboard its dialog, the audit log its rows;
`perform` runs an action by name and refuses a name it does not know instead of guessing.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Mapping

from jetwatch.actions import operations as ops
from jetwatch.core.clock import rfc3339
from jetwatch.core.errors import UsageError
from jetwatch.core.jsapi import JetStreamAPI


@dataclass(frozen=True)
class Action:
    name: str
    api_calls: tuple[str, ...]  # the JetStream API subjects it sends, in order
    summary: str  # one line for help texts
    confirm: str  # the question, with {target} and the action's parameters as placeholders
    audit_params: tuple[str, ...]  # parameters recorded in the audit rows
    changes_state: bool
    audit_results: tuple[str, ...] = ()  # what the outcome row adds from the result: the pin dropped, ...


ACTIONS: tuple[Action, ...] = (
    Action("unpin", ("$JS.API.CONSUMER.UNPIN",),
           "Unpin the pinned client of a consumer's priority group.",
           "Unpin the pinned client of {target}", ("group", "expect_pin"), True, ("unpinned_id",)),
    Action("pause", ("$JS.API.CONSUMER.PAUSE",),
           "Pause a consumer until a time.",
           "Pause {target} until {until}", ("until",), True),
    Action("resume", ("$JS.API.CONSUMER.PAUSE",),
           "Resume a paused consumer.",
           "Resume {target}", (), True),
    Action("drain", ("$JS.API.CONSUMER.PAUSE", "$JS.API.CONSUMER.INFO", "$JS.API.CONSUMER.UNPIN"),
           "Pause a consumer, wait for in-flight work to finish, then hand over, resume or stay paused.",
           "Drain {target}, then {then} (timeout {timeout_s:g}s)", ("then", "timeout_s", "stay_until"), True,
           ("pinned_before", "still_in_flight")),
)
BY_NAME: dict[str, Action] = {a.name: a for a in ACTIONS}


class UnknownAction(UsageError):
    """An action name that is not in the table: nothing is sent."""


def action(name: str) -> Action:
    try:
        return BY_NAME[name]
    except KeyError:
        raise UnknownAction(f"unknown action {name!r}: jetwatch knows {', '.join(BY_NAME)}") from None


def _shown(value: Any) -> Any:
    return rfc3339(value) if isinstance(value, dt.datetime) else value


def confirmation(name: str, target: ops.Target, params: Mapping[str, Any]) -> str:
    """The confirmation question, naming the exact target, the same on a terminal and a page."""
    shown = {k: _shown(v) for k, v in params.items()}
    return action(name).confirm.format(target=target.describe(), **shown)


def audit_params(name: str, params: Mapping[str, Any], details: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The parameters the audit row keeps, as given (times in RFC 3339); with a result's `details`,
    also what the outcome row adds (the pin an unpin dropped: `expect_pin` is the pin the operator
    confirmed, `unpinned_id` the one the server dropped)."""
    kept = {k: _shown(params[k]) for k in action(name).audit_params if params.get(k) is not None}
    for k in action(name).audit_results if details else ():
        if details.get(k) is not None:
            kept[k] = _shown(details[k])
    return kept


Runner = Callable[[JetStreamAPI, ops.Target, Mapping[str, Any], "ops.Progress | None"], Awaitable[ops.ActionResult]]


async def _unpin(api: JetStreamAPI, target: ops.Target, p: Mapping[str, Any], progress: Any) -> ops.ActionResult:
    return await ops.unpin(api, target)


async def _pause(api: JetStreamAPI, target: ops.Target, p: Mapping[str, Any], progress: Any) -> ops.ActionResult:
    return await ops.pause(api, target, p["until"])


async def _resume(api: JetStreamAPI, target: ops.Target, p: Mapping[str, Any], progress: Any) -> ops.ActionResult:
    return await ops.resume(api, target)


async def _drain(api: JetStreamAPI, target: ops.Target, p: Mapping[str, Any], progress: Any) -> ops.ActionResult:
    plan = ops.DrainPlan(p["then"], float(p["timeout_s"]), p.get("stay_until"))
    return await ops.drain(api, target, plan, progress)


_RUNNERS: dict[str, Runner] = {"unpin": _unpin, "pause": _pause, "resume": _resume, "drain": _drain}


async def perform(api: JetStreamAPI, name: str, target: ops.Target, params: Mapping[str, Any],
                  progress: ops.Progress | None = None) -> ops.ActionResult:
    """Run the named action; an unknown name raises before anything is sent."""
    action(name)
    return await _RUNNERS[name](api, target, params, progress)
