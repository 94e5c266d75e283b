"""The /metrics endpoint: a small HTTP server that serves the text the exporter rendered last,
and the collector's /healthz and /readyz beside it (exporters/probes.py).

Rendering happens once per cycle (the collector's runner calls `render` off its event loop); a
scrape is served the cached text, so a scrape never costs a render and never reaches the collector.
The server starts before the collector connects to NATS: a scheduler probes it from the start.
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
from jetwatch.exporters.metrics import ALL_UP_TO, CycleCollector
from jetwatch.exporters.probes import Probe, Probes

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

    def do_GET(self) -> None:  # http.server's name
        path = self.path.split("?")[0]
        probes = self.exporter.probes
        if path in ("/metrics", "/"):
            self._send(200, self.exporter.text, CONTENT_TYPE_PLAIN_0_0_4)  # what generate_latest writes
        elif path in ("/healthz", "/readyz") and probes is not None:
            self._probe(probes.live() if path == "/healthz" else probes.ready())
        else:
            self.send_error(404, "served here: /metrics, /healthz, /readyz")

    def _probe(self, probe: Probe) -> None:
        self._send(200 if probe.ok else 503, f"{'ok' if probe.ok else 'not ok'}: {probe.text}\n".encode(),
                   "text/plain; charset=utf-8")

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("scrape: " + format, *args)


class MetricsExporter:
    """The /metrics endpoint: its own registry with one custom collector; render() once per
    cycle (in a worker thread), scrapes served the cached text from a small HTTP server."""

    def __init__(self, cardinality: str = "auto", probes: Probes | None = None, all_up_to: int = ALL_UP_TO) -> None:
        self.probes = probes  # /healthz and /readyz, when given
        self.registry = CollectorRegistry(auto_describe=False)
        self.collector = CycleCollector(cardinality, all_up_to)
        self.registry.register(self.collector)
        self.text = b"# jetwatch: no cycle completed yet\n"
        self._server: ThreadingHTTPServer | None = None
        self.bound: tuple[str, int] | None = None  # the address served, once serving
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
        self.bound = (str(bound[0]), int(bound[1]))
        log.info("metrics on http://%s:%d/metrics%s", bound[0], bound[1],
                 ", probes on /healthz and /readyz" if self.probes is not None else "")
        return self.bound

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
