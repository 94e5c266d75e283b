"""`jetwatch unpin|pause|resume|drain`: confirm on a terminal, act, audit, report."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import getpass
import json
import signal
import sys
from pathlib import Path
from typing import Any

from jetwatch.actions import catalog
from jetwatch.actions import operations as ops
from jetwatch.actions.accounts import perform_on_account
from jetwatch.actions.audit import begin, finish, interrupted
from jetwatch.actions.drains import DrainTracker
from jetwatch.core.connection import ConnectError
from jetwatch.core.settings import Settings, SettingsError, parse_duration, parse_instant
from jetwatch.core.urls import shown_servers
from jetwatch.store.database import Store


def parse_when(text: str) -> dt.datetime:
    """An RFC 3339 time, or a duration from now such as 10m."""
    return parse_instant(text, ops.utcnow())


def audit_store(settings: Settings, no_audit: bool = False) -> Store | None:
    """The store for audit rows: the configured one, if given or already there. None only when the
    user said --no-audit; with no store to write to, the action is refused before it is sent."""
    if no_audit:
        return None
    if "db" in settings.values or Path(settings.db).exists():
        return Store(settings.db, lock_timeout=settings.lock_timeout)
    raise SettingsError(f"not sent: no audit store at {settings.db}, and actions are audited. Name the store "
                        "with --db (it is created if missing), or add --no-audit to act without an audit trail")


def confirm(question: str, assume_yes: bool) -> bool:
    if assume_yes:
        return True
    if not sys.stdin.isatty():
        raise SettingsError("refusing to act without confirmation: no terminal to ask on. Add --yes to confirm in scripts")
    return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")


def _print_progress(state: str, start: int, in_flight: int | None, elapsed: float) -> None:
    shown = "?" if in_flight is None else str(in_flight)
    sys.stdout.write(f"\r  {state}: {shown} of {start} in flight, {elapsed:5.1f}s   ")
    sys.stdout.flush()
    if state != "draining":
        sys.stdout.write("\n")


def action_params(args: argparse.Namespace) -> dict[str, Any]:
    """The action's parameters from its flags, parsed before anything is asked or sent."""
    if args.command == "unpin":
        return {"group": args.group}
    if args.command == "pause":
        return {"until": parse_when(args.until)}
    if args.command == "silence":
        return {"for_s": parse_duration(args.for_), "note": args.note,
                "expect_verdict": args.verdict.upper() if args.verdict else None}
    if args.command == "drain":
        if args.then_action == "stay-paused" and not args.stay_until:
            raise SettingsError("--then stay-paused needs --stay-until (an RFC 3339 time or a duration such as 30m)")
        return {"then": args.then_action, "timeout_s": parse_duration(args.timeout),
                "stay_until": parse_when(args.stay_until) if args.stay_until else None}
    return {}


async def _act(args: argparse.Namespace, settings: Settings, target: ops.Target, params: dict[str, Any],
               tracker: DrainTracker | None) -> ops.ActionResult:
    # Ctrl-C and SIGTERM (a detached drain being stopped) end the action as an interruption the
    # caller audits, never as a silent death. The cancellation is repeated until the action ends:
    # nats-py swallows a cancellation that lands while it flushes a request, and a drain would then
    # run on to its timeout as if nobody had pressed Ctrl-C.
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()

    def interrupt() -> None:
        if not task.done():
            task.cancel()
            loop.call_later(0.1, interrupt)

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, interrupt)

    def progress(state: str, start: int, in_flight: int | None, elapsed: float) -> None:
        _print_progress(state, start, in_flight, elapsed)
        if tracker:
            tracker.progress(state, start, in_flight, elapsed)

    return await perform_on_account(settings, args.command, target, params, progress,
                                    client_name=f"jetwatch-{args.command}")


def _detached_drain(args: argparse.Namespace, settings: Settings, store: Store | None
                    ) -> tuple[ops.Target, dict[str, Any], str]:
    """A drain the dashboard started: target, plan and operator come from its intent row in the
    store (never from argv, where a name like `-orders` would read as an option)."""
    if store is None:
        raise SettingsError("a detached drain needs the store that holds its intent row (--db)")
    found = store.query("audit_action", {"action_id": args.drain_id})
    intent = found[found["phase"] == "intent"]
    if intent.empty or intent.iloc[0]["action"] != "drain":
        raise SettingsError(f"no drain {args.drain_id} announced in the audit log of {settings.db}")
    row = intent.iloc[0]
    p = json.loads(row["parameters"] or "{}")
    params = {"then": p.get("then", "resume"), "timeout_s": float(p.get("timeout_s", 60.0)),
              "stay_until": parse_instant(p["stay_until"], ops.utcnow()) if p.get("stay_until") else None}
    group = row["group_name"] if isinstance(row["group_name"], str) else None
    account = row["account"] if isinstance(row["account"], str) else None
    return ops.Target(account, row["stream"], row["consumer"], group), params, row["actor"]


def _interrupted_message(command: str, target: ops.Target) -> str:
    if command == "drain":
        return ("interrupted: the consumer stays paused until its pause expires by itself "
                f"(at most the timeout plus a margin). Resume it now with: jetwatch resume -- "
                f"{target.stream} {target.consumer}")
    return "interrupted: the request may or may not have reached the server; check the consumer's state"


def run_action(args: argparse.Namespace, settings: Settings) -> int:
    drain_id = getattr(args, "drain_id", None)
    if drain_id:
        store = audit_store(settings, getattr(args, "no_audit", False))
        target, params, actor = _detached_drain(args, settings, store)
        action_id, origin = drain_id, "dashboard"
    else:
        if not args.stream or not args.consumer:
            raise SettingsError(f"{args.command} needs STREAM and CONSUMER")
        actor = args.actor or getpass.getuser()
        params = action_params(args)  # a bad flag is said before anything else
        store = audit_store(settings, getattr(args, "no_audit", False))
        target = ops.Target(args.account, args.stream, args.consumer, getattr(args, "group", None))
        where = (f"in the store {settings.db}" if catalog.action(args.command).on == "store"
                 else f"on {shown_servers(settings.server)}")
        question = f"{catalog.confirmation(args.command, target, params)} {where}?"
        if not confirm(question, args.yes):
            print("nothing sent")
            return 1
        origin = "cli"
        action_id = begin(store, args.command, target, actor, origin, params)
    if catalog.action(args.command).on == "store":  # a silence: kept in the store, nothing sent
        result = catalog.perform_in_store(store, args.command, target, params, actor, action_id)
        finish(store, action_id, result, actor, origin, params)
        print(f"{result.action} {result.target.describe()}: {result.message}")
        return 0 if result.ok and not result.details.get("audit_failed") else 1
    tracker = None
    if args.command == "drain" and store is not None and drain_id:
        tracker = DrainTracker(store, drain_id, actor, target, params["then"])
    code = 0
    try:
        result = asyncio.run(_act(args, settings, target, params, tracker))
    except ConnectError as exc:
        result = ops.ActionResult(args.command, target, False, str(exc), None)
        print(f"jetwatch: {exc}", file=sys.stderr)
    except (KeyboardInterrupt, asyncio.CancelledError):
        result = interrupted(args.command, target, _interrupted_message(args.command, target))
        code = 130
    finish(store, action_id, result, actor, origin, params)
    if tracker is not None:
        tracker.finish(result)  # after the audit row: a drain shown as finished is already audited
    if code:
        print(f"\n{result.message}")
        return code
    print(f"{result.action} {result.target.describe()}: {result.message}")
    if result.reply is not None:
        print(f"server reply: {result.reply}")
    return 0 if result.ok and not result.details.get("audit_failed") else 1
