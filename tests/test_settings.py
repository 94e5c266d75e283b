"""Settings: one definition; flags over environment over a nats context; bad values said plainly."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import signal
import subprocess
import sys
import types
import typing

import pytest

from jetwatch import cli
from jetwatch.core import settings as settings_mod
from jetwatch.core.settings import Settings, SettingsError, parse_duration, parse_instant, parse_size, resolve


@pytest.mark.parametrize("text,seconds", [("500ms", 0.5), ("5s", 5), ("5", 5), ("2m", 120), ("1h", 3600),
                                          ("7d", 604800), (" 1.5s ", 1.5)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "abc", "5x", "-1s", "1 hour"])
def test_bad_durations_say_how_to_write_one(text):
    with pytest.raises(SettingsError, match="write a number with a unit"):
        parse_duration(text)


@pytest.mark.parametrize("text,size", [("256MB", 256 << 20), ("1GB", 1 << 30), ("512kb", 512 << 10), ("10", 10)])
def test_sizes(text, size):
    assert parse_size(text) == size


def test_flags_win_over_environment_which_wins_over_the_context(tmp_path):
    ctx = tmp_path / "nats" / "context"
    ctx.mkdir(parents=True)
    (ctx / "prod.json").write_text(json.dumps({"url": "nats://ctx:4222", "user": "ctx-user", "password": "pw",
                                               "creds": "/etc/x.creds"}))
    env = {"XDG_CONFIG_HOME": str(tmp_path), "JETWATCH_CONTEXT": "prod", "JETWATCH_USER": "env-user",
           "JETWATCH_INTERVAL": "10s"}
    parser = cli._parser()
    s = resolve(parser.parse_args(["collect", "--interval", "2s"]), env)
    assert (s.server, s.user, s.password, s.creds, s.interval) == ("nats://ctx:4222", "env-user", "pw", "/etc/x.creds", 2.0)
    assert s.redacted()["password"] == "***"


def test_a_missing_context_says_how_to_make_one(tmp_path):
    with pytest.raises(SettingsError, match="nats context add nope"):
        resolve(None, {"XDG_CONFIG_HOME": str(tmp_path), "JETWATCH_CONTEXT": "nope"})


@pytest.mark.parametrize("argv,message", [
    (["collect", "--interval", "soon"], "flag --interval: 'soon' is not a duration"),
    (["collect", "--capture-max-bytes", "lots"], "flag --capture-max-bytes: 'lots' is not a size"),
    (["pause", "S", "C", "--until", "whenever", "--yes"], "'whenever' is neither an RFC 3339 time"),
])
def test_bad_flags_exit_2_with_a_clear_message(argv, message):
    done = subprocess.run([sys.executable, "-m", "jetwatch.cli", *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_an_unreachable_server_is_a_clear_error_for_an_action():
    done = subprocess.run([sys.executable, "-m", "jetwatch.cli", "resume", "S", "C", "--yes", "--server",
                           "nats://127.0.0.1:1", "--connect-timeout", "1s", "--no-audit"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "could not connect to NATS at nats://127.0.0.1:1" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_collector_waits_for_an_unreachable_server_and_stops_cleanly(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "jetwatch.cli", "collect", "--server", "nats://127.0.0.1:1",
                             "--connect-timeout", "1s", "--db", str(tmp_path / "jw.duckdb")],
                            stderr=subprocess.PIPE, text=True)
    line = ""
    while "Retrying in 5s" not in line:
        line = proc.stderr.readline()
        assert line, "collector exited early"
    assert "could not connect to NATS at nats://127.0.0.1:1" in line
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0


def test_two_ways_of_sampling_at_once_is_refused_in_words(tmp_path):
    ctx = tmp_path / "nats" / "context"
    ctx.mkdir(parents=True)
    (ctx / "ops.json").write_text('{"user": "ops", "password": "pw"}')
    env = {"XDG_CONFIG_HOME": str(tmp_path), "JETWATCH_MONITOR_URL": "http://127.0.0.1:8222"}
    with pytest.raises(SettingsError, match="give one of them"):
        resolve(argparse.Namespace(system_context="ops"), env)


def test_system_context_gives_a_second_connection_on_the_same_server(tmp_path):
    ctx = tmp_path / "nats" / "context"
    ctx.mkdir(parents=True)
    (ctx / "ops.json").write_text('{"user": "ops", "password": "pw"}')
    s = resolve(argparse.Namespace(system_context="ops", server="nats://10.0.0.1:4222", user="app"),
                {"XDG_CONFIG_HOME": str(tmp_path)})
    assert (s.user, s.system.server, s.system.user, s.system.password) == ("app", "nats://10.0.0.1:4222", "ops", "pw")


@pytest.mark.parametrize("text,expected", [
    ("2026-11-22T09:08:29.08403Z", dt.datetime(2026, 11, 22, 9, 8, 29, 84030, tzinfo=dt.UTC)),
    ("2026-11-22T09:08:29.123456789Z", dt.datetime(2026, 11, 22, 9, 8, 29, 123456, tzinfo=dt.UTC)),
    ("2026-11-22T10:00:00Z", dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.UTC)),
    ("10m", dt.datetime(2026, 11, 22, 8, 10, tzinfo=dt.UTC)),
])
def test_instants_take_server_times_with_any_fraction_and_durations(text, expected):
    assert parse_instant(text, dt.datetime(2026, 11, 22, 8, 0, tzinfo=dt.UTC)) == expected


def _fits(value: object, hint: object) -> bool:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return any(_fits(value, h) for h in typing.get_args(hint))
    if typing.get_origin(hint) is tuple:  # tuple[str, ...]
        return isinstance(value, tuple) and all(_fits(v, typing.get_args(hint)[0]) for v in value)
    if hint is type(None):
        return value is None
    return isinstance(value, hint) and not (hint is int and isinstance(value, bool))


def test_each_setting_is_a_typed_attribute_of_settings_that_its_default_and_parse_fit():
    """The type checker reads `settings.interval` from Settings' annotations: one per setting, in
    SETTINGS' order, each the type its parse function returns (Optional when the default is None),
    so a setting added to SETTINGS without its type, or typed wrongly, fails here."""
    hints = typing.get_type_hints(settings_mod._Typed)
    assert list(hints) == [s.name for s in settings_mod.SETTINGS]
    for s in settings_mod.SETTINGS:
        assert _fits(s.default, hints[s.name]), (s.name, s.default, hints[s.name])
        parsed = s.parse if isinstance(s.parse, type) else typing.get_type_hints(s.parse)["return"]
        hint = hints[s.name]
        union = typing.get_origin(hint) in (typing.Union, types.UnionType)
        allowed = {h for h in typing.get_args(hint) if h is not type(None)} if union else {hint}
        assert allowed == {parsed}, (s.name, parsed, hint)
    assert isinstance(Settings().interval, float) and Settings({"interval": 2.0}).interval == 2.0
    with pytest.raises(AttributeError):
        Settings().not_a_setting  # noqa: B018 (the attribute read is the test)
