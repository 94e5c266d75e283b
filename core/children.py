"""What jetwatch hands to the processes it starts: the settings, as JETWATCH_* variables."""

from __future__ import annotations

import os

from jetwatch.core.settings import SETTINGS, Settings


def settings_env(settings: Settings) -> dict[str, str]:
    """The settings as JETWATCH_* variables; a child resolves them back into the same settings."""
    env: dict[str, str] = {}
    for s in SETTINGS:
        value = settings.values.get(s.name)
        if value is None:
            continue
        env[s.env] = ",".join(value) if isinstance(value, tuple) else str(value)
    return env


def child_env(settings: Settings) -> dict[str, str]:
    """This process's environment with its own JETWATCH_* replaced by `settings`."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("JETWATCH_")}
    return {**base, **settings_env(settings)}
