"""The /metrics endpoint: a small HTTP server that serves the text the exporter rendered last.

Rendering happens once per cycle (the collector's runner calls `render` off its event loop); a
scrape is served the cached text, so a scrape never costs a render and never reaches the collector.
"""

from __future__ import annotations

import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from jetwatch.core.errors import JetwatchError
from jetwatch.exporters.cycle_snapshot import Snapshot
from jetwatch.exporters.metrics import CycleCollector

log = logging.getLogger("jetwatch.metrics")


def parse_address(text: str) -> tuple[str, int]:
    """'PORT', ':PORT' or 'HOST:PORT'; the host defaults to 127.0.0.1 (never all interfaces unasked)."""
    host, _, port = str(text).rpartition(":")
    try:
        number = int(port)
    except ValueError:
        raise JetwatchError(f"--metrics-address {text!r} is not HOST:PORT (for example 127.0.0.1:9464)") from None
    return host or "127.0.0.1", number


class _Handler(BaseHTTPRequestHandler):
    exporter: MetricsExporter

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if self.path.split("?")[0] not in ("/metrics", "/"):
            self.send_error(404, "only /metrics is served here")
            return
        body = self.exporter.text
        self.send_response(200)
        self.send_header("Content-Type", CONTENT_TYPE_PLAIN_0_0_4)  # what generate_latest writes
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("scrape: " + format, *args)


class MetricsExporter:
    """The /metrics endpoint: its own registry with one custom collector; render() once per
    cycle (in a worker thread), scrapes served the cached text from a small HTTP server."""

    def __init__(self, cardinality: str = "non_ok") -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.collector = CycleCollector(cardinality)
        self.registry.register(self.collector)
        self.text = b"# jetwatch: no cycle completed yet\n"
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def render(self, snapshot: Snapshot) -> bytes:
        self.collector.snapshot = snapshot
        self.text = generate_latest(self.registry)
        return self.text

    def serve(self, address: str) -> tuple[str, int]:
        host, port = parse_address(address)
        handler = type("Handler", (_Handler,), {"exporter": self})
        try:
            self._server = ThreadingHTTPServer((host, port), handler)
        except OSError as exc:
            raise JetwatchError(f"cannot serve metrics on {host}:{port} ({exc.strerror}): pass a free "
                                "--metrics-address") from None
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="jetwatch-metrics", daemon=True)
        self._thread.start()
        bound = self._server.server_address
        log.info("metrics on http://%s:%d/metrics", bound[0], bound[1])
        return str(bound[0]), int(bound[1])

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
