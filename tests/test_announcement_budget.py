"""Announcements have a budget: one connection flooding the announce subjects with distinct names
and pin ids on a real server has at most the budget stored, and the log says how many were
dropped in a bounded number of lines, never a line per announcement."""

from __future__ import annotations

import logging
import re

import nats

from jetwatch.collectors import announcement_inbox
from jetwatch.core.pin_announce import PinAnnouncer
from jetwatch.core.pin_announce import announce_subject as pin_subject
from jetwatch.core.pull_announce import PullAnnouncer, PullSettings
from jetwatch.core.pull_announce import announce_subject as pull_subject
from tests.helpers import collecting, collector_settings, eventually, rows

FLOOD = 1000
NOT_STORED = re.compile(r"^(\d+) (pin|pull-settings) announcements not stored in the last")


def test_a_flood_of_announcements_from_one_connection_stays_within_the_budget(nats_server, db_path, uid, run,
                                                                               caplog, monkeypatch):
    monkeypatch.setattr(announcement_inbox, "SUMMARY_EVERY", 0.5)
    caplog.set_level(logging.WARNING, logger="jetwatch")
    stream = f"{uid}_FLOOD"
    settings = collector_settings(nats_server.url, db_path, (stream,), monitor_url=(nats_server.monitor_url,))
    budget = announcement_inbox.PER_ORIGIN_PER_MINUTE

    def dropped(kind: str) -> int:
        return sum(int(m.group(1)) for r in caplog.records
                   if (m := NOT_STORED.match(r.getMessage())) and m.group(2) == kind)

    async def scenario() -> tuple[int, int]:
        nc = await nats.connect(nats_server.url, name="flooder")
        try:
            async with collecting(settings) as collector:
                for i in range(FLOOD):
                    pin = PinAnnouncer(nc, stream, "c", group="jobs", name=f"n{i}").announcement(f"PIN{i:019d}")
                    await nc.publish(pin_subject(stream, "c"), pin.encode())
                    pull = PullAnnouncer(nc, stream, "c", name=f"n{i}").announcement(PullSettings(expires_ns=0))
                    await nc.publish(pull_subject(stream, "c"), pull.encode())
                await nc.flush()

                def stored(table: str) -> int:
                    return rows(collector.store, f"SELECT count(*) FROM {table} WHERE stream = ?", [stream])[0][0]

                for kind, table in (("pin", "pin_holders"), ("pull-settings", "pull_settings")):
                    await eventually(lambda kind=kind, table=table: stored(table) + dropped(kind) == FLOOD
                                     or stored(table) > 2 * budget,
                                     timeout=120, message=f"every {kind} announcement stored or counted as dropped")
                return stored("pin_holders"), stored("pull_settings")
        finally:
            await nc.close()

    pins, pulls = run(scenario())
    # one origin: at most its budget a minute (two minutes if the flood straddles one's end)
    assert 0 < pins <= 2 * budget and 0 < pulls <= 2 * budget, (pins, pulls)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) <= 60, warnings[:5]
    assert all(NOT_STORED.match(w) for w in warnings), [w for w in warnings if not NOT_STORED.match(w)][:5]
    assert any("over the budget of" in w and "most from connection" in w for w in warnings), warnings[:5]
