"""Connect to NATS the way the `nats` CLI does, from the settings object."""

from __future__ import annotations

import logging
import ssl
from typing import Any

from nats.aio.client import Client

from jetwatch.core.errors import JetwatchError
from jetwatch.core.settings import Settings

log = logging.getLogger("jetwatch.core.connection")


class ConnectError(JetwatchError):
    """The first connection failed; the message says where to look."""


def connect_options(settings: Settings, name: str) -> dict[str, Any]:
    servers = [s.strip() for s in (settings.server or "nats://127.0.0.1:4222").split(",") if s.strip()]
    opts: dict[str, Any] = {
        "servers": servers,
        "name": name,
        "connect_timeout": settings.connect_timeout,
        "allow_reconnect": True,
        "max_reconnect_attempts": -1,
        "reconnect_time_wait": 1,
        "drain_timeout": 10,
    }
    if settings.user:
        opts["user"] = settings.user
        opts["password"] = settings.password or ""
    if settings.token:
        opts["token"] = settings.token
    if settings.nkey:
        opts["nkeys_seed"] = settings.nkey
    if settings.creds:
        opts["user_credentials"] = settings.creds
    if settings.tls_ca or settings.tls_cert or any(s.startswith("tls://") for s in servers):
        ctx = ssl.create_default_context(cafile=settings.tls_ca) if settings.tls_ca else ssl.create_default_context()
        if settings.tls_cert:
            ctx.load_cert_chain(settings.tls_cert, settings.tls_key)
        opts["tls"] = ctx
    return opts


async def connect(settings: Settings, name: str = "jetwatch", first_attempts: int = 2) -> Client:
    """Connect (failing clearly after a few attempts), then reconnect by itself for ever."""

    async def on_error(exc: Exception) -> None:
        if nc.is_connected or nc.is_reconnecting:
            log.warning("NATS connection error: %s", exc)

    async def on_disconnect() -> None:
        if not (nc.is_closed or nc.is_draining):
            log.warning("disconnected from NATS; reconnecting")

    async def on_reconnect() -> None:
        log.info("reconnected to NATS at %s", nc.connected_url.netloc if nc.connected_url else "?")

    opts = {**connect_options(settings, name), "max_reconnect_attempts": first_attempts}
    nc = Client()
    try:
        await nc.connect(error_cb=on_error, disconnected_cb=on_disconnect, reconnected_cb=on_reconnect, **opts)
    except Exception as exc:  # nats-py raises several unrelated types for a failed first connect
        raise ConnectError(
            f"could not connect to NATS at {', '.join(opts['servers'])}: {exc or type(exc).__name__}. "
            "Check --server and the credentials (--user/--password, --token, --nkey, --creds, --context)."
        ) from exc
    nc.options["max_reconnect_attempts"] = -1  # once connected, never give up on the server
    return nc
