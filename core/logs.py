"""How jetwatch logs: plain lines for a terminal (the default), or one JSON object per line for a
log pipeline (`--log-format json`: Loki, Elasticsearch, Cloud Logging read each field as is).

A record may carry what it is about (`extra={"stream": ..., "consumer": ...}`); a collector tags
every record with its cluster. Text lines say these in their message already; JSON gives them
fields of their own, so a pipeline can select one consumer's lines without parsing words.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys

FORMATS = ("text", "json")
TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# What a record may be about, each a field of its own in JSON.
ABOUT = ("cluster", "account", "stream", "consumer")


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, RFC 3339), level, logger, message, what it is about,
    and the exception's traceback where there is one."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for field in ABOUT:
            value = getattr(record, field, None)
            if value is not None:
                line[field] = str(value)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


class _Cluster(logging.Filter):
    def __init__(self, cluster: str) -> None:
        super().__init__()
        self.cluster = cluster

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "cluster", None) is None:
            record.cluster = self.cluster
        return True


def configure(level: str, form: str) -> None:
    """The root logger's one handler, on standard error, in the format asked for."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if form == "json" else logging.Formatter(TEXT))
    logging.basicConfig(level=getattr(logging, level), handlers=[handler])


def tag_cluster(cluster: str | None) -> None:
    """Every record from now on is about this cluster (a collector watches one)."""
    if cluster:
        for handler in logging.getLogger().handlers:
            handler.addFilter(_Cluster(cluster))
