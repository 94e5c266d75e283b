"""Each fact is declared once; these tests fail when a declaration and one of its users disagree."""

from __future__ import annotations

import dataclasses
import json
import re
import string

import pytest

from jetwatch import cli
from jetwatch.actions import catalog
from jetwatch.actions.cli import action_params
from jetwatch.actions.operations import Target
from jetwatch.core.settings import SETTINGS, Settings
from jetwatch.dashboard import ui
from jetwatch.health import verdicts
from jetwatch.health.rules import RULES, Thresholds
from jetwatch.health.verdicts import SEVERITY, VERDICT_NAMES, VERDICTS
from jetwatch.pipeline import job
from jetwatch.pipeline.cli import submit_command
from tests.test_dashboard import run_app

# Verdicts ---------------------------------------------------------------------------------------

def test_every_rule_gives_its_own_verdict_in_severity_order():
    cluster = len(verdicts.CLUSTER_VERDICTS)
    assert VERDICT_NAMES[:cluster] == ("NO_LEADER", "API_UNAVAILABLE", "OFFLINE")  # above every rule: judged from evidence
    assert [r.verdict.name for r in RULES] == list(VERDICT_NAMES[cluster:cluster + len(RULES)])
    assert VERDICT_NAMES[cluster + len(RULES):] == ("OK", "COLLECTING")
    assert [SEVERITY[v] for v in VERDICT_NAMES] == list(range(len(VERDICTS)))
    assert len(set(VERDICT_NAMES)) == len(VERDICT_NAMES)


def test_every_verdict_has_a_colour_the_pages_can_draw():
    for v in VERDICTS:
        assert v.colour in ui._CELL, f"{v.name}: no cell background for {v.colour}"
        assert ui.badge(v.name) == f":{v.colour}-badge[{v.name}]"
        assert v.level in ("critical", "warning", "info", "ok", "unknown")


def test_the_fleet_filter_offers_every_verdict(filled_db, app_env):
    app_env(filled_db)
    at = run_app()
    assert tuple(at.multiselect(key="fleet_verdict").options) == VERDICT_NAMES


def test_a_verdict_added_to_the_table_reaches_the_fleet_filter(filled_db, app_env, monkeypatch):
    extra = verdicts.Verdict("TESTING_ONLY", "blue", "info", "a verdict added for this test")
    monkeypatch.setattr(verdicts, "VERDICTS", verdicts.VERDICTS + (extra,))
    monkeypatch.setattr(verdicts, "VERDICT_NAMES", verdicts.VERDICT_NAMES + ("TESTING_ONLY",))
    app_env(filled_db)
    at = run_app()
    assert "TESTING_ONLY" in at.multiselect(key="fleet_verdict").options


# Thresholds -------------------------------------------------------------------------------------

def test_thresholds_are_exactly_the_health_settings_with_their_defaults():
    health = {s.name: s.default for s in SETTINGS if s.group == "health"}
    assert {f.name: f.default for f in dataclasses.fields(Thresholds)} == health


def test_the_spark_job_receives_the_thresholds_the_settings_give():
    changed = Settings().replace(health_window=600.0, health_min_samples=5, health_min_span=90.0,
                                 saturation_ratio=0.75, unpinned_after=12.0, flapping_switches=9,
                                 redelivery_share=0.3)
    _, th = job.parse_args(_job_argv(changed))
    assert th == Thresholds.from_settings(changed)
    assert th != Thresholds()


def _job_argv(settings: Settings) -> list[str]:
    """The job's own arguments out of the spark-submit command jetwatch builds."""
    import datetime as dt
    from pathlib import Path
    from unittest import mock

    with mock.patch("jetwatch.pipeline.cli.spark_submit", return_value="spark-submit"):
        t = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
        cmd = submit_command(settings, Path("/s"), Path("/i"), Path("/o"), Path("/z.zip"), t, t)
    return cmd[cmd.index(next(c for c in cmd if c.endswith("job.py"))) + 1:]


# Actions ----------------------------------------------------------------------------------------

def test_the_cli_has_one_subcommand_per_declared_action():
    parser = cli._parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert set(catalog.BY_NAME) <= set(sub.choices)


@pytest.mark.parametrize("argv", [
    ["unpin", "S", "C", "--group", "jobs"],
    ["pause", "S", "C", "--until", "10m"],
    ["resume", "S", "C"],
    ["drain", "S", "C", "--then", "stay-paused", "--stay-until", "30m", "--timeout", "20s"],
    ["silence", "S", "C", "--for", "2h", "--note", "on it", "--verdict", "stalled"],
])
def test_each_action_confirms_and_audits_with_the_parameters_the_cli_gives(argv):
    args = cli._parser().parse_args(argv)
    params = action_params(args)
    action = catalog.action(args.command)
    fields = {f for _, f, _, _ in string.Formatter().parse(action.confirm) if f}
    assert {re.split(r"[.:\[]", f)[0] for f in fields} <= {"target"} | set(params)
    question = catalog.confirmation(args.command, Target(None, "S", "C"), params)
    assert "stream S, consumer C" in question
    audited = catalog.audit_params(args.command, params)
    assert set(audited) <= set(action.audit_params)
    json.dumps(audited)  # the audit row stores them as JSON


@pytest.mark.parametrize("timeout_s, said", [(20.0, "timeout 20 s"), (90.0, "timeout 1 min 30 s"),
                                             (3600, "timeout 1 h")])
def test_a_drains_confirmation_says_its_timeout_in_words(timeout_s, said):
    question = catalog.confirmation("drain", Target(None, "S", "C"), {"then": "resume", "timeout_s": timeout_s})
    assert question.endswith(f"({said})"), question


def test_an_unknown_action_is_refused_before_anything_is_sent(run):
    class NoServer:
        def __getattr__(self, name):
            raise AssertionError(f"{name} was called")

    with pytest.raises(catalog.UnknownAction, match="unknown action 'delete'"):
        run(catalog.perform(NoServer(), "delete", Target(None, "S", "C"), {}))  # type: ignore[arg-type]
    with pytest.raises(catalog.UnknownAction):
        catalog.confirmation("purge", Target(None, "S", "C"), {})


def test_every_declared_action_can_be_performed():
    """On the server (`perform`) or, for an action on jetwatch's own store, there (`perform_in_store`)."""
    on_server = {a.name for a in catalog.ACTIONS if a.on == "server"}
    assert set(catalog._RUNNERS) == on_server
    assert set(catalog._STORE_RUNNERS) == set(catalog.BY_NAME) - on_server
