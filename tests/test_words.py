"""The words the pages use for durations, instants, pin ids and empty cells: table-driven, pure."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest

from jetwatch.dashboard import tables
from jetwatch.dashboard.text import cell, duration, pin_tail, since, utc

NOW = dt.datetime(2026, 11, 23, 7, 30, 0, tzinfo=dt.UTC)


@pytest.mark.parametrize("seconds, words", [
    (0, "0 s"), (42.4, "42 s"), (59.6, "1 min"), (60, "1 min"), (252, "4 min 12 s"), (3600, "1 h"),
    (3725, "1 h 2 min"), (86400, "1 d"), (2 * 86400 + 4 * 3600 + 59, "2 d 4 h"), (-3, "0 s"),
    (None, ""), (float("nan"), ""), (0.5, "0.5 s"), (float("inf"), "∞"),
])
def test_a_duration_reads_as_people_say_it(seconds, words):
    assert duration(seconds) == words


def test_every_page_and_command_words_a_duration_the_same_way():
    """One formatting for durations, ages and ETAs: the Fleet's ETA, the sidebar's "last cycle …
    ago" and `jetwatch status`'s ages say "4 min 12 s" as the Consumer page does, never "4m" or "252s"."""
    from jetwatch import status
    from jetwatch.dashboard import ui
    from jetwatch.health import eta

    assert eta.words("draining", 252.0, 180.0, None) == "~4 min 12 s (3 min–∞)"
    assert ui.ago(NOW - dt.timedelta(seconds=252), NOW) == "4 min 12 s ago"
    assert ui.ago(NOW - dt.timedelta(hours=3, minutes=5), NOW) == "3 h 5 min ago"
    assert status._age(NOW - dt.timedelta(seconds=252), NOW) == "4min12s"  # a table split on whitespace


@pytest.mark.parametrize("pin_id, shown", [
    ("x3jkSMKG5bo5V7Sg9n1AbC", "…9n1AbC"),  # the tail: the part consecutive pins differ in
    ("short", "short"), ("1234567", "1234567"), (None, ""), (float("nan"), ""), ("", ""),
])
def test_a_pin_id_shows_its_distinguishing_tail(pin_id, shown):
    assert pin_tail(pin_id) == shown


def test_pins_of_one_server_are_told_apart_by_their_tails_not_their_prefixes():
    # NUIDs of one server: a shared 12-character prefix and a sequence that moves in the last places.
    ids = ["x3jkSMKG5bo5V7Sg9n1AbC", "x3jkSMKG5bo5V7Sg9n1AeQ", "x3jkSMKG5bo5V7Sg9n1Ah2"]
    assert len({i[:10] for i in ids}) == 1
    assert len({pin_tail(i) for i in ids}) == 3


@pytest.mark.parametrize("ts, words", [
    (NOW - dt.timedelta(minutes=12), "2026-11-23 07:18:00 UTC (12 min ago)"),
    (pd.Timestamp("2026-11-22 05:30:00"), "2026-11-22 05:30:00 UTC (1 d 2 h ago)"),  # naive: UTC
    (None, ""), (pd.NaT, ""),
])
def test_since_is_absolute_utc_and_an_age(ts, words):
    assert since(ts, NOW) == words


@pytest.mark.parametrize("ts, words", [
    (NOW - dt.timedelta(seconds=295), "07:25:05 (4 min 55 s ago)"),
    (NOW - dt.timedelta(hours=26), "11-22 05:30 (1 d 2 h ago)"),
    (None, ""),
])
def test_a_since_cell_is_short_and_still_absolute(ts, words):
    assert tables.since_cell(ts, NOW) == words


def test_the_fleets_since_says_where_an_unhealthy_run_began_under_another_verdict():
    ago = [NOW - dt.timedelta(minutes=m) for m in (5, 24)]
    frame = pd.DataFrame({"since": [ago[0], ago[0], ago[0], None], "unhealthy_since": [ago[1], ago[0], None, None]})
    assert tables._since_words(frame, NOW) == [
        "07:25:00 (5 min ago); unhealthy since 07:06:00 (24 min ago)",  # the run began under another verdict
        "07:25:00 (5 min ago)",  # the run began with this verdict
        "07:25:00 (5 min ago)",  # healthy: nothing more
        "",
    ]


def test_utc_converts_from_any_zone():
    assert utc(pd.Timestamp("2026-11-23 09:00:00+02:00")) == "2026-11-23 07:00:00 UTC"


@pytest.mark.parametrize("value, shown", [(None, ""), (float("nan"), ""), (pd.NaT, ""), ("x", "x"), (0, 0)])
def test_an_empty_cell_is_empty_not_the_word_none(value, shown):
    assert cell(value) == shown


def test_every_fleet_header_is_words_with_no_code_names():
    for column in tables.FLEET:
        assert "_" not in column.header and column.header[0].isupper(), column.header


def test_the_consumer_link_names_its_consumer_for_the_grid_and_round_trips_odd_names():
    import re
    from urllib.parse import unquote

    url = tables.consumer_link("$G", "H<b&x_weird-name_1", "<i c-1")
    assert tables.link_target(url) == {"account": "$G", "stream": "H<b&x_weird-name_1", "consumer": "<i c-1"}
    shown = unquote(re.search(tables.CONSUMER_IN_LINK, url).group(1))  # what the grid shows as the link text
    assert shown == "<i c-1"


def test_a_consumer_link_shows_bidi_controls_in_the_name_visibly_and_still_opens_that_consumer():
    """U+202E in a consumer's name would turn the Fleet's link text around ("sredro"): the grid
    shows the name with the control as a visible mark, and the link still names the real consumer."""
    import re
    from urllib.parse import unquote

    name = "\u202eorders"
    url = tables.consumer_link("$G", "S", name)
    assert tables.link_target(url)["consumer"] == name
    shown = unquote(re.search(tables.CONSUMER_IN_LINK, url).group(1))
    assert shown == "⟨U+202E⟩orders"


# -- Next steps (health/advice.py) ------------------------------------------------------------

from jetwatch.health import advice  # noqa: E402
from jetwatch.health.verdicts import VERDICT_NAMES  # noqa: E402

GROUPED = advice.Context(pinned_id="x3jkSMKG5bo5V7Sg9n1AbC", priority_policy="pinned_client", group="jobs")


def test_every_declared_verdict_has_a_next_step_and_nothing_else_does():
    assert set(advice.NEXT_STEP) == set(VERDICT_NAMES)
    for verdict in VERDICT_NAMES:
        assert advice.next_step(verdict, {}, advice.Context())


@pytest.mark.parametrize("unpins, says", [
    ({"timeout": 12, "admin": 6}, "12 timeouts and 6 admin unpins: the pinned client stops pulling for longer than "
                                  "priority_timeout"),
    ({"admin": 4, "timeout": 1}, "4 admin unpins and 1 timeout: operators keep unpinning: see the Audit page"),
    ({"timeout": 1}, "1 timeout: the pinned client stops pulling"),
    ({}, "no unpin recorded in the window"),
])
def test_flapping_says_its_unpin_reasons_and_what_to_do(unpins, says):
    context = advice.Context(pinned_id="p", priority_policy="pinned_client", unpins=unpins)
    assert advice.next_step("FLAPPING", {"switches": 18, "limit": 6}, context).startswith(says)


@pytest.mark.parametrize("context, offered", [
    (GROUPED, ("handoff", "resume", "stay-paused")),  # a pin to hand off: hand-off is the default
    (advice.Context(priority_policy="pinned_client"), ("resume", "stay-paused")),  # a group, nobody pinned
    (advice.Context(), ("resume", "stay-paused")),  # no priority group
])
def test_a_drain_offers_hand_off_only_with_a_pin(context, offered):
    assert advice.drain_choices(("handoff", "resume", "stay-paused"), context) == offered


@pytest.mark.parametrize("verdict, warns", [("STALLED", True), ("OK", False), ("LAGGING", False),
                                            ("NO_PULLERS", False)])
def test_a_drain_warns_first_where_in_flight_work_is_not_falling(verdict, warns):
    assert (advice.drain_warning(verdict) is not None) == warns


@pytest.mark.parametrize("context, offered", [(GROUPED, True), (advice.Context(priority_policy="pinned_client"), False),
                                              (advice.Context(pinned_id="p"), False)])
def test_unpin_is_offered_only_where_a_group_holds_a_pin(context, offered):
    assert advice.unpin_offered(context) == offered


def test_quiet_verdicts_say_since_when_and_others_keep_their_reason():
    last = NOW - dt.timedelta(minutes=12, seconds=4)
    ctx = advice.Context(last_pull=last, last_ack=last)
    assert advice.reason_since("NO_PULLERS", "x for 295s", {"pending": 7}, ctx, NOW) == \
        "7 messages pending and no client has pulled since 07:17:56 UTC (12 min 4 s ago)"
    assert advice.reason_since("STALLED", "x for 295s", {"ack_pending": 20}, ctx, NOW) == \
        "20 messages handed out and none acknowledged since 07:17:56 UTC (12 min 4 s ago)"
    assert advice.reason_since("NO_PULLERS", "as judged", {"pending": 7}, advice.Context(first_seen=last), NOW) == \
        "7 messages pending and no client has pulled since at least 07:17:56 UTC (12 min 4 s ago)"
    assert advice.reason_since("LAGGING", "as judged", {}, ctx, NOW) == "as judged"
    assert advice.reason_since("NO_PULLERS", "as judged", {}, advice.Context(), NOW) == "as judged"


@pytest.mark.parametrize("held", ["42 s", "5 min", "4 min 12 s", "3 h", "3 h 5 min", "2 d 4 h", "0.5 s"])
def test_a_verdict_with_an_onset_says_since_when_whatever_its_duration_reads(held):
    """The rules word how long a condition held as core/durations.py words any duration; the page
    replaces it with since when, for every form that takes."""
    since = NOW - dt.timedelta(minutes=12, seconds=4)
    said = advice.reason_since("NO_PULLERS", f"5 messages pending, nothing in flight and no client has pulled for {held}",
                               {"pending": 5}, advice.Context(since=since), NOW)
    assert said == "5 messages pending, nothing in flight and no client has pulled since 07:17:56 UTC (12 min 4 s ago)"


@pytest.mark.parametrize("parameters, words", [
    ({"then": "resume", "timeout_s": 90.0}, "then resume; timeout 1 min 30 s"),
    ({"group": "jobs", "expect_pin": "NUIDPREFIXabcdef"}, "group jobs; pin confirmed …abcdef"),
])
def test_the_audit_pages_parameters_say_seconds_as_a_duration_and_pins_by_their_tail(parameters, words):
    assert tables._params_words(pd.DataFrame({"parameters": [parameters]}), NOW) == [words]
