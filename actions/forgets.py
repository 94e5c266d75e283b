"""The `forget` action: drop a consumer the server no longer lists from everything jetwatch shows.

A consumer that disappears from the server's listings without a DELETED advisory is held by the
collector with its last known state (a server that cannot load it, a deletion while no advisory
was captured): jetwatch cannot tell which, an operator can. Like a silence it sends nothing to the
server and lives in the store: its audit outcome row is what the collector reads, and it drops the
consumer at its next cycle. Refused for a consumer the server still lists.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jetwatch import sql
from jetwatch.actions import operations as ops
from jetwatch.health.cluster import UNLISTED
from jetwatch.store.database import Store, StoreError


def _refuse(target: ops.Target, why: str) -> ops.ActionResult:
    return ops.ActionResult("forget", target, False, why, None, {"refused": True})


def forget(store: Store | None, target: ops.Target, params: Mapping[str, Any], actor: str,
           action_id: str | None = None) -> ops.ActionResult:
    """Forget a consumer the collector holds as no longer listed."""
    if store is None:
        return _refuse(target, "not forgotten: a forget is kept in the store's audit log, and there is none (--db)")

    def check(con: Any) -> ops.ActionResult:
        found = con.execute(sql.query("forget_target"), {"account": target.account, "stream": target.stream,
                                                      "consumer": target.consumer}).fetchall()
        if not found:
            return _refuse(target, f"not forgotten: jetwatch shows no {target.stream}/{target.consumer}"
                           f"{' in account ' + target.account if target.account else ''}: nothing to forget")
        if len(found) > 1:
            return _refuse(target, f"not forgotten: {target.stream}/{target.consumer} is in accounts "
                           f"{', '.join(sorted(str(r[0]) for r in found))}: name the account (--account)")
        account, _, _, verdict, reason = found[0]
        acted_on = ops.Target(account, target.stream, target.consumer, target.group)
        if not str(reason or "").startswith(UNLISTED):
            return _refuse(acted_on, "not forgotten: the server still lists it (its verdict is "
                           f"{verdict}); to remove it, delete it on the server (`nats consumer rm {target.stream} "
                           f"{target.consumer}`): its DELETED advisory takes it off every page")
        return ops.ActionResult("forget", acted_on, True,
                                "forgotten: the collector drops it from every page at its next cycle; if the server "
                                "lists it again, it comes back", None, {"verdict": verdict})

    try:
        return store.read(check)
    except StoreError as exc:
        return ops.ActionResult("forget", target, False, f"not forgotten: the store could not be read ({exc})", None)
