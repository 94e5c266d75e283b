"""The `jetwatch` command: parse flags, resolve settings, hand over to the part that does the work."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from typing import Sequence

from jetwatch import settings as settings_mod
from jetwatch.settings import Settings, SettingsError

log = logging.getLogger("jetwatch")

CONNECTION = ("connection",)
STORE = ("store",)


class UserError(Exception):
    """Something the user can fix; printed without a traceback, exit status 2."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jetwatch", description=__doc__)
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help: str, groups: tuple[str, ...]) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help)
        settings_mod.add_arguments(p, groups)
        return p

    command("collect", "Sample consumer state and capture advisories into the store until stopped.",
            CONNECTION + STORE + ("collect",))
    command("setup", "Create the advisory capture stream (for collectors with read-only rights).",
            CONNECTION + ("collect",))
    dash = command("dashboard", "Serve the Streamlit dashboard.", CONNECTION + STORE + ("health", "dashboard"))
    dash.add_argument("--browser", action="store_true", help="Open a browser window.")
    up = command("up", "Start everything: an embedded demo server unless --server, the collector, "
                 "the pipeline on a schedule and the dashboard.",
                 CONNECTION + STORE + ("collect", "health", "dashboard", "pipeline"))
    up.add_argument("--demo", action="store_true", help="Run the demo workload also against --server.")
    up.add_argument("--no-pipeline", action="store_true", help="Do not run the Spark pipeline.")
    up.add_argument("--nats-port", type=int, default=0, help="Port of the embedded server (0: a free one).")

    for name, help in (("unpin", "Unpin the pinned client of a consumer's priority group."),
                       ("resume", "Resume a paused consumer.")):
        p = command(name, help, CONNECTION + STORE)
        p.add_argument("stream")
        p.add_argument("consumer")
        if name == "unpin":
            p.add_argument("--group", help="Priority group (default: the consumer's only group).")
        p.add_argument("--yes", action="store_true", help="Do not ask for confirmation.")
        p.add_argument("--actor", help="Name recorded in the audit log (default: the OS user).")
    pause = command("pause", "Pause a consumer until a time.", CONNECTION + STORE)
    pause.add_argument("stream")
    pause.add_argument("consumer")
    pause.add_argument("--until", required=True, help="RFC 3339 time, or a duration from now such as 10m.")
    pause.add_argument("--yes", action="store_true")
    pause.add_argument("--actor")
    drain = command("drain", "Pause a consumer, wait for in-flight work to finish, then hand over, "
                    "resume or stay paused.", CONNECTION + STORE)
    drain.add_argument("stream")
    drain.add_argument("consumer")
    drain.add_argument("--then", dest="then_action", choices=["handoff", "resume", "stay-paused"], default="resume")
    drain.add_argument("--timeout", default="60s", help="Longest wait for in-flight work (default 60s).")
    drain.add_argument("--stay-until", help="With --then stay-paused: RFC 3339 time or duration from now.")
    drain.add_argument("--yes", action="store_true")
    drain.add_argument("--actor")
    drain.add_argument("--drain-id", help=argparse.SUPPRESS)

    pipe = sub.add_parser("pipeline", help="Run the Spark pipeline.")
    pipe_sub = pipe.add_subparsers(dest="pipeline_command", required=True, metavar="STEP")
    run = pipe_sub.add_parser("run", help="Export, sessionise, roll up, judge and load back.")
    settings_mod.add_arguments(run, STORE + ("pipeline", "health"))
    run.add_argument("--since", help="Start of the window (RFC 3339 or a duration back from now).")
    run.add_argument("--until", help="End of the window (RFC 3339; default now).")
    run.add_argument("--master", dest="spark_master", help="Spark master URL (default local[*]).")

    sub.add_parser("settings", help="Print the configuration reference (Markdown).")
    return parser


def _configure_logging(level: str) -> None:
    logging.basicConfig(level=getattr(logging, level), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


async def _collect(settings: Settings) -> None:
    from collectors.runner import Collector
    from jetwatch.connection import ConnectError, connect
    from store.database import Store

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    while True:  # a collector started before its server waits for it, saying so
        try:
            nc = await connect(settings, name="jetwatch-collector")
            break
        except ConnectError as exc:
            log.error("%s Retrying in 5s.", exc)
            try:
                await asyncio.wait_for(stop.wait(), 5)
                return
            except asyncio.TimeoutError:
                continue
    system_nc = None
    if settings.system is not None:
        try:
            system_nc = await connect(settings.system, name="jetwatch-collector-system")
        except ConnectError as exc:
            await nc.drain()
            raise UserError(f"{exc} (the system-account connection of --system-context "
                            f"{settings.system_context})") from None
    store = Store(settings.db, lock_timeout=settings.lock_timeout)
    log.info("collecting from %s into %s every %.1fs", settings.server, settings.db, settings.interval)
    try:
        await Collector(settings, nc, store, system_nc=system_nc).run(stop)
    finally:
        for conn in (nc, system_nc):
            if conn is not None and not conn.is_closed:
                await conn.drain()
    log.info("collector stopped; everything received is stored")


async def _setup(settings: Settings) -> None:
    from collectors.advisories import ensure_capture_stream
    from jetwatch.connection import connect
    from jetwatch.jsapi import JetStreamAPI

    nc = await connect(settings, name="jetwatch-setup")
    try:
        api = JetStreamAPI(nc, timeout=settings.request_timeout)
        if not await ensure_capture_stream(api, settings.capture_stream, settings.capture_max_age,
                                           settings.capture_max_bytes):
            raise UserError(f"could not create the capture stream {settings.capture_stream}: "
                            "these credentials need $JS.API.STREAM.CREATE rights")
        print(f"capture stream {settings.capture_stream} is ready")
    finally:
        await nc.drain()


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    _configure_logging(args.log_level)
    try:
        settings = settings_mod.resolve(args)
        if args.command == "collect":
            asyncio.run(_collect(settings))
        elif args.command == "setup":
            asyncio.run(_setup(settings))
        elif args.command == "settings":
            print(settings_mod.reference_markdown())
        else:
            from jetwatch import commands
            return commands.run(args, settings)
    except (SettingsError, UserError) as exc:
        print(f"jetwatch: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        from jetwatch.connection import ConnectError
        from store.database import StoreError
        if isinstance(exc, (ConnectError, StoreError)):
            print(f"jetwatch: {exc}", file=sys.stderr)
            return 1
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
