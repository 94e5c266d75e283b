"""`jetwatch unpin|pause|resume|drain`: confirm on a terminal, act, audit, report."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import getpass
import sys
from pathlib import Path
from typing import Any

from jetwatch.actions import catalog
from jetwatch.actions import operations as ops
from jetwatch.actions.drains import DrainTracker
from jetwatch.core.connection import connect
from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.core.settings import Settings, SettingsError, parse_duration, parse_instant
from jetwatch.store.database import Store


def parse_when(text: str) -> dt.datetime:
    """An RFC 3339 time, or a duration from now such as 10m."""
    return parse_instant(text, ops.utcnow())


def audit_store(settings: Settings) -> Store | None:
    """The store for audit rows: the configured one, if given or already there."""
    explicit = "db" in settings.values
    if explicit or Path(settings.db).exists():
        return Store(settings.db, lock_timeout=settings.lock_timeout)
    return None


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
    if args.command == "drain":
        if args.then_action == "stay-paused" and not args.stay_until:
            raise SettingsError("--then stay-paused needs --stay-until (an RFC 3339 time or a duration such as 30m)")
        return {"then": args.then_action, "timeout_s": parse_duration(args.timeout),
                "stay_until": parse_when(args.stay_until) if args.stay_until else None}
    return {}


async def _act(args: argparse.Namespace, settings: Settings, params: dict[str, Any],
               tracker: DrainTracker | None) -> ops.ActionResult:
    nc = await connect(settings, name=f"jetwatch-{args.command}")
    try:
        api = JetStreamAPI(nc, timeout=settings.request_timeout)
        target = ops.Target(None, args.stream, args.consumer, getattr(args, "group", None))

        def progress(state: str, start: int, in_flight: int | None, elapsed: float) -> None:
            _print_progress(state, start, in_flight, elapsed)
            if tracker:
                tracker.progress(state, start, in_flight, elapsed)

        return await catalog.perform(api, args.command, target, params, progress)
    finally:
        await nc.drain()


def run_action(args: argparse.Namespace, settings: Settings) -> int:
    actor = args.actor or getpass.getuser()
    params = action_params(args)
    target = ops.Target(None, args.stream, args.consumer, getattr(args, "group", None))
    if not confirm(f"{catalog.confirmation(args.command, target, params)} on {settings.server}?", args.yes):
        print("nothing sent")
        return 1
    store = audit_store(settings)
    tracker = None
    if args.command == "drain" and store is not None and args.drain_id:
        tracker = DrainTracker(store, args.drain_id, actor, target, args.then_action)
    try:
        result = asyncio.run(_act(args, settings, params, tracker))
    except KeyboardInterrupt:
        if args.command == "drain":
            print("\ninterrupted: the consumer stays paused until its pause expires by itself "
                  f"(at most the timeout plus a margin). Resume it now with: jetwatch resume {args.stream} {args.consumer}")
        return 130
    audited = catalog.audit_params(args.command, params)
    if getattr(args, "drain_id", None):
        audited["drain_id"] = args.drain_id
    ops.record(store, result, actor, "dashboard" if getattr(args, "drain_id", None) else "cli", audited)
    if tracker is not None:
        tracker.finish(result)  # after the audit row: a drain shown as finished is already audited
    print(f"{result.action} {result.target.describe()}: {result.message}")
    if result.reply is not None:
        print(f"server reply: {result.reply}")
    return 0 if result.ok else 1
