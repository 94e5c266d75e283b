"""The subcommands that run other parts: dashboard, up, actions, pipeline."""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
from pathlib import Path

from jetwatch.settings import SETTINGS, Settings

DASHBOARD_APP = Path(__file__).resolve().parents[1] / "dashboard" / "app.py"


class PortInUse(Exception):
    pass


def settings_env(settings: Settings) -> dict[str, str]:
    """The settings as JETWATCH_* variables, for child processes (Streamlit reads them back)."""
    env: dict[str, str] = {}
    for s in SETTINGS:
        value = settings.values.get(s.name)
        if value is None:
            continue
        env[s.env] = ",".join(value) if isinstance(value, tuple) else str(value)
    return env


def child_env(settings: Settings) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("JETWATCH_")}
    return {**base, **settings_env(settings)}


def check_port_free(address: str, port: int) -> None:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((address, port))
        except OSError:
            raise PortInUse(f"port {port} on {address} is already in use: stop what runs there, "
                            f"or pass --port with a free port") from None


def dashboard_command(settings: Settings, open_browser: bool = False) -> list[str]:
    return [sys.executable, "-m", "streamlit", "run", str(DASHBOARD_APP),
            "--server.address", settings.address, "--server.port", str(settings.port),
            "--server.headless", "false" if open_browser else "true",
            "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none",
            "--client.toolbarMode", "minimal"]


def run_dashboard(settings: Settings, open_browser: bool) -> int:
    check_port_free(settings.address, settings.port)
    print(f"jetwatch dashboard on http://{settings.address}:{settings.port}/", flush=True)
    return subprocess.call(dashboard_command(settings, open_browser), env=child_env(settings))


def run(args: argparse.Namespace, settings: Settings) -> int:
    from jetwatch.cli import UserError

    try:
        if args.command == "dashboard":
            return run_dashboard(settings, args.browser)
        if args.command == "up":
            from jetwatch.up import up
            return up(settings, demo=args.demo, pipeline=not args.no_pipeline, nats_port=args.nats_port)
        if args.command in ("unpin", "pause", "resume", "drain"):
            from actions.cli import run_action
            return run_action(args, settings)
        if args.command == "pipeline":
            from pipeline.cli import run_pipeline
            return run_pipeline(args, settings)
    except PortInUse as exc:
        raise UserError(str(exc)) from None
    raise UserError(f"unknown command {args.command}")
