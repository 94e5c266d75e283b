"""`jetwatch unpin|pause|resume|drain`: confirm on a terminal, act, audit, report."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import getpass
import sys
from pathlib import Path

from actions import operations as ops
from actions.drains import DrainTracker
from jetwatch.connection import connect
from jetwatch.jsapi import JetStreamAPI
from jetwatch.settings import Settings, SettingsError, parse_duration, parse_instant
from store.database import Store


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


async def _act(args: argparse.Namespace, settings: Settings, tracker: DrainTracker | None) -> ops.ActionResult:
    nc = await connect(settings, name=f"jetwatch-{args.command}")
    try:
        api = JetStreamAPI(nc, timeout=settings.request_timeout)
        target = ops.Target(None, args.stream, args.consumer, getattr(args, "group", None))
        if args.command == "unpin":
            return await ops.unpin(api, target)
        if args.command == "resume":
            return await ops.resume(api, target)
        if args.command == "pause":
            return await ops.pause(api, target, parse_when(args.until))
        plan = ops.DrainPlan(args.then_action, parse_duration(args.timeout),
                             parse_when(args.stay_until) if args.stay_until else None)

        def progress(state: str, start: int, in_flight: int | None, elapsed: float) -> None:
            _print_progress(state, start, in_flight, elapsed)
            if tracker:
                tracker.progress(state, start, in_flight, elapsed)

        return await ops.drain(api, target, plan, progress)
    finally:
        await nc.drain()


def run_action(args: argparse.Namespace, settings: Settings) -> int:
    actor = args.actor or getpass.getuser()
    if args.command == "pause":
        parse_when(args.until)  # a bad time fails before anything is asked or sent
    if args.command == "drain" and args.then_action == "stay-paused" and not args.stay_until:
        raise SettingsError("--then stay-paused needs --stay-until (an RFC 3339 time or a duration such as 30m)")
    what = {"unpin": "Unpin the pinned client of", "pause": f"Pause until {getattr(args, 'until', '')}",
            "resume": "Resume", "drain": f"Drain (then {getattr(args, 'then_action', '')})"}[args.command]
    group = f", group {args.group}" if getattr(args, "group", None) else ""
    if not confirm(f"{what} stream {args.stream}, consumer {args.consumer}{group} on {settings.server}?", args.yes):
        print("nothing sent")
        return 1
    store = audit_store(settings)
    params = {k: v for k, v in vars(args).items()
              if k in ("group", "until", "then_action", "timeout", "stay_until", "drain_id") and v is not None}
    tracker = None
    if args.command == "drain" and store is not None and args.drain_id:
        tracker = DrainTracker(store, args.drain_id, actor, ops.Target(None, args.stream, args.consumer), args.then_action)
    try:
        result = asyncio.run(_act(args, settings, tracker))
    except KeyboardInterrupt:
        if args.command == "drain":
            print("\ninterrupted: the consumer stays paused until its pause expires by itself "
                  f"(at most the timeout plus a margin). Resume it now with: jetwatch resume {args.stream} {args.consumer}")
        return 130
    ops.record(store, result, actor, "dashboard" if getattr(args, "drain_id", None) else "cli", params)
    if tracker is not None:
        tracker.finish(result)  # after the audit row: a drain shown as finished is already audited
    print(f"{result.action} {result.target.describe()}: {result.message}")
    if result.reply is not None:
        print(f"server reply: {result.reply}")
    return 0 if result.ok else 1
