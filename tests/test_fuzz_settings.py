"""Property-based tests at the settings boundary: every flag, `JETWATCH_*` variable and `nats`
context file is text someone typed. The promise: any string for any setting is taken within the
setting's declared range (the one docs/configuration.md shows), or refused with a SettingsError
that names the flag or variable (or the context) and what it allows; never another exception,
never a value out of range taken. `pytest tests/test_fuzz_settings.py --hypothesis-profile=explore`
searches further."""

from __future__ import annotations

import argparse
import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from jetwatch.collectors.jsz import HttpJsz
from jetwatch.core.settings import SETTINGS, SettingsError, parse_duration, parse_instant, parse_size, resolve

NUMBERS = ("nan", "NaN", "inf", "-inf", "Infinity", "1e400", "-1", "-0", "0", "1e-400", "9" * 400, "9" * 5000,
           "1" + "0" * 30 + "d", "99999999999999999999d", "0.0000001ms", "1_000", "٣", "²", "5s", "2m", "1h", "7d",
           "500ms", "256MB", "1TB", "9" * 30 + "TB", "true", "", " ", "\x00", "\ud800", "\u202e5s", "x:" + "9" * 5000,
           "127.0.0.1:70000", ":²", "nats://[::1", "nats://u:p@[::1", "a=b", "=", "eu=", "x" * 300)
texts = st.one_of(st.sampled_from(NUMBERS), st.text(max_size=12),
                  st.from_regex(r"\A-?[0-9]{1,25}(\.[0-9]{1,5})?(e[0-9]{1,3})?(ms|s|m|h|d|B|KB|MB|GB|TB)?\Z"))
CONTEXTS = {"good": '{"url": "nats://127.0.0.1:4222"}', "junk": "{not json", "list": "[1, 2]",
            "null": "null", "url-list": '{"url": ["nats://a"]}', "binary": b"\xff\xfe"}
context_names = st.one_of(st.sampled_from([*CONTEXTS, "missing", "dir", "../context/good", "a/b", "x\x00y", ""]), texts)


@pytest.fixture(scope="module")
def config_home(tmp_path_factory) -> str:
    """A `nats` CLI context directory holding good and broken contexts."""
    home = tmp_path_factory.mktemp("xdg")
    folder = home / "nats" / "context"
    folder.mkdir(parents=True)
    for name, body in CONTEXTS.items():
        path = folder / f"{name}.json"
        path.write_bytes(body) if isinstance(body, bytes) else path.write_text(body)
    (folder / "dir.json").mkdir()
    return str(home)


def _in_range(setting, value) -> None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        assert math.isfinite(value), (setting.name, value)
        assert setting.minimum is None or value >= setting.minimum, (setting.name, value)
        assert setting.maximum is None or value <= setting.maximum, (setting.name, value)
        if setting.parse is parse_duration:
            assert value <= 36500 * 86400, (setting.name, value)  # a date can be computed from it
        if setting.parse is int or setting.parse is parse_size:
            assert -(1 << 63) <= value < 1 << 63, (setting.name, value)  # what a server or a socket can take


def _refused_in_words(exc: SettingsError, *names: str) -> None:
    said = str(exc)
    assert said and any(name in said for name in names), said
    # Python's own words are not the setting's: say what it takes instead.
    assert not any(words in said for words in ("invalid literal", "could not convert", "Exceeds the limit",
                                                "codec can't", "Errno", "object has no attribute")), said


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(SETTINGS), texts, st.booleans())
# Each failed before: a size past int64 was taken (the capture stream's limit then failed at the
# server), a count past int64 raised OverflowError, a port of more than 4,300 digits or of '²' and
# a count written 826.0 were refused in Python's int() words, and a server URL with an unclosed
# IPv6 bracket raised a plain ValueError out of resolve, and a duration of 10^30 days was taken
# by a setting without a maximum (the first date computed from it overflowed), and a monitoring
# URL with an unclosed IPv6 bracket was taken and raised ValueError when the collector started.
@example(next(s for s in SETTINGS if s.name == "capture_max_bytes"), "9" * 30 + "TB", False)
@example(next(s for s in SETTINGS if s.name == "metrics_address"), "x:" + "9" * 5000, True)
@example(next(s for s in SETTINGS if s.name == "metrics_address"), ":²", False)
@example(next(s for s in SETTINGS if s.name == "server"), "nats://u:p@[::1", False)
@example(next(s for s in SETTINGS if s.name == "port"), "826.0", True)
@example(next(s for s in SETTINGS if s.name == "monitor_url"), "http://u:p@[::1", False)
@example(next(s for s in SETTINGS if s.name == "raw_retention"), "1" + "0" * 30 + "d", False)
@example(next(s for s in SETTINGS if s.name == "deploy_groups"), "9" * 400, False)
def test_any_text_for_any_setting_is_taken_in_range_or_refused_naming_it(config_home, setting, text, as_flag):
    if setting.name in ("context", "system_context", "account_contexts"):
        return  # their values name context files: the next test
    env = {"XDG_CONFIG_HOME": config_home}
    args = argparse.Namespace()
    if as_flag:
        setattr(args, setting.name, text)
    else:
        env[setting.env] = text
    try:
        got = resolve(args, env)
    except SettingsError as exc:
        _refused_in_words(exc, setting.flag, setting.env)
        return
    _in_range(setting, getattr(got, setting.name))
    if setting.name == "monitor_url":
        HttpJsz(got.monitor_url)  # the collector's reader takes what was taken


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["context", "system_context", "account_contexts"]), context_names, st.booleans())
# Failed before: a context name with a NUL, or naming a directory or a file that is not UTF-8 or
# whose JSON is not an object, raised ValueError, IsADirectoryError, UnicodeDecodeError or
# AttributeError out of resolve.
@example("context", "x\x00y", False)
@example("context", "\ud800", True)
@example("context", "dir", True)
@example("context", "binary", True)
@example("system_context", "list", True)
@example("account_contexts", "APP=null", False)
def test_any_context_name_is_read_or_refused_naming_the_context(config_home, name, text, as_flag):
    env = {"XDG_CONFIG_HOME": config_home}
    args = argparse.Namespace()
    value = text if name != "account_contexts" or "=" in text else f"APP={text}"
    if as_flag:
        setattr(args, name, value)
    else:
        env["JETWATCH_" + name.upper()] = value
    try:
        resolve(args, env)
    except SettingsError as exc:
        _refused_in_words(exc, "context", "--account-contexts", "--" + name.replace("_", "-"), "JETWATCH_" + name.upper())


@settings(max_examples=200, deadline=None)
@given(texts)
# Failed before: a duration past what a date can hold raised OverflowError from parse_instant
# (`--until`, `--stay-until`), a size of 5,000 digits Python's ValueError from parse_size.
@example("9" * 400 + "d")
@example("038827810279020")
@example("9" * 5000)
def test_durations_sizes_and_instants_are_numbers_or_refused_in_words(text):
    import datetime as dt

    for parse in (parse_duration, parse_size, lambda t: parse_instant(t, dt.datetime(2026, 11, 22, tzinfo=dt.UTC))):
        try:
            parse(text)
        except SettingsError as exc:
            assert str(exc)
