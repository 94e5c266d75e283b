"""The health rules as a detector: each incident named right and in time from its start, never
eased while it lasts, and healthy look-alikes that raise nothing; then the rules' edges, table-driven.

Stories run on tests/consumer_model.py at the collector's default interval (5 s) and judged as the
pipeline judges, over the trailing health window at every sample (the collector's own path, with
its easing, is tests/test_live_verdicts.py and the real-server library tests/test_incidents.py)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

from jetwatch.health.advice import Context, next_step
from jetwatch.health.rules import Thresholds, evaluate, rhythm_after, verdict_columns
from jetwatch.health.window import WindowState, feature_columns
from tests.consumer_model import STEP, T0, Step, run

TH = Thresholds()  # the defaults: a 5-minute window, 30 s for stalls and missing pullers, 60 s to lag
START = 60  # incidents begin after this many healthy steps (5 minutes: a full window of rhythm)
QUIET = ("OK", "PAUSED", "COLLECTING")


def limits(**kw: Any) -> pd.DataFrame:
    row = {"account": "A", "stream": "S", "consumer": "C", "is_pull": True, "filtered": False,
           "max_ack_pending": 1000, "max_waiting": 512, "priority_policy": None, "ack_wait_ns": int(30e9),
           "priority_timeout_ns": None, **kw}
    return pd.DataFrame([row])


def timeline(samples: pd.DataFrame, lim: pd.DataFrame, rhythm_after: float | None = None) -> list[dict[str, Any]]:
    """The verdict judged after every sample over the health window ending there, as the
    collector judges it: the sample added to its in-memory window, the window's features judged
    (`rhythm_after`: the collector's shortcut, see health/onsets.py)."""
    window = WindowState(TH.health_window)
    out = []
    for k in range(len(samples)):
        window.add({c: [v] for c, v in samples.iloc[k].to_dict().items()})
        since = samples["ts"].iloc[k].timestamp() - TH.health_window
        features = feature_columns(window, np.arange(len(window.keys)), since, rhythm_after=rhythm_after)
        for c in lim.columns:
            if c not in ("account", "stream", "consumer"):
                features[c] = lim[c].to_numpy()
        judged = verdict_columns(features, TH)
        out.append({c: judged[c][0] for c in ("verdict", "reason", "findings", "since")})
    return out


def healthy(i: int) -> Step:
    return Step(publish=2, deliver=10, ack="all", waiting=1)


def after(start: int, before: Callable[[int], Step], then: Callable[[int], Step]) -> Callable[[int], Step]:
    return lambda i: before(i) if i <= start else then(i)


PINNED = {"priority_policy": "pinned_client", "priority_timeout_ns": int(120e9)}

# (name, behaviour, steps, limits, ack_wait, verdict, deadline in seconds from the incident's start,
# the incident's start in seconds after START's)
INCIDENTS = [
    ("stuck pinned client: keeps pulling, stops acknowledging, a standby waits",
     after(START, lambda i: Step(publish=2, deliver=10, ack="all", waiting=2, pin="p1"),
           lambda i: Step(publish=2, deliver=10, ack=0, waiting=2, pin="p1")), START + 30, PINNED, 30.0,
     "STALLED", 30, 0),
    ("stopped pin holder: pulls nothing, keeps its pin, a standby waits, work arrives",
     after(START, lambda i: Step(publish=2, deliver=10, ack="all", waiting=2, pin="p1"),
           lambda i: Step(publish=2, deliver=0, ack=0, waiting=1, pin="p1")), START + 30, PINNED, 30.0,
     "PIN_IDLE", 30, 0),
    ("every puller stops, work arrives",
     after(START, healthy, lambda i: Step(publish=2)), START + 30, {}, 30.0, "NO_PULLERS", 30, 0),
    ("falls behind steadily: 10/s arrive, 5/s acknowledged",
     after(START, lambda i: Step(publish=50, deliver=50, ack="all", waiting=1),
           lambda i: Step(publish=50, deliver=25, ack="all", waiting=1)), START + 40, {}, 30.0, "LAGGING", 60, 0),
    # Its first burst is still worked off: it falls behind from the second, 30 s later; named
    # within two of its periods from there.
    ("falls behind as a sawtooth: bursts of 300 every 30 s, 8/s worked off",
     after(START, lambda i: Step(publish=240 if i % 6 == 0 else 0, deliver=40, ack="all", waiting=1),
           lambda i: Step(publish=300 if i % 6 == 0 else 0, deliver=40, ack="all", waiting=1)),
     START + 40, {}, 30.0, "LAGGING", 30 + 60, 25),
    ("a worker holds 10 messages and pulls no more: STALLED when ack_wait passes",
     after(START, healthy, lambda i: Step(publish=2, deliver=10 if i == START + 1 else 0, ack=0)),
     START + 30, {}, 30.0, "STALLED", 30 + 2 * STEP, 0),
    # A filtered consumer (the sequences cannot show the redelivered share) whose jobs outlast a 2 s
    # ack_wait: num_redelivered, a level, holds flat above zero for all ten minutes.
    ("a steady redelivery on a filtered consumer: jobs longer than ack_wait, every message acknowledged late",
     after(START, lambda i: Step(publish=1, deliver=1, ack="all", waiting=1),
           lambda i: Step(publish=1, deliver=3, ack=0 if i <= START + 2 else 1, waiting=1)), START + 120,
     {"filtered": True}, 2.0,
     "REDELIVERING", 30, 0),
    # The most common way a fleet dies: workers that kept 28 in flight, acknowledging 10 every 5 s,
    # killed holding them. No pull waits, nothing is acknowledged or delivered, the producer stopped
    # too: named by the consumer's own ack rhythm, long before the minute of ack_wait passes.
    ("workers killed holding 28 messages: nothing acknowledged, delivered or pulled after",
     lambda i: (Step(publish=28, deliver=28, waiting=1) if i == 1 else
                Step(publish=10, deliver=10, ack=10, waiting=1) if i <= START else Step()), START + 20, {}, 60.0,
     "STALLED", 30, 0),
    ("a worker that fails every message: redelivered, never acknowledged",
     after(START, healthy, lambda i: Step(publish=2, deliver=10, ack=0, waiting=1)), START + 40, {}, 10.0,
     "STALLED", 30, 0),
]


@pytest.mark.parametrize("name,behaviour,steps,lim,ack_wait,verdict,deadline,began", INCIDENTS,
                         ids=[i[0] for i in INCIDENTS])
def test_each_incident_is_named_in_time_and_never_eased_while_it_lasts(name, behaviour, steps, lim, ack_wait,
                                                                        verdict, deadline, began):
    samples = run(behaviour, steps, ack_wait=ack_wait)
    got = timeline(samples, limits(**{**lim, "ack_wait_ns": int(ack_wait * 1e9)}))
    before, during = got[:START], got[START:]
    assert {r["verdict"] for r in before} <= set(QUIET), "healthy before the incident"
    named = next((k for k, r in enumerate(during) if r["verdict"] == verdict), None)
    assert named is not None, [r["verdict"] for r in during]
    assert (named + 1) * STEP <= deadline + STEP, f"named after {(named + 1) * STEP:.0f} s"
    assert [r["verdict"] for r in during[named:]] == [verdict] * (len(during) - named), "never eased while it lasts"
    onset = T0 + dt.timedelta(seconds=START * STEP + began)
    since = pd.Timestamp(during[named]["since"], unit="s", tz="UTC")
    assert abs((since - onset).total_seconds()) <= 2 * STEP, f"since {since} is the incident's start {onset}"


LOOK_ALIKES = [
    ("bursty arrivals drained in a sawtooth", lambda i: Step(publish=200 if i % 12 == 0 else 0, deliver=40,
                                                             ack="all", waiting=1), {}, 30.0),
    ("a slow worker that keeps up: 8 s a message, one every 10 s",
     lambda i: Step(publish=i % 2, deliver=i % 2, ack=1 - i % 2), {}, 30.0),
    ("jobs of 2 minutes, one in flight, the next pulled when done (ack_wait 5 min)",
     lambda i: Step(publish=1 if i % 25 == 1 else 0, deliver=1 if i % 25 == 1 else 0, ack=1 if i % 25 == 0 else 0),
     {}, 300.0),
    ("a 5-minute job kept alive with +WPI under a 30 s ack_wait",
     lambda i: Step(publish=1 if i == 1 else 0, deliver=1 if i == 1 else 0, progress=i % 3 == 0,
                    ack=1 if i == 70 else 0), {}, 30.0),
    # ack_wait passes between acknowledgements that keep coming. The model takes each ack before
    # the next pull, so nothing is redelivered: OK. The real server takes the pull first and
    # redelivers (tests/incident_library.py "longjobs": REDELIVERING); a stall in neither.
    ("a worker pulling one at a time, its jobs of 15 s longer than an ack_wait of 10 s",
     lambda i: Step(publish=1 if i % 4 == 1 else 0, deliver=1 if i % 4 == 1 else 0, ack=1 if i % 4 == 0 else 0),
     {}, 10.0),
    ("a pinned holder pulling one message at a time with long jobs, a standby waiting",
     lambda i: Step(publish=1 if i % 30 == 1 else 0, deliver=1 if i % 30 == 1 else 0, ack=1 if i % 30 == 0 else 0,
                    waiting=1, pin="p1"), PINNED, 300.0),
    ("workers that acknowledge in bulk every 60 s", lambda i: Step(publish=2, deliver=10, ack="all" if i % 12 == 0 else 0,
                                                                   waiting=1), {}, 120.0),
    ("a pin holder polling every 50 s within its priority_timeout, a standby waiting",
     lambda i: Step(publish=1, deliver=100 if i % 10 == 0 else 0, ack="all" if i % 10 == 0 else 0, waiting=1,
                    pin="p1"), PINNED, 30.0),
    ("an ordered worker always at max_ack_pending = 1", lambda i: Step(publish=1, deliver=1, ack=1, waiting=1),
     {"max_ack_pending": 1}, 30.0),
    ("a cron-style consumer drained every 2 minutes", lambda i: Step(publish=1, deliver=100 if i % 24 == 0 else 0,
                                                                     ack="all" if i % 24 == 0 else 0), {}, 30.0),
    ("a pinned client with an idle standby", lambda i: Step(publish=1, deliver=1, ack="all", waiting=1, pin="p1"),
     PINNED, 30.0),
    ("an idle stream", lambda i: Step(waiting=1), {}, 30.0),
    ("a consumer mid-drain: paused, in-flight work acknowledged",
     lambda i: Step(publish=2 if i < 40 else 0, deliver=10 if i < 40 else 0, ack="all" if i < 40 else 1,
                    paused=i >= 40, waiting=1), {}, 300.0),
]


@pytest.mark.parametrize("name,behaviour,lim,ack_wait", LOOK_ALIKES, ids=[x[0] for x in LOOK_ALIKES])
def test_healthy_look_alikes_raise_nothing(name, behaviour, lim, ack_wait):
    samples = run(behaviour, 120, ack_wait=ack_wait)
    got = timeline(samples, limits(**{**lim, "ack_wait_ns": int(ack_wait * 1e9)}))
    alarms = [(k * STEP, r["verdict"], r["reason"]) for k, r in enumerate(got) if r["verdict"] not in QUIET]
    assert alarms == []


SCENARIOS = [(name, behaviour, steps + 12, lim, ack_wait) for name, behaviour, steps, lim, ack_wait, *_ in INCIDENTS] + \
    [(name, behaviour, 120, lim, ack_wait) for name, behaviour, lim, ack_wait in LOOK_ALIKES]


@pytest.mark.parametrize("name,behaviour,steps,lim,ack_wait", SCENARIOS, ids=[x[0] for x in SCENARIOS])
def test_rhythms_computed_only_where_a_condition_held_long_enough_judge_the_same(name, behaviour, steps, lim,
                                                                                 ack_wait):
    """The collector computes the rhythms only for consumers with a condition held for the
    shortest rule duration (or their ack_wait, when shorter); every verdict, reason and since must
    be what the full features give."""
    samples = run(behaviour, steps, ack_wait=ack_wait)
    lim = limits(**{**lim, "ack_wait_ns": int(ack_wait * 1e9)})
    full = timeline(samples, lim)
    lazy = timeline(samples, lim, rhythm_after=rhythm_after(TH, None, lim["ack_wait_ns"].to_numpy()))
    def said(rows: list[dict[str, Any]]) -> list[tuple[str, str, float | None]]:
        return [(r["verdict"], r["reason"], None if pd.isna(r["since"]) else float(r["since"])) for r in rows]

    assert said(lazy) == said(full)


def test_the_next_step_fits_the_cause():
    stuck = run(after(START, lambda i: Step(publish=2, deliver=10, ack="all", waiting=2, pin="p1"),
                      lambda i: Step(publish=2, deliver=10, ack=0, waiting=2, pin="p1")), START + 10)
    stuck_row = evaluate(stuck.tail(60), limits(**PINNED), TH).iloc[0]
    step = next_step("STALLED", stuck_row["findings"][0]["numbers"],
                     Context(pinned_id="p1", priority_policy="pinned_client", group="jobs"))
    assert "unpin" in step and "add workers" not in step

    idle = run(after(START, lambda i: Step(publish=2, deliver=10, ack="all", waiting=2, pin="p1"),
                     lambda i: Step(publish=2, deliver=0, ack=0, waiting=1, pin="p1")), START + 10)
    idle_row = evaluate(idle.tail(60), limits(**PINNED), TH).iloc[0]
    assert idle_row["verdict"] == "PIN_IDLE"
    numbers = idle_row["findings"][0]["numbers"]
    moves_by = dt.datetime.fromtimestamp(numbers["pin_moves_by"], dt.UTC)
    last_pull = T0 + dt.timedelta(seconds=START * STEP - STEP / 2)
    assert moves_by == last_pull + dt.timedelta(seconds=120), "the last delivery plus priority_timeout"
    assert "priority_timeout moves the pin by itself" in idle_row["reason"]
    assert next_step("PIN_IDLE", numbers, Context(pinned_id="p1", priority_policy="pinned_client",
                                                  group="jobs")).startswith("unpin group jobs")

    gone = run(after(START, healthy, lambda i: Step(publish=2)), START + 10)
    gone_row = evaluate(gone.tail(60), limits(), TH).iloc[0]
    assert gone_row["verdict"] == "NO_PULLERS"
    assert "start the consumer's workers" in next_step("NO_PULLERS", gone_row["findings"][0]["numbers"], Context())


def test_workers_killed_holding_work_are_said_to_have_stopped_and_the_step_is_to_start_them():
    """Not "more keeps being handed out", not "arrive faster": the holders went silent, and the
    next step is to start the workers, with when the server hands the held messages out again."""
    crashed = run(lambda i: (Step(publish=28, deliver=28, waiting=1) if i == 1 else
                             Step(publish=10, deliver=10, ack=10, waiting=1) if i <= START else Step()),
                  START + 6, ack_wait=60.0)
    row = evaluate(crashed.tail(60), limits(ack_wait_ns=int(60e9)), TH).iloc[0]
    assert row["verdict"] == "STALLED" and [f["verdict"] for f in row["findings"]] == ["STALLED"], row["findings"]
    # The producer goes on: the backlog grows behind the held work, which is still the stall, never
    # LAGGING's "messages arrive faster than they are acknowledged" beside it.
    later = evaluate(run(lambda i: (Step(publish=28, deliver=28, waiting=1) if i == 1 else
                                    Step(publish=10, deliver=10, ack=10, waiting=1) if i <= START else
                                    Step(publish=2)), START + 40, ack_wait=60.0).tail(60),
                     limits(ack_wait_ns=int(60e9)), TH).iloc[0]
    assert [f["verdict"] for f in later["findings"]] == ["STALLED"], later["findings"]
    assert "went silent" in row["reason"] and "handed out (" not in row["reason"], row["reason"]
    numbers = row["findings"][0]["numbers"]
    step = next_step("STALLED", numbers, Context())
    last_ack = T0 + dt.timedelta(seconds=START * STEP - STEP / 2)
    assert step.startswith("the clients holding 28 messages stopped"), step
    assert f"at {last_ack + dt.timedelta(seconds=60):%H:%M:%S} UTC" in step, step


def test_a_pin_holder_that_took_work_and_stopped_pulling_is_said_so_and_the_step_is_the_unpin():
    """The pinned client pulls four messages and then nothing, a standby's pull waiting: nothing is
    handed out after its last pull, so the words say it stopped (not that more keeps being handed
    out), name the waiting pull, and the next step is the unpin that lets the standby take over."""
    stopped = run(after(START, lambda i: Step(publish=2, deliver=10, ack="all", waiting=2, pin="p1"),
                        lambda i: Step(publish=2, deliver=4 if i == START + 1 else 0, ack=0, waiting=1, pin="p1")),
                  START + 5)
    row = evaluate(stopped.tail(60), limits(**PINNED), TH).iloc[0]
    assert row["verdict"] == "STALLED", row["reason"]
    assert "more keeps being handed out" not in row["reason"], row["reason"]
    assert "stopped pulling" in row["reason"] and "1 other pull request waits for work" in row["reason"], row["reason"]
    step = next_step("STALLED", row["findings"][0]["numbers"],
                     Context(pinned_id="p1", priority_policy="pinned_client", group="jobs"))
    assert step.startswith("the pinned client stopped pulling") and "unpin group jobs" in step, step
    assert "waiting client takes the pin" in step, step


def _recreated(before: pd.DataFrame, after_: pd.DataFrame) -> pd.DataFrame:
    """A consumer's samples (`before`), then it is deleted and recreated under its name: `after_`,
    a model started afresh (sequences from zero), placed right behind, with a new `created`."""
    shift = before["ts"].iloc[-1] - T0
    moved = after_.copy()
    moved["ts"] = moved["ts"] + shift
    for c in ("delivered_last_active", "ack_floor_last_active"):
        moved[c] = [None if v is None else (pd.Timestamp(v) + shift).isoformat() for v in moved[c]]
    moved["created"] = before["ts"].iloc[-1]
    return pd.concat([before, moved], ignore_index=True)


@pytest.mark.parametrize("name,before,every", [
    ("workers pulling all the time", healthy, None),
    ("a lone client polling every 40 s", lambda i: Step(publish=1, deliver=100 if i % 8 == 0 else 0,
                                                        ack="all" if i % 8 == 0 else 0), 40.0),
])
def test_a_consumer_recreated_while_its_clients_are_gone_is_named_at_their_rhythm(name, before, every):
    """Deleted and recreated under its name while nobody pulls it any more, work waiting: the new
    consumer's numbers start over, but its clients are the old one's, whose pulls jetwatch saw in
    the window. NO_PULLERS after no_pullers_after (20 s), or their pull rhythm doubled; before, a
    recreated consumer counted as never seen pulled and waited for half the window (150 s)."""
    got = timeline(_recreated(run(before, START), run(lambda i: Step(publish=2), 40)), limits())
    alarms = [(k + 1 - START, r["verdict"]) for k, r in enumerate(got) if r["verdict"] not in QUIET]
    assert alarms and {v for _, v in alarms} == {"NO_PULLERS"} and alarms[0][0] > 0, alarms
    named_after = alarms[0][0] * STEP  # from the recreated consumer's first sample
    rhythm = 20.0 if every is None else 2 * every
    assert rhythm <= named_after <= rhythm + 2 * STEP, (named_after, alarms)
    assert [v for _, v in alarms] == ["NO_PULLERS"] * len(alarms) and alarms[-1][0] == 40  # never eased


def test_work_held_with_nobody_pulling_is_not_no_pullers():
    """Cause before symptom: a client holds the work; before ack_wait it may be a long job."""
    held = run(after(START, healthy, lambda i: Step(publish=2, deliver=10 if i == START + 1 else 0)),
               START + 3, ack_wait=300.0)
    row = evaluate(held.tail(60), limits(ack_wait_ns=int(300e9)), TH).iloc[0]
    assert row["verdict"] == "OK" and "NO_PULLERS" not in [f["verdict"] for f in row["findings"]]


# -- Edges, table-driven -------------------------------------------------------------------------

def steady(**kw: Any) -> pd.DataFrame:
    """A minute of a healthy consumer, then `kw` changed from the last sample on."""
    samples = run(healthy, 14)
    for column, value in kw.items():
        samples.loc[samples.index[-1], column] = value
    return samples


EDGES = [
    ("healthy", run(healthy, 14), limits(), None, ["OK"]),
    ("too few samples", run(healthy, 2), limits(), None, ["COLLECTING"]),
    ("too short a span", run(healthy, 14).iloc[:4], limits(), None, ["COLLECTING"]),
    ("idle since the first sample, not long enough yet", run(lambda i: Step(publish=1), 14), limits(), None,
     ["COLLECTING"]),
    ("saturated ack pending: in flight at max_ack_pending, acks coming",
     run(lambda i: Step(publish=1300 if i == 1 else 300, deliver=1000 if i == 1 else 300, ack=0 if i == 1 else 300,
                        waiting=1), 14),
     limits(), None, ["SATURATED"]),
    ("max_ack_pending unlimited",
     run(lambda i: Step(publish=1300 if i == 1 else 300, deliver=1000 if i == 1 else 300, ack=0 if i == 1 else 300,
                        waiting=1), 14),
     limits(max_ack_pending=-1), None, ["OK"]),
    ("saturated waiting", run(lambda i: Step(publish=1, deliver=1, ack="all", waiting=500), 14), limits(), None,
     ["SATURATED"]),
    ("pulls at max_waiting, one sample between a pull's end and its re-pull one fewer",
     run(lambda i: Step(publish=1, deliver=1, ack="all", waiting=2 if i == 13 else 3), 14), limits(max_waiting=3),
     None, ["SATURATED"]),
    ("pulls below max_waiting now", run(lambda i: Step(publish=1, deliver=1, ack="all", waiting=2 if i == 14 else 3),
                                         14), limits(max_waiting=3), None, ["OK"]),
    ("unpinned with work pending", run(lambda i: Step(publish=1, deliver=0 if i > 4 else 1, ack="all", waiting=3,
                                                      pin=None if i > 4 else "p"), 14),
     limits(priority_policy="pinned_client"), None, ["UNPINNED", "LAGGING"]),
    ("no pin but nothing pending", run(lambda i: Step(waiting=1), 14), limits(priority_policy="pinned_client"),
     None, ["OK"]),
    ("flapping from pin events", run(healthy, 14), limits(priority_policy="pinned_client"), {"pin_switches": 9},
     ["FLAPPING"]),
    ("flapping from samples", run(lambda i: Step(publish=1, deliver=1, ack="all", waiting=1, pin=f"p{i % 6}"), 14),
     limits(priority_policy="pinned_client"), None, ["FLAPPING"]),
    ("an old unacked message lags whatever the trend", steady(oldest_unacked_age_seconds=700.0, num_pending=50),
     limits(), None, ["LAGGING"]),
    ("at max_ack_pending = 1, one message waiting: strict order by design, not saturated",
     run(lambda i: Step(publish=2 if i == 1 else 1, deliver=1, ack=0 if i == 1 else 1, waiting=1), 14),
     limits(max_ack_pending=1), None, ["OK"]),
    ("in flight at max_ack_pending, nothing waiting behind it: the limit holds nothing back",
     run(lambda i: Step(publish=1000 if i == 1 else 300, deliver=1000 if i == 1 else 300, ack=0 if i == 1 else 300,
                        waiting=1), 14),
     limits(), None, ["OK"]),
    ("every message naked until max_deliver drops it: deliveries go on, nothing acknowledged, none left in flight",
     run(lambda i: healthy(i) if i <= 8 else Step(publish=2, deliver=2, drop="all", waiting=1), 14),
     limits(), {"nak_count": 12, "max_deliveries_count": 6}, ["STALLED", "REDELIVERING"]),
    ("a poison message dropped at max_deliver while the rest are acknowledged", run(healthy, 14), limits(),
     {"nak_count": 3, "max_deliveries_count": 1}, ["REDELIVERING"]),
    ("paused explains no deliveries", run(lambda i: Step(publish=2, paused=True), 14), limits(), None, ["PAUSED"]),
    ("push consumer: no pull rules", run(lambda i: Step(publish=2), 20), limits(is_pull=False, max_waiting=None),
     None, ["OK"]),
]


@pytest.mark.parametrize("samples,lim,counts,expected", [c[1:] for c in EDGES], ids=[c[0] for c in EDGES])
def test_health_rules(samples, lim, counts, expected):
    counts_df = pd.DataFrame([{"account": "A", "stream": "S", "consumer": "C", **counts}]) if counts else None
    out = evaluate(samples, lim, TH, counts_df)
    assert len(out) == 1
    row = out.iloc[0]
    assert [f["verdict"] for f in row["findings"]] == expected
    assert row["verdict"] == expected[0]
    assert row["reason"]


def test_consumers_are_judged_independently():
    a = run(after(START, healthy, lambda i: Step(publish=2)), START + 10, consumer="C")
    b = run(healthy, START + 10, consumer="D")
    out = evaluate(pd.concat([a, b]).groupby("consumer").tail(60),
                   pd.concat([limits(), limits(consumer="D")]), TH).set_index("consumer")
    assert out.loc["C", "verdict"] == "NO_PULLERS"
    assert out.loc["D", "verdict"] == "OK"


def test_event_counts_for_other_consumers_leave_this_one_alone():
    counts = pd.DataFrame([{"account": "A", "stream": "S", "consumer": "other", "pin_switches": 9, "nak_count": 3}])
    assert evaluate(run(healthy, 14), limits(), TH, counts).iloc[0]["verdict"] == "OK"


def test_empty_window_gives_no_verdicts():
    assert evaluate(run(healthy, 14).iloc[0:0], limits(), TH).empty


def acked_between_redeliveries(samples: int, every: float, acked_every: float) -> pd.DataFrame:
    """Two workers whose jobs outlast an ack_wait of 1 s: two messages always in flight, one of
    them redelivered once its ack_wait passes, the ack floor moving every `acked_every` seconds
    (the server's ack_floor.last_active with it), read every `every` seconds."""
    rows = []
    for i in range(1, samples + 1):
        s = every * i
        t = T0 + dt.timedelta(seconds=s)
        last_ack = (s // acked_every) * acked_every
        rows.append({"account": "A", "stream": "S", "consumer": "C", "ts": t, "created": T0 - dt.timedelta(days=1),
                     "num_pending": 5, "num_ack_pending": 2, "num_waiting": 0,
                     "num_redelivered": 1 if s - last_ack >= 1.0 else 0, "delivered_consumer_seq": 4 * i,
                     "delivered_stream_seq": int(s // acked_every) + 2, "ack_floor_stream_seq": int(s // acked_every),
                     "delivered_last_active": (t - dt.timedelta(seconds=0.2)).isoformat(),
                     "ack_floor_last_active": (T0 + dt.timedelta(seconds=last_ack)).isoformat(), "paused": False,
                     "pinned_id": None, "oldest_unacked_age_seconds": 3.0})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("every,acked_every", [(0.5, 1.5), (0.5, 2.5), (1.0, 2.5)])
def test_an_ack_wait_shorter_than_the_work_is_redelivering_never_stalled_while_acks_keep_coming(every, acked_every):
    """Redelivered between acknowledgements that keep coming: the server's ack_wait passes between
    two acks, which is the consumer's own rhythm, not a stall (the config finding says why)."""
    samples = acked_between_redeliveries(int(40 / every), every, acked_every)
    said = [evaluate(samples.iloc[:k], limits(ack_wait_ns=int(1e9)), TH, None).iloc[0]["verdict"]
            for k in range(int(25 / every), len(samples) + 1)]
    assert set(said) == {"REDELIVERING"}, said


@pytest.mark.parametrize("count,noun,verb,said", [
    (1, "message", "", "1 message"), (10, "message", "", "10 messages"), (1, "message", "wait", "1 message waits"),
    (760, "message", "wait", "760 messages wait"), (0.6, "message", "", "1 message"),
    (1, "other pull request", "wait", "1 other pull request waits"), (0, "other pull request", "wait",
                                                                      "0 other pull requests wait")])
def test_a_count_is_said_in_words_that_agree(count, noun, verb, said):
    from jetwatch.health.rules import _count

    assert _count(count, noun, verb) == said
