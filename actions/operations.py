"""Operator actions: unpin, pause, resume and drain. One module for the dashboard and the CLI.

Every action has one shape: check what the server does not (the policy, the group, that
something is pinned) → act → write an audit row → return a result to tell the user. The server
has no drain call; `drain` is built from pause, watching `num_ack_pending` fall to zero, then
unpin and/or resume, with the pause set to expire by itself so a crashed jetwatch cannot leave a
consumer paused for ever.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from jetwatch.actions.catalog import THEN_CHOICES
from jetwatch.core.clock import rfc3339, utcnow
from jetwatch.core.durations import duration
from jetwatch.core.jsapi import JetStreamAPI, JetStreamAPIError, NoReply
from jetwatch.core.jsinfo import ConsumerInfo
from jetwatch.store import audit
from jetwatch.store.database import Store

Then = Literal["handoff", "resume", "stay-paused"]


@dataclass(frozen=True)
class Target:
    account: str | None
    stream: str
    consumer: str
    group: str | None = None

    def describe(self, with_group: bool = True) -> str:
        """Words naming the target; `with_group=False` for an action on the whole consumer (pause,
        resume), where naming a group would say the action reaches only that group's clients."""
        group = f", group {self.group}" if self.group and with_group else ""
        return f"account {self.account or '(connection default)'}, stream {self.stream}, consumer {self.consumer}{group}"


@dataclass
class ActionResult:
    action: str
    target: Target
    ok: bool
    message: str
    reply: dict[str, Any] | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def outcome(self) -> str:
        """ok, refused (nothing sent), failed (the server's reply contradicts the request),
        interrupted, or error."""
        if self.ok:
            return "ok"
        if self.details.get("refused"):
            return "refused"
        return self.details.get("outcome") or "error"


def record(store: Store | None, result: ActionResult, actor: str, origin: str, params: dict[str, Any],
           action_id: str | None = None, phase: str | None = None) -> None:
    """One audit row: an action's outcome (with its `action_id`), or a one-off event (without). A
    store that cannot take it is reported in the result's message, never allowed to undo the
    action or to escape as a raw database error."""
    if store is None:
        return
    t = result.target
    row = audit.AuditRow(
        ts=utcnow(), actor=actor, origin=origin, action=result.action, account=t.account, stream=t.stream,
        consumer=t.consumer, group_name=t.group, parameters=json.dumps(params, default=str), outcome=result.outcome,
        reply=json.dumps(_audited_reply(result), default=str),
        action_id=action_id or new_action_id(), phase=phase or ("outcome" if action_id else "event"))
    try:
        audit.write(store, row)
    except audit.AuditWriteFailed as exc:
        sent = "" if result.details.get("refused") else "the action was sent and its result stands, but "
        result.message += f" ({sent}its audit row could not be written: {exc})"
        result.details["audit_failed"] = True


def _audited_reply(result: ActionResult) -> Any:
    """The server's reply as it came; for an outcome that is not ok, with jetwatch's own words
    beside it (`outcome_message`: a timed-out drain's replies alone do not say it timed out)."""
    if result.reply is None:
        return {"message": result.message}
    if not result.ok and isinstance(result.reply, dict) and "outcome_message" not in result.reply:
        return {**result.reply, "outcome_message": result.message}
    return result.reply


def new_action_id() -> str:
    return uuid.uuid4().hex


def _server_error(action: str, target: Target, exc: Exception) -> ActionResult:
    if isinstance(exc, JetStreamAPIError):
        text = f"the server refused: {exc.description} (error {exc.err_code})"
    else:
        text = f"no answer from the server: {exc}"
    return ActionResult(action, target, False, text, {"error": str(exc)})


def _contradicted(action: str, target: Target, reply: dict[str, Any], why: str) -> ActionResult:
    """The server answered without error, but not what was asked: the action failed."""
    return ActionResult(action, target, False, why, reply, {"outcome": "failed"})


def _refuse(action: str, target: Target, why: str) -> ActionResult:
    return ActionResult(action, target, False, why, None, {"refused": True})


async def unpin(api: JetStreamAPI, target: Target) -> ActionResult:
    """Unpin the group's client, after checking the three things the server does not."""
    try:
        info = ConsumerInfo.of(await api.consumer_info(target.stream, target.consumer))
    except (JetStreamAPIError, NoReply) as exc:
        return _server_error("unpin", target, exc)
    config = info.settings
    groups = list(config.priority_groups or [])
    if config.priority_policy != "pinned_client":
        return _refuse("unpin", target, f"not sent: {target.stream}/{target.consumer} has priority policy "
                       f"{config.priority_policy or 'none'}, and only pinned_client consumers have a pin")
    group = target.group or (groups[0] if len(groups) == 1 else None)
    if group is None:
        return _refuse("unpin", target, f"not sent: name the group, one of {', '.join(groups)}")
    target = Target(target.account, target.stream, target.consumer, group)
    if group not in groups:
        return _refuse("unpin", target, f"not sent: group {group!r} is not in the consumer's config "
                       f"({', '.join(groups) or 'no groups'})")
    _, pinned = info.pinned()
    if not pinned:
        return _refuse("unpin", target, "not sent: nothing is pinned in this group right now")
    try:
        reply = await api.unpin(target.stream, target.consumer, group)
    except (JetStreamAPIError, NoReply) as exc:
        return _server_error("unpin", target, exc)
    return ActionResult("unpin", target, True, f"unpinned {pinned}; the server picks a new client at its next pull",
                        reply, {"unpinned_id": pinned})


async def pause(api: JetStreamAPI, target: Target, until: dt.datetime) -> ActionResult:
    try:
        reply = await api.pause(target.stream, target.consumer, rfc3339(until))
    except (JetStreamAPIError, NoReply) as exc:
        return _server_error("pause", target, exc)
    if reply.get("paused") is not True:
        return _contradicted("pause", target, reply, f"the server did not pause it: it replied paused: "
                             f"{json.dumps(reply.get('paused'))} for pause_until {rfc3339(until)} "
                             "(a time in the past resumes at once)")
    return ActionResult("pause", target, True, f"paused until {rfc3339(until)} (it resumes by itself then)", reply)


async def resume(api: JetStreamAPI, target: Target) -> ActionResult:
    try:
        reply = await api.pause(target.stream, target.consumer, None)
    except (JetStreamAPIError, NoReply) as exc:
        return _server_error("resume", target, exc)
    if reply.get("paused"):
        return _contradicted("resume", target, reply, "the server did not resume it: it replied paused: true")
    return ActionResult("resume", target, True, "resumed", reply)


Progress = Callable[[str, int, int | None, float], Awaitable[None] | None]


@dataclass
class DrainPlan:
    then: str = "resume"
    timeout_s: float = 60.0
    stay_until: dt.datetime | None = None
    poll_s: float = 0.25

    def margin_s(self) -> float:
        """How far past the drain's own timeout the pause reaches, so it always expires."""
        return max(30.0, self.timeout_s * 0.5)


async def drain(api: JetStreamAPI, target: Target, plan: DrainPlan, progress: Progress | None = None) -> ActionResult:
    """Pause, wait for in-flight work to reach zero, then hand over, resume or stay paused."""
    if plan.then not in THEN_CHOICES:
        return _refuse("drain", target, f"--then must be one of {', '.join(THEN_CHOICES)}")
    if plan.then == "stay-paused" and (plan.stay_until is None or plan.stay_until <= utcnow()):
        return _refuse("drain", target, "stay-paused needs a time in the future to stay paused until")
    try:
        info = ConsumerInfo.of(await api.consumer_info(target.stream, target.consumer))
    except (JetStreamAPIError, NoReply) as exc:
        return _server_error("drain", target, exc)
    if plan.then == "handoff" and info.settings.priority_policy != "pinned_client":
        return _refuse("drain", target, "handoff needs a pinned_client consumer; use --then resume")
    group, pinned_before = info.pinned()
    target = Target(target.account, target.stream, target.consumer, target.group or group)
    start_pending = info.num_ack_pending
    replies: dict[str, Any] = {}

    async def tell(state: str, in_flight: int | None, elapsed: float) -> None:
        if progress is not None:
            maybe = progress(state, start_pending, in_flight, elapsed)
            if asyncio.iscoroutine(maybe):
                await maybe

    began = time.monotonic()
    pause_until = utcnow() + dt.timedelta(seconds=plan.timeout_s + plan.margin_s())
    try:
        replies["pause"] = await api.pause(target.stream, target.consumer, rfc3339(pause_until))
    except (JetStreamAPIError, NoReply) as exc:
        return _server_error("drain", target, exc)
    if replies["pause"].get("paused") is not True:
        return _contradicted("drain", target, replies, "the server did not pause it (it replied paused: "
                             f"{json.dumps(replies['pause'].get('paused'))}); nothing was drained")
    await tell("draining", start_pending, 0.0)

    in_flight: int | None = start_pending
    while True:
        elapsed = time.monotonic() - began
        try:
            in_flight = ConsumerInfo.of(await api.consumer_info(target.stream, target.consumer)).num_ack_pending
        except (JetStreamAPIError, NoReply):
            in_flight = None  # a missed reading; the deadline still holds
        await tell("draining", in_flight, elapsed)
        if in_flight == 0 or elapsed >= plan.timeout_s:
            break
        await asyncio.sleep(plan.poll_s)

    details = {"ack_pending_start": start_pending, "pinned_before": pinned_before,
               "seconds": round(time.monotonic() - began, 2), "pause_until": rfc3339(pause_until)}
    try:
        if in_flight != 0:
            replies["resume"] = await api.pause(target.stream, target.consumer, None)
            details["still_in_flight"] = in_flight
            await tell("timed_out", in_flight, time.monotonic() - began)
            return ActionResult("drain", target, False,
                                f"timed out after {duration(plan.timeout_s)} with {in_flight} messages still in flight; "
                                "the consumer was resumed", replies, details)
        if plan.then == "handoff":
            if target.group:
                replies["unpin"] = await api.unpin(target.stream, target.consumer, target.group)
            replies["resume"] = await api.pause(target.stream, target.consumer, None)
            message = "drained; pin released and consumer resumed: the next pull gets a new pin"
        elif plan.then == "resume":
            replies["resume"] = await api.pause(target.stream, target.consumer, None)
            message = "drained and resumed"
        else:
            assert plan.stay_until is not None
            replies["pause_again"] = await api.pause(target.stream, target.consumer, rfc3339(plan.stay_until))
            message = f"drained; paused until {rfc3339(plan.stay_until)}"
    except (JetStreamAPIError, NoReply) as exc:
        result = _server_error("drain", target, exc)
        result.message = (f"drained, but the last step failed ({result.message}); the consumer stays paused "
                          f"until {rfc3339(pause_until)} at most")
        result.details.update(details)
        await tell("failed", 0, time.monotonic() - began)
        return result
    refused = _last_step_refused(plan, target, replies)
    if refused:
        await tell("failed", 0, time.monotonic() - began)
        return ActionResult("drain", target, False, f"drained, but {refused}", replies,
                            {**details, "outcome": "failed"})
    await tell("done", 0, time.monotonic() - began)
    return ActionResult("drain", target, True, message, replies, details)


def _last_step_refused(plan: DrainPlan, target: Target, replies: dict[str, Any]) -> str | None:
    """What the server's answer to a drain's last step contradicts, judged as the plain `pause` and
    `resume` judge theirs: a stay-paused whose time passed while the work drained is answered
    `paused: false`, and the consumer is not paused."""
    if plan.then == "stay-paused":
        paused = replies["pause_again"].get("paused")
        if paused is not True:
            assert plan.stay_until is not None
            return (f"the server did not pause it again: it replied paused: {json.dumps(paused)} for pause_until "
                    f"{rfc3339(plan.stay_until)} (a time that passed while the work drained resumes at once). "
                    "The consumer is not paused: pause it again with a later time if it must stay paused")
        return None
    if replies["resume"].get("paused"):
        return ("the server did not resume it: it replied paused: true. Resume it with: "
                f"jetwatch resume -- {target.stream} {target.consumer}")
    return None
