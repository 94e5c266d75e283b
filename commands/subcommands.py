"""The subcommands that run a part in this process: collect, setup, dashboard, settings.

`up`, the actions and the pipeline have their own modules (jetwatch/up.py, actions/cli.py,
pipeline/cli.py); jetwatch/cli.py routes to all of them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import getpass
import logging
import os
import signal
import socket
import sys
from pathlib import Path

from nats.aio.client import Client
from nats.errors import Error as NatsError

from jetwatch import dashboard as dashboard_package
from jetwatch.collectors.advisories import ensure_capture_stream
from jetwatch.collectors.runner import Collector
from jetwatch.core import logs
from jetwatch.core import settings as settings_mod
from jetwatch.core.children import DASHBOARD_SECRETS, child_env
from jetwatch.core.connection import ConnectError, connect
from jetwatch.core.errors import JetwatchError, UsageError, require
from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.core.settings import Settings
from jetwatch.core.urls import shown_servers
from jetwatch.dashboard import identities
from jetwatch.dashboard.gate import allowed_hosts, read_only_reason
from jetwatch.dashboard.identities import IdentityError
from jetwatch.exporters import metrics as metrics_mod
from jetwatch.exporters.metrics_server import MetricsExporter
from jetwatch.exporters.probes import Probes
from jetwatch.store import audit, clusters
from jetwatch.store.database import Store, StoreError

log = logging.getLogger("jetwatch")

DASHBOARD_APP = Path(dashboard_package.__file__).resolve().parent / "app.py"
# The web server: the pages above behind jetwatch's host guard and session routes (dashboard/server.py).
DASHBOARD_SERVER = Path(dashboard_package.__file__).resolve().parent / "server.py"


class PortInUse(JetwatchError):
    """The dashboard's port is taken."""


def check_port_free(address: str, port: int) -> None:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((address, port))
        except OSError:
            raise PortInUse(f"port {port} on {address} is already in use: stop what runs there, "
                            f"or pass --port with a free port") from None


def dashboard_command(settings: Settings, open_browser: bool = False) -> list[str]:
    return [sys.executable, "-m", "streamlit", "run", str(DASHBOARD_SERVER),
            "--server.address", settings.address, "--server.port", str(settings.port),
            *[arg for host in sorted(allowed_hosts(settings)) for arg in ("--server.allowedHosts", host)],
            "--server.headless", "false" if open_browser else "true",
            "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none",
            "--client.toolbarMode", "minimal"]


def dashboard(args: argparse.Namespace, settings: Settings) -> int:
    require("streamlit", "dashboard", "the dashboard")
    for path in clusters.store_paths(settings.dbs, settings.db):  # a bad --db (or --dbs) said before serving
        Store(path, lock_timeout=settings.lock_timeout).check_readable()
    check_port_free(settings.address, settings.port)
    print(f"jetwatch dashboard on http://{settings.address}:{settings.port}/", flush=True)
    reason = read_only_reason(settings)
    if reason:
        print(f"jetwatch dashboard: {reason}", flush=True)
    # Streamlit replaces this process (same pid): a SIGTERM or Ctrl-C meant for `jetwatch dashboard`
    # reaches the server itself, and no orphaned server is left listening after its wrapper died.
    cmd = dashboard_command(settings, args.browser)
    os.execve(cmd[0], cmd, child_env(settings, DASHBOARD_SECRETS))


async def _collect(settings: Settings) -> None:
    # The collector's own reads (judging) run on its writer thread, never against its writes.
    store = Store(settings.db, lock_timeout=settings.lock_timeout, query_timeout=2 * settings.lock_timeout)
    store.check()  # a --db that cannot be used is said now, not as a failure every cycle
    store.write(lambda con: clusters.claim(con, settings.cluster, store.path))  # another cluster's store: said now
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    # /healthz, /readyz and /metrics answer from the start: a scheduler probes a collector that
    # waits for its server too (live, not ready, saying why).
    logs.tag_cluster(settings.cluster)
    probes = Probes(settings.interval, settings.request_timeout, settings.lock_timeout)
    beat = asyncio.create_task(probes.beat())
    metrics = None
    if settings.metrics_address:
        metrics = MetricsExporter(settings.metrics_cardinality, probes, settings.metrics_all_up_to)
        metrics.serve(settings.metrics_address)
    try:
        await _collect_connected(settings, store, stop, probes, metrics)
    finally:
        beat.cancel()
        if metrics is not None:
            metrics.close()


async def _collect_connected(settings: Settings, store: Store, stop: asyncio.Event, probes: Probes,
                             metrics: MetricsExporter | None) -> None:
    while True:  # a collector started before its server waits for it, saying so
        probes.stage = f"connecting to NATS at {shown_servers(settings.server)}"
        try:
            nc = await connect(settings, name="jetwatch-collector")
            break
        except ConnectError as exc:
            probes.stage = str(exc)
            log.error("%s Retrying in 5s.", exc)
            try:
                await asyncio.wait_for(stop.wait(), 5)
                return
            except TimeoutError:
                continue
    system_nc = None
    if settings.system is not None:
        try:
            system_nc = await connect(settings.system, name="jetwatch-collector-system")
        except ConnectError as exc:
            await nc.drain()
            raise UsageError(f"{exc} (the system-account connection of --system-context "
                             f"{settings.system_context})") from None
    log.info("collecting from %s into %s every %.1fs", shown_servers(settings.server), settings.db, settings.interval)
    try:
        await Collector(settings, nc, store, system_nc=system_nc, probes=probes, metrics=metrics).run(stop)
    finally:
        for conn in (nc, system_nc):
            if conn is not None and not conn.is_closed:
                await _let_go(conn)
    log.info("collector stopped; everything received is stored")


async def _let_go(nc: Client) -> None:
    """Drain a connection that is up (what was published gets out); close one that is not (a
    collector stopped while its server is gone stops at once, not with a traceback)."""
    if nc.is_connected:
        with contextlib.suppress(NatsError):
            await nc.drain()
            return
    with contextlib.suppress(NatsError, OSError):  # its transport may be gone already
        await nc.close()


def collect(args: argparse.Namespace, settings: Settings) -> int:
    asyncio.run(_collect(settings))
    return 0


async def _setup(settings: Settings) -> None:
    nc = await connect(settings, name="jetwatch-setup")
    try:
        api = JetStreamAPI(nc, timeout=settings.request_timeout)
        if not await ensure_capture_stream(api, settings.capture_stream, settings.capture_max_age,
                                           settings.capture_max_bytes):
            raise UsageError(f"could not create the capture stream {settings.capture_stream}: "
                             "these credentials need $JS.API.STREAM.CREATE rights")
        print(f"capture stream {settings.capture_stream} is ready")
    finally:
        await nc.drain()


def setup(args: argparse.Namespace, settings: Settings) -> int:
    asyncio.run(_setup(settings))
    return 0


def audit_verify(args: argparse.Namespace, settings: Settings) -> int:
    """`jetwatch audit verify`: 0 when the chain holds, 1 (saying where) when it does not. With
    --dbs (or a directory), each store's own chain, each said by cluster; 1 when any one broke or
    could not be read."""
    paths = clusters.store_paths(settings.dbs, settings.db)
    kept = getattr(args, "head", None)
    if len(paths) == 1:  # one store: exactly as before clusters
        return 0 if _verify_one(Store(paths[0], lock_timeout=settings.lock_timeout), "", kept) else 1
    if kept:
        raise UsageError(f"--head is one store's head, and {len(paths)} stores were named: verify the store "
                            "it was printed for alone, with --db FILE")
    failed: list[str] = []
    for path in paths:
        store = Store(path, lock_timeout=settings.lock_timeout)
        try:
            name = f"cluster {clusters.identity(store).cluster} ({path})"
            intact = _verify_one(store, f"{name}: ")
        except StoreError as exc:
            name, intact = f"the store {path}", False
            print(f"{name}: NOT VERIFIED: {exc}")
        if not intact:
            failed.append(name)
    if failed:
        print(f"audit chains of {len(paths)} stores: {len(failed)} BROKEN or not read: {'; '.join(failed)}")
        return 1
    print(f"audit chains of {len(paths)} stores: all intact")
    return 0


def _verify_one(store: Store, prefix: str, kept_head: str | None = None) -> bool:
    """Walk one store's chain, printing each line with `prefix` (the store's cluster); True when intact."""
    verdict = audit.verify(store, kept_head)
    for line in verdict.breaks:
        print(f"{prefix}BROKEN: {line}")
    if verdict.unchained:
        print(f"{prefix}{verdict.unchained} rows from before the chain (schema version 3) cannot be checked")
    for action_id in verdict.open_actions:
        print(f"{prefix}action {action_id} has an intent row and no outcome yet (still running, or its process died)")
    state = "intact" if verdict.intact else "BROKEN"
    print(f"{prefix}audit chain {state}: {verdict.rows} rows, head {verdict.head}")
    print(f"{prefix}head to keep: {verdict.head_to_keep} (keep it outside this store and pass it as --head next "
          "time: rows cut off the end show only against a head kept elsewhere)")
    return verdict.intact


def print_settings(args: argparse.Namespace, settings: Settings) -> int:
    print(settings_mod.reference_markdown())
    return 0


def print_metrics(args: argparse.Namespace, settings: Settings) -> int:
    print(metrics_mod.reference_markdown())
    return 0


def operator_add(args: argparse.Namespace, settings: Settings) -> int:
    """`jetwatch operator add NAME`: the password never appears in argv or the environment."""
    if not settings.operators_file:
        raise IdentityError("set --operators-file (or JETWATCH_OPERATORS_FILE) to the identities file to write")
    identities.check_name(args.name)
    if sys.stdin.isatty():
        password = getpass.getpass(f"password for {args.name}: ")
        if getpass.getpass("again: ") != password:
            raise IdentityError("the two passwords differ: nothing was written")
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    identities.add(settings.operators_file, args.name, password)
    print(f"operator {args.name} written to {settings.operators_file}; sessions signed before this change have ended")
    return 0
