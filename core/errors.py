"""One error family. Every error jetwatch raises on purpose is a `JetwatchError` whose message is
written for the person reading it: what happened, and what to do. The CLI prints that message and
exits with `exit_code`, without a traceback; anything else is a bug and keeps its traceback."""

from __future__ import annotations


class JetwatchError(Exception):
    """Base of every error meant for the user; `str(error)` is the whole story."""

    exit_code = 1


class UsageError(JetwatchError):
    """The command line asks for something jetwatch cannot do (a bad flag value, a missing file)."""

    exit_code = 2


def require(module: str, extra: str, what: str) -> None:
    """Raise a UsageError naming the extra to install when `module` is not installed: the
    collector's install leaves the dashboard, the pipeline and the embedded server out."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise UsageError(f"{what} needs {module}, which this installation of jetwatch lacks (installed without "
                         f"its {extra!r} extra): pip install 'jetwatch[{extra}]'")
