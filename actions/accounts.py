"""Which connection an action runs on: one authenticated for the target consumer's account.

A consumer name means nothing without its account: `A/wa` in APP and `A/wa` in OTHER are two
consumers, and a connection only ever reaches its own account's. So an action connects with the
credentials mapped to the target's account (`--account-contexts`, as `nats --context` would), or
with jetwatch's own connection, and then asks the server which account that connection really is
in. If it is not the target's, nothing is sent and the user is told what to configure.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from nats.aio.client import Client

from jetwatch.actions import catalog
from jetwatch.actions import operations as ops
from jetwatch.core.connection import AccountUnknown, connect, connected_account
from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.core.settings import Settings

Precheck = Callable[[JetStreamAPI], Awaitable["ops.ActionResult | None"]]


def connection_for(settings: Settings, account: str | None) -> Settings:
    """The settings to connect with for an action on `account`'s consumer: the account's mapped
    credentials, on the server the action goes to (`settings.server`: --server, or the cluster's
    server when the dashboard acts on one of several clusters). That is the server the confirmation
    names; the mapping was resolved once, against --server, and a context may name a server of its
    own, so taking its server would send the action to another cluster. A context's own server is
    used only when jetwatch has none."""
    if account and account in settings.accounts:
        mapped = settings.accounts[account]
        return mapped.replace(server=settings.server) if settings.server else mapped
    return settings


def wrong_account(target: ops.Target, connected: str, mapped: bool) -> str:
    how = ("its mapping in --account-contexts authenticates for account " + connected if mapped else
           f"jetwatch's connection is authenticated for account {connected}, and --account-contexts has no entry "
           f"for {target.account}")
    return (f"not sent: {target.stream}/{target.consumer} is in account {target.account}, but {how}. "
            f"Map it to a NATS context or credentials file of that account, e.g. "
            f"--account-contexts {target.account}=<context> (or JETWATCH_ACCOUNT_CONTEXTS).")


async def perform_on_account(settings: Settings, name: str, target: ops.Target, params: Mapping[str, Any],
                             progress: ops.Progress | None = None, client_name: str = "jetwatch-action",
                             precheck: Precheck | None = None) -> ops.ActionResult:
    """Connect for the target's account, check the server agrees, then run the action. The result's
    target names the account the server says the action ran in (the one the audit records).
    `precheck` may refuse on that same connection just before sending (a pin that moved)."""
    catalog.action(name)
    conn = connection_for(settings, target.account)
    nc: Client = await connect(conn, name=client_name)
    try:
        try:
            account = await connected_account(nc)
        except AccountUnknown as exc:  # never a guess: nothing is sent on a connection of unknown account
            where = f"{target.stream}/{target.consumer}" + (f" in account {target.account}" if target.account else "")
            return ops.ActionResult(name, target, False,
                                    f"not sent: jetwatch cannot check that it would act on {where}: {exc}",
                                    None, {"refused": True, "connected_account": None})
        if target.account and account != target.account:
            return ops.ActionResult(name, target, False, wrong_account(target, account, conn is not settings),
                                    None, {"refused": True, "connected_account": account})
        acted_on = ops.Target(account, target.stream, target.consumer, target.group)
        api = JetStreamAPI(nc, timeout=conn.request_timeout)
        refused = await precheck(api) if precheck is not None else None
        if refused is not None:
            refused.target = acted_on
            return refused
        return await catalog.perform(api, name, acted_on, params, progress)
    finally:
        await nc.drain()
