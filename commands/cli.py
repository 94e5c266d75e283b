"""The `jetwatch` command: parse flags, resolve settings, hand over to the part that does the work.

Every error meant for the user is a `JetwatchError`: printed as its message, exit status from the
error; anything else is a bug and keeps its traceback."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from jetwatch.actions import catalog
from jetwatch.actions.catalog import THEN_CHOICES
from jetwatch.core import logs
from jetwatch.core import settings as settings_mod
from jetwatch.core.errors import JetwatchError
from jetwatch.core.settings import Settings

CONNECTION = ("connection",)
STORE = ("store",)


def _parser() -> argparse.ArgumentParser:
    # No abbreviated flags: `--operator-secret VALUE` must not quietly mean --operator-secret-file.
    parser = argparse.ArgumentParser(prog="jetwatch", description=__doc__, allow_abbrev=False)
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    parser.add_argument("--log-format", default=os.environ.get("JETWATCH_LOG_FORMAT", "text"), choices=logs.FORMATS,
                        help="text lines (the default), or one JSON object per line for a log pipeline "
                             "(env JETWATCH_LOG_FORMAT)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help: str, groups: tuple[str, ...], without: tuple[str, ...] = ()) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help, allow_abbrev=False)
        settings_mod.add_arguments(p, groups, without)
        return p

    command("collect", "Sample consumer state and capture advisories into the store until stopped.",
            CONNECTION + STORE + ("collect", "health", "exporters"))
    command("setup", "Create the advisory capture stream (for collectors with read-only rights).",
            CONNECTION + ("collect",))
    dash = command("dashboard", "Serve the Streamlit dashboard.", CONNECTION + STORE + ("health", "dashboard"))
    dash.add_argument("--browser", action="store_true", help="Open a browser window.")
    up = command("up", "Start everything: an embedded demo server unless --server, the collector, "
                 "the pipeline on a schedule and the dashboard.",
                 CONNECTION + STORE + ("collect", "health", "exporters", "dashboard", "pipeline"))
    up.add_argument("--demo", action="store_true", help="Run the demo workload also against --server.")
    up.add_argument("--no-pipeline", action="store_true", help="Do not run the Spark pipeline.")
    up.add_argument("--nats-port", type=int, default=0, help="Port of the embedded server (0: a free one).")

    for action in catalog.ACTIONS:
        p = command(action.name, action.summary, CONNECTION + STORE)
        # A drain the dashboard started reads its target from the store (--drain-id), never argv.
        names: dict[str, Any] = {"nargs": "?"} if action.name == "drain" else {}
        p.add_argument("stream", help="Stream name (write `--` before names that start with `-`).", **names)
        p.add_argument("consumer", **names)
        p.add_argument("--account", help="Account the consumer is in: the action connects with that account's "
                       "--account-contexts entry, and is refused if the connection is in another account.")
        p.add_argument("--no-audit", action="store_true",
                       help="Act even with no audit store (nothing is recorded). Without it, no store: no action.")
        if action.name == "unpin":
            p.add_argument("--group", help="Priority group (default: the consumer's only group).")
        if action.name == "pause":
            p.add_argument("--until", required=True, help="RFC 3339 time, or a duration from now such as 10m.")
        if action.name == "silence":
            p.add_argument("--for", dest="for_", required=True, metavar="DURATION",
                           help="How long alerts are held back (such as 30m or 2h; at most 24h).")
            p.add_argument("--note", required=True, help="Why: who works on it, the ticket. Shown beside the verdict.")
            p.add_argument("--verdict", help="The verdict you saw (such as STALLED): refused if it is another now.")
        if action.name == "drain":
            p.add_argument("--then", dest="then_action", choices=list(THEN_CHOICES), default="resume")
            p.add_argument("--timeout", default="60s", help="Longest wait for in-flight work (default 60s).")
            p.add_argument("--stay-until", help="With --then stay-paused: RFC 3339 time or duration from now.")
            p.add_argument("--drain-id", help=argparse.SUPPRESS)
        p.add_argument("--yes", action="store_true", help="Do not ask for confirmation.")
        p.add_argument("--actor", help="Name recorded in the audit log (default: the OS user).")

    pipe = sub.add_parser("pipeline", help="Run the Spark pipeline.", allow_abbrev=False)
    pipe_sub = pipe.add_subparsers(dest="pipeline_command", required=True, metavar="STEP")
    run = pipe_sub.add_parser("run", help="Export, sessionise, roll up, judge and load back.", allow_abbrev=False)
    settings_mod.add_arguments(run, STORE + ("pipeline", "health"))
    run.add_argument("--since", help="Start of the window (RFC 3339 or a duration back from now).")
    run.add_argument("--until", help="End of the window (RFC 3339; default now).")
    run.add_argument("--master", dest="spark_master", help="Spark master URL (default local[*]).")

    # status and check read every store of --dbs: their --cluster picks clusters (a filter), it
    # does not name the collector's own cluster.
    stat = command("status", "Print every consumer's verdict as the collector last judged it, of every store "
                   "of --dbs.", STORE, without=("cluster",))
    stat.add_argument("--json", action="store_true", help="JSON, one object per consumer, findings included.")
    stat.add_argument("--stale-after", dest="stale_after", metavar="STALE_AFTER",
                      help="A cluster whose newest verdict is older than this is said to be stale, on stderr (and "
                           "`stale` in its JSON rows) (default: the stale_after setting).")
    _filters(stat)
    chk = command("check", "Exit 0 OK, 1 WARNING, 2 CRITICAL (3 UNKNOWN) from the worst verdict, with a "
                  "one-line summary: the monitoring-plugin convention. With --dbs, the worst over every store; a "
                  "store not read is UNKNOWN.", STORE, without=("cluster",))
    chk.add_argument("--stale-after", dest="stale_after", metavar="STALE_AFTER",
                     help="Verdicts older than this are UNKNOWN (default: the stale_after setting).")
    _filters(chk)
    aud = sub.add_parser("audit", help="Check the audit log.")
    aud_sub = aud.add_subparsers(dest="audit_command", required=True, metavar="STEP")
    ver = aud_sub.add_parser("verify", help="Walk the audit hash chain; exit 1 and say where it breaks.",
                             allow_abbrev=False)
    settings_mod.add_arguments(ver, STORE)
    ver.add_argument("--head", metavar="SEQ:HASH", help="The head an earlier `audit verify` printed to keep: exit 1 "
                     "if the chain no longer holds it (rows cut off its end, or the chain rebuilt).")
    ops_cmd = sub.add_parser("operator", help="Manage the dashboard's operator identities.")
    ops_sub = ops_cmd.add_subparsers(dest="operator_command", required=True, metavar="STEP")
    add = ops_sub.add_parser("add", help="Add an operator (or set a new password): the password is read from a "
                             "prompt, or from standard input when it is not a terminal. Existing sessions end.")
    settings_mod.add_arguments(add, ("dashboard",))
    add.add_argument("name")
    sub.add_parser("settings", help="Print the configuration reference (Markdown).")
    sub.add_parser("metrics", help="Print the reference of the Prometheus metrics `collect --metrics-address` serves (Markdown).")
    return parser


def _filters(p: argparse.ArgumentParser) -> None:
    """status's and check's choice of consumers."""
    p.add_argument("--cluster", dest="clusters", action="append",
                   help="Only the stores of clusters matching this glob (repeatable).")
    p.add_argument("--account", action="append", help="Only accounts matching this glob (repeatable).")
    p.add_argument("--stream", action="append", help="Only streams matching this glob (repeatable).")
    p.add_argument("--consumer", action="append", help="Only consumers matching this glob (repeatable).")
    p.add_argument("--verdict", action="append", help="Only these verdicts (repeatable).")


# Each command's handler, as module:function, imported only when that command runs: `--help` and
# a parse error load no DuckDB, pandas or NATS client.
_HANDLERS = {
    "collect": "jetwatch.subcommands:collect", "setup": "jetwatch.subcommands:setup",
    "dashboard": "jetwatch.subcommands:dashboard", "up": "jetwatch.up:run_up",
    "pipeline": "jetwatch.pipeline.cli:run_pipeline", "audit": "jetwatch.subcommands:audit_verify",
    "settings": "jetwatch.subcommands:print_settings", "metrics": "jetwatch.subcommands:print_metrics",
    "operator": "jetwatch.subcommands:operator_add", "status": "jetwatch.status:status",
    "check": "jetwatch.check:check",
    **{a.name: "jetwatch.actions.cli:run_action" for a in catalog.ACTIONS},
}


def _handler(args: argparse.Namespace) -> Callable[[argparse.Namespace, Settings], int]:
    module, name = _HANDLERS[args.command].split(":")
    handler: Callable[[argparse.Namespace, Settings], int] = getattr(importlib.import_module(module), name)
    return handler


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.log_format not in logs.FORMATS:  # argparse checks choices on the command line, not a default
        parser.error(f"JETWATCH_LOG_FORMAT={args.log_format!r}: use one of {', '.join(logs.FORMATS)}")
    logs.configure(args.log_level, args.log_format)
    try:
        return _handler(args)(args, settings_mod.resolve(args))
    except JetwatchError as exc:
        print(f"jetwatch: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
