"""Every action audited exactly once, whatever happens: an intent row before anything is sent,
an outcome row after (ok, refused, failed, error or interrupted), both under one action id.

Rows are only ever appended (store/audit.py chains them); an intent that cannot be written stops
the action before it is sent, so nothing acts unaudited unless the user asked for `--no-audit`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from jetwatch.actions import catalog
from jetwatch.actions import operations as ops
from jetwatch.core.errors import JetwatchError
from jetwatch.store import audit
from jetwatch.store.database import Store


class AuditUnavailable(JetwatchError):
    """The intent row could not be written, so nothing was sent."""


def begin(store: Store | None, name: str, target: ops.Target, actor: str, origin: str,
          params: Mapping[str, Any], action_id: str | None = None) -> str:
    """Write the intent row (skipped only when the user chose no store); returns the action id."""
    action_id = action_id or ops.new_action_id()
    if store is None:
        return action_id
    row = audit.AuditRow(
        ts=ops.utcnow(), actor=actor, origin=origin, action=name, account=target.account, stream=target.stream,
        consumer=target.consumer, group_name=target.group,
        parameters=json.dumps(catalog.audit_params(name, params), default=str), outcome="pending", reply=None,
        action_id=action_id, phase="intent")
    try:
        audit.write(store, row)
    except audit.AuditWriteFailed as exc:
        raise AuditUnavailable(f"not sent: the audit row announcing {name} of {target.stream}/{target.consumer} "
                               f"could not be written ({exc}). Nothing was sent. Fix the store, or run with "
                               "--no-audit to act without an audit trail.") from None
    return action_id


def finish(store: Store | None, action_id: str, result: ops.ActionResult, actor: str, origin: str,
           params: Mapping[str, Any]) -> None:
    """Write the outcome row for `action_id`; a failure is told in the result's message."""
    audited = catalog.audit_params(result.action, params, result.details)
    ops.record(store, result, actor, origin, audited, action_id=action_id, phase="outcome")


def interrupted(name: str, target: ops.Target, why: str) -> ops.ActionResult:
    return ops.ActionResult(name, target, False, why, None, {"outcome": "interrupted"})
