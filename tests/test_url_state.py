"""Filters, searches and time ranges live in the page's URL: a link to a
filtered page opens it filtered, and what the viewer picks is written back, so a reload keeps it."""

from __future__ import annotations

from tests.conftest import IDLE_STREAM
from tests.test_dashboard import consumers, frame, run_app


def param(at, name: str) -> list[str]:
    """A query parameter's values as the app left them (AppTest keeps a lone value as a string)."""
    value = at.query_params.get(name, [])
    return [value] if isinstance(value, str) else list(value)


def test_a_link_to_a_filtered_fleet_opens_it_filtered_and_a_change_is_written_back(filled_db, app_env):
    app_env(filled_db)
    at = run_app(verdicts="NO_PULLERS", search="idl")
    assert list(consumers(frame(at, "Verdict"))) == ["idle"]
    assert at.multiselect(key="fleet_verdict").value == ["NO_PULLERS"]
    at.multiselect(key="fleet_verdict").set_value(["NO_PULLERS", "OK"]).run()
    assert param(at, "verdicts") == ["NO_PULLERS", "OK"]  # repeated: ?verdicts=NO_PULLERS&verdicts=OK
    at.multiselect(key="fleet_verdict").set_value(["NO_PULLERS"]).run()
    assert at.text_input(key="fleet_search").value == "idl"
    at.text_input(key="fleet_search").input("").run()
    at.multiselect(key="fleet_stream").set_value([IDLE_STREAM]).run()
    assert param(at, "streams") == [IDLE_STREAM]
    assert param(at, "verdicts") == ["NO_PULLERS"]
    assert "search" not in at.query_params  # an empty search is no parameter at all


def test_a_link_naming_a_stream_that_is_gone_opens_the_fleet_without_it(filled_db, app_env):
    app_env(filled_db)
    at = run_app(streams="GONE", verdicts="NO_PULLERS")
    assert at.multiselect(key="fleet_stream").value == []
    assert list(consumers(frame(at, "Verdict"))) == ["idle"]


def test_the_pins_and_consumer_pages_keep_their_time_range_in_the_link(filled_db, app_env):
    app_env(filled_db)
    at = run_app("views/pins.py", range="24 hours", reasons="timeout")
    assert at.selectbox(key="pins_range").value == "24 hours"
    assert at.multiselect(key="pins_reason").value == ["timeout"]
    at.selectbox(key="pins_range").set_value("6 hours").run()
    assert param(at, "range") == ["6 hours"]
    at = run_app("views/consumer.py", stream=IDLE_STREAM, consumer="idle", range="6 hours")
    assert at.selectbox(key="consumer_range").value == "6 hours"
