"""What jetwatch hands to the processes it starts: the settings, as JETWATCH_* variables.

Secrets go only to the children that need them, and only through the environment: never on a
command line, where `ps` and /proc/*/cmdline show them to every user of the machine."""

from __future__ import annotations

import os

from jetwatch.core.settings import SETTINGS, Settings

NATS_SECRETS: tuple[str, ...] = ("password", "token")  # for children that connect to NATS
DASHBOARD_SECRETS: tuple[str, ...] = NATS_SECRETS + ("operator_secret",)


def settings_env(settings: Settings, secrets: tuple[str, ...] = ()) -> dict[str, str]:
    """The settings as JETWATCH_* variables; a child resolves them back into the same settings.
    Secret settings are left out unless named in `secrets`."""
    env: dict[str, str] = {}
    for s in SETTINGS:
        value = settings.values.get(s.name)
        if value is None or (s.secret and s.name not in secrets):
            continue
        env[s.env] = ",".join(value) if isinstance(value, tuple) else str(value)
    return env


def child_env(settings: Settings, secrets: tuple[str, ...] = ()) -> dict[str, str]:
    """This process's environment with its own JETWATCH_* replaced by `settings` (and only the
    secrets named)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("JETWATCH_")}
    return {**base, **settings_env(settings, secrets)}
