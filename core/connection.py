"""Connect to NATS the way the `nats` CLI does, from the settings object."""

from __future__ import annotations

import json
import logging
import ssl
from typing import Any

from nats.aio.client import Client

from jetwatch.core.errors import JetwatchError
from jetwatch.core.settings import Settings, lift_userinfo

log = logging.getLogger("jetwatch.core.connection")


PING_INTERVAL = 4  # seconds
MAX_OUTSTANDING_PINGS = 2


class ConnectError(JetwatchError):
    """The first connection failed; the message says where to look."""


def connect_options(settings: Settings, name: str) -> dict[str, Any]:
    # Settings made in code (not by resolve) may still carry user:password@ in a URL: lift it here
    # too, so no URL jetwatch connects to (and later logs or stores) holds a secret.
    settings = Settings(lift_userinfo(dict(settings.values)), settings.system, settings.accounts)
    servers = [s.strip() for s in (settings.server or "nats://127.0.0.1:4222").split(",") if s.strip()]
    opts: dict[str, Any] = {
        "servers": servers,
        "name": name,
        "connect_timeout": settings.connect_timeout,
        "allow_reconnect": True,
        "max_reconnect_attempts": -1,
        "reconnect_time_wait": 1,
        "drain_timeout": 10,
        # A hung server (stopped, or its host frozen) keeps the socket open and answers nothing:
        # every request times out and, at the client's default (a ping every 2 minutes, two
        # unanswered), the collector would wait 4-6 minutes before trying another server. A ping
        # every PING_INTERVAL leaves it within 3 of them, inside the time a verdict is due.
        "ping_interval": PING_INTERVAL,
        "max_outstanding_pings": MAX_OUTSTANDING_PINGS,
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


def scrub(text: str, opts: dict[str, Any]) -> str:
    """`text` with every secret of the connection options replaced by ***: error text from a
    client library is shown on pages and in logs, and must not carry a password or token."""
    for key in ("password", "token"):
        secret = opts.get(key)
        if secret:
            text = text.replace(str(secret), "***")
    return text


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
            f"could not connect to NATS at {', '.join(opts['servers'])}: "
            f"{scrub(str(exc) or type(exc).__name__, opts)}. "
            "Check --server and the credentials (--user/--password, --token, --nkey, --creds, --context)."
        ) from exc
    nc.options["max_reconnect_attempts"] = -1  # once connected, never give up on the server
    return nc


class AccountUnknown(JetwatchError):
    """The server did not say which account a connection is in."""


USER_INFO = "$SYS.REQ.USER.INFO"


async def connected_account(nc: Client, timeout: float = 2.0) -> str:
    """The account this connection is authenticated for, as the server says (`$SYS.REQ.USER.INFO`
    answers any user about itself). Never a guess: when the server does not say (a user not allowed
    to ask, a server without a system account, no reply in time), AccountUnknown says why. `$G`
    (the global account) would be a guess, and one that acts and audits in a name the server
    never gave."""
    try:
        reply = json.loads((await nc.request(USER_INFO, b"", timeout=timeout)).data)
    except Exception as exc:  # any failure means "the server did not say"
        why = f"no reply within {timeout:g}s" if isinstance(exc, TimeoutError) else str(exc) or type(exc).__name__
        raise AccountUnknown(
            f"the server did not say which account this connection is in ({USER_INFO}: {why}): this user may "
            f"not be allowed to publish {USER_INFO}, or the server runs without a system account. Allow the "
            f"user to publish {USER_INFO} (it answers only about the user itself).") from None
    data = reply.get("data") if isinstance(reply, dict) else None
    account = data.get("account") if isinstance(data, dict) else None
    if not isinstance(account, str) or not account:
        error = reply.get("error") if isinstance(reply, dict) else None
        raise AccountUnknown(
            f"the server did not say which account this connection is in ({USER_INFO} answered "
            f"{json.dumps(error or reply)[:200]}). Allow the user to publish {USER_INFO}.")
    return account
