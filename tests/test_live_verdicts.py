"""The collector judges every consumer after each cycle and keeps the verdicts and their changes;
the Fleet reads them instead of recomputing windows."""

from __future__ import annotations

import datetime as dt
import json

import nats
import numpy as np
import pandas as pd
import pytest

from jetwatch.collectors.judging import judge_cycle
from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.dashboard import data
from jetwatch.health import easing
from jetwatch.health.rules import Thresholds
from jetwatch.store import writes
from jetwatch.store.database import Store
from tests.helpers import collecting, collector_settings, eventually, make_consumer, make_stream, publish, rows

FAST = {"health_window": 4.0, "health_min_samples": 3, "health_min_span": 1.0}


def test_collector_keeps_each_consumers_verdict_with_findings_and_since_and_records_the_change(
        nats_server, db_path, uid, run):
    stream = f"{uid}_IDLE"
    store = Store(db_path)

    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid}.>"])
        await make_consumer(api, stream, "idle")
        await publish(nc, f"{uid}.x", 4)
        settings = collector_settings(nats_server.url, db_path, (stream,), interval=0.3, **FAST)
        async with collecting(settings) as collector:
            current = "SELECT verdict, level, findings, since, judged_at FROM verdicts_current WHERE stream = ?"
            got = await eventually(lambda: [r for r in rows(store, current, [stream]) if r[0] == "NO_PULLERS"],
                                   message="NO_PULLERS judged by the collector")
            verdict, level, findings, since, judged_at = got[0]
            assert level == "critical"
            numbers = json.loads(findings)[0]["numbers"]
            assert numbers["pending"] == 4 and numbers["waiting"] == 0
            # Judged again in a later cycle (read from the store: the collector's cycle count moves
            # only once a write returns, and one write may carry several cycles under load).
            later = (await eventually(lambda: [r for r in rows(store, current, [stream]) if r[4] > judged_at],
                                      message="judged again in a later cycle"))[0]
            assert later[0] == "NO_PULLERS" and later[3] == since, "a verdict that holds keeps its since"
            assert collector.judged is not None and "NO_PULLERS" in set(collector.judged.consumers["verdict"])
        changes = rows(store, "SELECT from_verdict, to_verdict FROM verdict_changes WHERE stream = ? ORDER BY ts",
                       [stream])
        assert changes[-1] == ("COLLECTING", "NO_PULLERS")
        assert changes[0][0] is None  # first judged
        fleet = data.fleet(store)
        row = fleet.consumers[fleet.consumers["stream"] == stream].iloc[0]
        assert row["verdict"] == "NO_PULLERS" and row["since"] == since
        assert row["findings"][0]["verdict"] == "NO_PULLERS"
        await nc.close()

    run(scenario())


SHORT = Thresholds(health_window=60, health_min_span=10)


def _cycle(store: Store, at: dt.datetime, pending: int, waiting: int, acked: int = 0,
           acked_at: dt.datetime | None = None, time_to_loss: float | None = None,
           thresholds: Thresholds = SHORT) -> None:
    samples = {
        "ts": [at.isoformat()], "server": ["s"], "cluster": [None], "domain": [None], "account": ["$G"],
        "stream": ["S"], "consumer": ["C"], "created": [None], "num_pending": [pending], "num_ack_pending": [0],
        "num_waiting": [waiting], "num_redelivered": [0], "delivered_consumer_seq": [0],
        "delivered_stream_seq": [acked], "delivered_last_active": [acked_at and acked_at.isoformat()],
        "ack_floor_consumer_seq": [acked], "ack_floor_stream_seq": [acked],
        "ack_floor_last_active": [acked_at and acked_at.isoformat()], "paused": [False], "pause_until": [None],
        "pin_group": [None], "pinned_id": [None], "pinned_ts": [None], "leader": [None],
        "time_to_loss_seconds": [time_to_loss],
    }

    def tx(con) -> None:
        writes.write_samples(con, ["$G"], samples)
        judge_cycle(con, at, thresholds)

    store.write(tx)


def test_fleet_reads_the_kept_verdict_not_a_recomputed_window(db_path):
    """The Fleet shows what the collector judged, even when the samples alone would now say
    something else (the judgement is the collector's, once per cycle)."""
    store = Store(db_path)
    t0 = dt.datetime(2026, 11, 22, 12, tzinfo=dt.UTC)
    for i in range(4):
        _cycle(store, t0 + dt.timedelta(seconds=10 * i), pending=5, waiting=0)
    assert data.fleet(store).consumers.iloc[0]["verdict"] == "NO_PULLERS"
    # The window is gone but the live state (what retention would leave); the verdict is kept.
    store.write(lambda con: con.execute("DELETE FROM samples_recent WHERE cycle < (SELECT cycle FROM current_cycle); "
                                        "DELETE FROM samples_sealed"))
    view = data.fleet(store)
    assert view.consumers.iloc[0]["verdict"] == "NO_PULLERS"
    assert view.consumers.iloc[0]["since"] == t0, "since: when nobody pulled any more, not when it was judged"


def test_recent_changes_and_the_band_follow_each_transition(db_path):
    store = Store(db_path)
    t0 = dt.datetime(2026, 11, 22, 12, tzinfo=dt.UTC)
    for i in range(4):
        _cycle(store, t0 + dt.timedelta(seconds=10 * i), pending=5, waiting=0)
    for i in range(4, 12):
        _cycle(store, t0 + dt.timedelta(seconds=10 * i), pending=0, waiting=1)
    changes = data.recent_changes(store)
    # COLLECTING while nobody had pulled since the first sample for less than --no-pullers-after
    # (30 s), never a false OK; back to OK once pulls came and --clear-after (10 s) had passed.
    assert [(f, t) for f, t in zip(changes["from_verdict"], changes["to_verdict"])] == [
        ("NO_PULLERS", "OK"), ("COLLECTING", "NO_PULLERS"), (None, "COLLECTING")]
    band = data.verdict_band(store, "$G", "S", "C", t0 + dt.timedelta(seconds=35), t0 + dt.timedelta(seconds=200))
    assert list(band["verdict"]) == ["NO_PULLERS", "OK"]
    assert band.iloc[0]["start"] == t0 + dt.timedelta(seconds=35)  # the span in force at the range start
    assert band.iloc[-1]["end"] == t0 + dt.timedelta(seconds=200)


# -- `jetwatch status` and `jetwatch check` ------------------------------------------------------

def _two_consumers(store: Store, now: dt.datetime, idle_pending: int) -> None:
    """Four cycles ending at `now`: consumer C pending with nobody pulling (NO_PULLERS when
    idle_pending > 0), consumer D healthy."""
    for i in range(4):
        at = now - dt.timedelta(seconds=10 * (3 - i))
        base = {"server": "s", "cluster": None, "domain": None, "account": "$G", "stream": "S", "created": None,
                "num_ack_pending": 0, "num_redelivered": 0, "delivered_consumer_seq": 0, "delivered_stream_seq": 0,
                "delivered_last_active": None, "ack_floor_consumer_seq": 0, "ack_floor_stream_seq": 0,
                "ack_floor_last_active": None, "paused": False, "pause_until": None, "pin_group": None,
                "pinned_id": None, "pinned_ts": None, "leader": None, "ts": at.isoformat()}
        batch = [{**base, "consumer": "C", "num_pending": idle_pending, "num_waiting": 0},
                 {**base, "consumer": "D", "num_pending": 0, "num_waiting": 1}]
        samples = {k: [r[k] for r in batch] for k in batch[0]}

        def tx(con, samples=samples, at=at) -> None:
            writes.write_samples(con, ["$G"], samples)
            judge_cycle(con, at, Thresholds(health_window=60, health_min_span=10))

        store.write(tx)


def test_status_prints_the_fleets_verdicts_and_json_for_scripts(db_path, capsys):
    from jetwatch.cli import main

    _two_consumers(Store(db_path), dt.datetime.now(dt.UTC), idle_pending=5)
    assert main(["status", "--db", db_path]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:5] == ["VERDICT", "SINCE", "ACCOUNT", "STREAM", "CONSUMER"]
    assert lines[1].split()[0] == "NO_PULLERS" and lines[2].split()[0] == "OK"
    # Read from its start: every reason begins where the header's REASON does, none padded out.
    at = lines[0].index("REASON")
    assert lines[0].endswith("REASON") and lines[2][at:] == "healthy", lines
    assert lines[1][at:].startswith("5 messages") and lines[1][at - 2:at] == "  ", lines
    assert main(["status", "--db", db_path, "--json", "--consumer", "C*"]) == 0
    got = json.loads(capsys.readouterr().out)
    # The next step beside the reason, as on the pages and in --json (not only for scripts).
    assert got[0]["next_step"] and lines[1].endswith(f" -> {got[0]['next_step']}"), (lines, got[0]["next_step"])
    assert [(r["consumer"], r["verdict"], r["level"]) for r in got] == [("C", "NO_PULLERS", "critical")]
    assert got[0]["findings"][0]["numbers"]["pending"] == 5 and got[0]["since"]
    assert got[0]["eta"]["state"] == "no pullers" and got[0]["eta"]["seconds"] is None
    assert got[0]["oldest_unacked"] == {"age_seconds": None, "kind": None}  # these samples carry no ages


def test_check_exits_with_the_monitoring_plugin_status_of_the_worst_verdict(db_path, tmp_path, capsys):
    from jetwatch.cli import main

    now = dt.datetime.now(dt.UTC)
    _two_consumers(Store(db_path), now, idle_pending=5)
    assert main(["check", "--db", db_path]) == 2
    out = capsys.readouterr().out.strip()
    assert out.startswith("JETWATCH CRITICAL - 2 consumers:") and "S/C NO_PULLERS" in out and "\n" not in out
    assert main(["check", "--db", db_path, "--consumer", "D"]) == 0
    assert capsys.readouterr().out.startswith("JETWATCH OK - 1 consumers: 1 OK")
    assert main(["check", "--db", db_path, "--stale-after", "0s"]) == 3  # nothing recent to judge by
    assert "UNKNOWN" in capsys.readouterr().out
    assert main(["check", "--db", str(tmp_path / "none.duckdb")]) == 3
    assert capsys.readouterr().out.startswith("JETWATCH UNKNOWN - No store")


def test_check_with_a_filter_that_matches_nothing_names_it_and_what_there_is(db_path, capsys):
    """`check --stream TYPO` on a store full of verdicts: UNKNOWN, saying there is no stream TYPO
    and which streams there are, not that the store has no verdicts yet."""
    from jetwatch.cli import main

    _two_consumers(Store(db_path), dt.datetime.now(dt.UTC), idle_pending=5)
    assert main(["check", "--db", db_path, "--stream", "TYPO"]) == 3
    out = capsys.readouterr().out.strip()
    assert out == "JETWATCH UNKNOWN - no stream TYPO: the store has stream S", out
    assert main(["check", "--db", db_path, "--consumer", "X*"]) == 3
    assert capsys.readouterr().out.strip() == "JETWATCH UNKNOWN - no consumer X*: the store has consumers C, D"
    assert main(["check", "--db", db_path, "--consumer", "D", "--verdict", "NO_PULLERS"]) == 0  # there, and fine
    assert capsys.readouterr().out.strip() == "JETWATCH OK - no consumer asked for is NO_PULLERS"


def test_check_warns_on_a_warning_level_verdict(db_path, capsys):
    from jetwatch.cli import main

    store = Store(db_path)
    _two_consumers(store, dt.datetime.now(dt.UTC), idle_pending=0)
    store.write(lambda con: con.execute("UPDATE verdicts_current SET verdict = 'LAGGING', level = 'warning' "
                                        "WHERE consumer = 'C'"))
    assert main(["check", "--db", db_path]) == 1
    assert capsys.readouterr().out.startswith("JETWATCH WARNING")


def test_check_names_the_worst_consumers_first_whatever_their_names(db_path, capsys):
    """Five warnings named before the one critical consumer: the line lists the critical first,
    not five warnings and "(+1 more)"."""
    from jetwatch.cli import main

    store = Store(db_path)
    _two_consumers(store, dt.datetime.now(dt.UTC), idle_pending=0)
    store.write(lambda con: (
        con.execute("INSERT INTO verdicts_current SELECT v.* REPLACE ('A' || i AS consumer, 'LAGGING' AS verdict, "
                    "'warning' AS level) FROM verdicts_current v, range(1, 6) t(i) WHERE v.consumer = 'D'"),
        con.execute("UPDATE verdicts_current SET verdict = 'STALLED', level = 'critical' WHERE consumer = 'D'")))
    assert main(["check", "--db", db_path]) == 2
    listed = capsys.readouterr().out.split(" | ")[1]
    assert listed.split("; ")[0].endswith("/D STALLED"), listed


def test_the_kept_verdict_carries_the_drain_eta_of_the_backlogs_trend(db_path):
    """A backlog draining unevenly (acks moving, pullers waiting) over six cycles: the ETA kept
    with the verdict is the latest backlog over minus the least-squares slope, and its range the
    slope ± 2 standard errors, as numpy's own fit gives them."""
    import numpy as np

    store = Store(db_path)
    t0 = dt.datetime(2026, 11, 22, 12, tzinfo=dt.UTC)
    backlog = [600, 540, 500, 420, 390, 320]
    for i, pending in enumerate(backlog):
        at = t0 + dt.timedelta(seconds=10 * i)
        _cycle(store, at, pending=pending, waiting=2, acked=1000 - pending, acked_at=at)
    t = np.arange(len(backlog)) * 10.0
    fit = np.polyfit(t, backlog, 1)
    slope = fit[0]
    residuals = np.array(backlog) - np.polyval(fit, t)
    se = np.sqrt((residuals ** 2).sum() / (len(t) - 2) / ((t - t.mean()) ** 2).sum())
    row = data.fleet(store).consumers.iloc[0]
    assert row["eta_state"] == "draining"
    assert row["eta_seconds"] == pytest.approx(backlog[-1] / -slope)
    assert row["eta_low_seconds"] == pytest.approx(backlog[-1] / (-slope + 2 * se))
    assert row["eta_high_seconds"] == pytest.approx(backlog[-1] / (-slope - 2 * se))


def test_a_backlog_that_falls_with_nothing_acknowledged_has_no_eta(db_path):
    """Messages removed by the stream's limits (max_age) shrink the backlog as a drain would, but
    nobody worked them off: no rate, no number."""
    store = Store(db_path)
    t0 = dt.datetime(2026, 11, 22, 12, tzinfo=dt.UTC)
    for i, pending in enumerate([600, 540, 500, 420, 390, 320]):
        _cycle(store, t0 + dt.timedelta(seconds=10 * i), pending=pending, waiting=2)
    row = data.fleet(store).consumers.iloc[0]
    assert row["eta_state"] == "not draining" and pd.isna(row["eta_seconds"])


def test_a_worker_that_fetches_and_acknowledges_is_draining_though_no_pull_waits_at_any_sample(db_path):
    """A worker that fetches, works and fetches again has no pull waiting at the moment of most
    samples: the ETA reads its deliveries and acknowledgements (3 a second here), not one snapshot
    of `num_waiting`, and never says "no pullers" of it."""
    store = Store(db_path)
    t0 = dt.datetime(2026, 11, 22, 12, tzinfo=dt.UTC)
    for i in range(6):
        at = t0 + dt.timedelta(seconds=10 * i)
        _cycle(store, at, pending=600 - 30 * i, waiting=0, acked=1000 + 30 * i, acked_at=at)
    row = data.fleet(store).consumers.iloc[0]
    assert row["eta_state"] == "draining", row[["verdict", "reason", "eta_state"]].to_dict()
    assert row["eta_seconds"] == pytest.approx(450 / 3.0)


def test_a_fleet_that_stopped_acknowledging_is_not_draining_while_its_backlog_falls_by_limits(db_path):
    """Workers acknowledged until they crashed; then the stream's limits shrink the backlog as a
    drain would. Acknowledgements inside the window but not lately (beyond the consumer's own ack
    rhythm doubled, and --stalled-after) are no drain: no time is offered."""
    store = Store(db_path)
    t0 = dt.datetime(2026, 11, 22, 12, tzinfo=dt.UTC)
    last_ack = t0 + dt.timedelta(seconds=10)
    for i in range(7):
        at = t0 + dt.timedelta(seconds=10 * i)
        _cycle(store, at, pending=600 - 40 * i, waiting=2, acked=1000 + 10 * min(i, 1),
               acked_at=min(at, last_ack))
    row = data.fleet(store).consumers.iloc[0]
    assert row["eta_state"] == "not draining" and pd.isna(row["eta_seconds"]), row[["verdict", "eta_state"]].to_dict()


LOSS = Thresholds(health_window=120, health_min_span=10)  # --losing-after 60 s, --loss-within 1 h


def _judged_with_losses(store: Store, losses: list[float | None]) -> list[tuple[str, dt.datetime]]:
    """A worker that keeps up (pulls waiting, acknowledgements every cycle) on a stream whose
    limits project the loss `losses[i]` (seconds; None: none in sight) at cycle i, 10 s apart:
    (verdict, since) after each cycle."""
    t0 = dt.datetime(2026, 11, 22, 12, tzinfo=dt.UTC)
    said = []
    for i, loss in enumerate(losses):
        at = t0 + dt.timedelta(seconds=10 * i)
        _cycle(store, at, pending=50, waiting=2, acked=1000 + 10 * i, acked_at=at, time_to_loss=loss,
               thresholds=LOSS)
        row = data.fleet(store).consumers.iloc[0]
        said.append((row["verdict"], row["since"]))
    return said


def test_a_projected_loss_that_comes_and_goes_with_the_workers_pauses_is_not_losing(db_path):
    """Each pause of the workers projects a loss for as long as it lasts (within --loss-within):
    under --losing-after at a stretch, it is no verdict."""
    flicker = [None, None, 1800.0, 1800.0, None, 1700.0, 1700.0, 1700.0, None, 1800.0, None, None]
    said = _judged_with_losses(Store(db_path), flicker)
    assert "LOSING" not in [v for v, _ in said], said


def test_a_projected_loss_that_holds_is_losing_since_it_was_first_projected(db_path):
    t0 = dt.datetime(2026, 11, 22, 12, tzinfo=dt.UTC)
    said = _judged_with_losses(Store(db_path), [None, None] + [1800.0] * 9)
    verdicts = [v for v, _ in said]
    assert verdicts[:8] == ["OK"] * 8 or "LOSING" not in verdicts[:8], said  # held 50 s at cycle 7
    assert verdicts[8:] == ["LOSING"] * 3, said  # held 60 s at cycle 8
    assert said[-1][1] == t0 + dt.timedelta(seconds=20), "since: the first cycle that projected it"


def test_messages_already_removed_unprocessed_are_losing_at_once(db_path):
    said = _judged_with_losses(Store(db_path), [None, None, None, 0.0])
    assert said[-1][0] == "LOSING", said


def test_a_cause_older_than_the_window_is_said_as_at_least_the_window_beside_its_older_since(db_path):
    """Nobody pulled for two minutes under a one-minute window: the reason cannot see past the
    window and says "at least" that long, beside the since kept from the first cycle that saw it
    (not "for 1 min" beside a since two minutes old)."""
    store = Store(db_path)
    t0 = dt.datetime(2026, 11, 22, 12, tzinfo=dt.UTC)
    for i in range(13):
        _cycle(store, t0 + dt.timedelta(seconds=10 * i), pending=5, waiting=0)
    row = data.fleet(store).consumers.iloc[0]
    assert row["verdict"] == "NO_PULLERS" and row["since"] == t0, row[["verdict", "since"]].to_dict()
    assert "no client has pulled for at least 1 min" in row["reason"], row["reason"]


@pytest.mark.parametrize("verdict,since,kept,kept_unhealthy,expected", [
    # healthy now: no run
    (["OK", "COLLECTING", "PAUSED"], [5.0] * 3, ["STALLED"] * 3, [1.0] * 3, [None] * 3),
    # a run begins: the verdict's since
    (["STALLED", "LAGGING"], [5.0, 7.0], ["OK", None], [float("nan")] * 2, [5.0, 7.0]),
    # the run goes on under another verdict: its start stays (or the new since, where that is earlier)
    (["LOSING", "LAGGING", "NO_LEADER"], [9.0, 2.0, 9.0], ["NO_PULLERS", "STALLED", "LAGGING"], [3.0, 4.0, 3.0],
     [3.0, 2.0, 3.0]),
    # after a healthy spell, a new run
    (["STALLED"], [9.0], ["OK"], [3.0], [9.0]),
])
def test_unhealthy_since_is_one_start_per_run_of_unhealthy_verdicts(verdict, since, kept, kept_unhealthy, expected):
    got = easing.unhealthy_since(np.array(verdict, dtype=object), np.array(since), np.array(kept, dtype=object),
                                 np.array(kept_unhealthy))
    assert [None if np.isnan(g) else g for g in got] == expected


def test_a_consumer_moving_between_unhealthy_verdicts_keeps_one_unhealthy_since_on_every_surface(db_path, capsys):
    """NO_PULLERS, then (a pull waits, the stream's limits removed what it owed) LOSING, then healthy,
    then NO_PULLERS again: the first run keeps its start through the change of verdict, on the
    Fleet and in `status --json`; the next run starts afresh."""
    from jetwatch import cli

    store, t0 = Store(db_path), dt.datetime(2026, 11, 22, 12, tzinfo=dt.UTC)
    phases = [(5, 0, None)] * 16 + [(5, 1, 0.0)] * 10 + [(0, 1, None)] * 12 + [(5, 0, None)] * 16
    seen: list[tuple[str, object, object]] = []
    for i, (pending, waiting, loss) in enumerate(phases):
        _cycle(store, t0 + dt.timedelta(seconds=2 * i), pending, waiting, time_to_loss=loss)
        row = data.fleet(store).consumers.iloc[0]
        seen.append((row["verdict"], row["since"], row["unhealthy_since"]))
    verdicts = [v for v, _, _ in seen]
    first = next(i for i, v in enumerate(verdicts) if v == "NO_PULLERS")
    losing = next(i for i, v in enumerate(verdicts) if v == "LOSING")
    healthy = next(i for i, v in enumerate(verdicts) if i > losing and v == "OK")
    again = next(i for i, v in enumerate(verdicts) if i > healthy and v == "NO_PULLERS")
    run_start = seen[first][1]
    assert all(u == run_start for _, _, u in seen[first:healthy]), seen[first:healthy]
    assert seen[losing][1] > run_start  # LOSING's own since is later: the run's start is not
    assert pd.isna(seen[healthy][2])
    assert seen[again][2] == seen[again][1] > seen[healthy][1]
    # Said the same by status, and beside the verdict's since on the Fleet's cell.
    capsys.readouterr()
    _cycle(store, t0 + dt.timedelta(seconds=2 * len(phases)), 5, 0)
    cli.main(["status", "--json", "--db", db_path])
    [said] = json.loads(capsys.readouterr().out)
    assert said["unhealthy_since"] is not None and said["unhealthy_since"] == said["since"]
