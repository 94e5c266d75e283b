"""Small servers on loopback for the browser tests, each on a thread of its own.

`ReverseProxy` stands in front of the dashboard as a deployment's nginx or ingress does: every
request, the WebSocket upgrade included, reaches the dashboard with the headers the proxy sets,
whatever the browser sent under those names.

What the dashboard learns from a proxy (the client's address in X-Forwarded-For, a signed-in user
in a trusted header) arrives on the WebSocket the Streamlit session runs on. A browser's own
"extra headers" need not reach that WebSocket (Chromium 150 stopped sending them there), so a test
that means "behind a proxy" runs one. HTTP/1.1 only: each client connection gets one upstream
connection; requests are read one by one (so each gets the headers), replies are copied as they
come, and after an upgrade both directions are copied as bytes."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import threading
from collections.abc import Iterator
from typing import Self

from jetwatch.core.embedded_server import free_port

_HEAD_LIMIT = 64 * 1024


class LoopbackServer:
    """An asyncio server on a free 127.0.0.1 port, run on a thread of its own (the tests' own
    code is synchronous, and Playwright's sync API holds the test thread's event loop)."""

    def __init__(self) -> None:
        self.port = free_port()
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, name=type(self).__name__, daemon=True)
        self._server: asyncio.Server | None = None
        self._error: BaseException | None = None

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self._thread.start()
        if not self._started.wait(10) or self._error is not None:
            raise RuntimeError(f"the test's {type(self).__name__} did not start: {self._error!r}")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._loop.call_soon_threadsafe(self._server.close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._server = self._loop.run_until_complete(asyncio.start_server(self.serve, "127.0.0.1", self.port))
        except BaseException as exc:  # reported by __enter__
            self._error = exc
            self._started.set()
            return
        self._started.set()
        try:
            self._loop.run_forever()
        finally:
            tasks = asyncio.all_tasks(self._loop)
            for task in tasks:
                task.cancel()
            self._loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            self._loop.close()


class ReverseProxy(LoopbackServer):
    """Listens on 127.0.0.1:`port` and forwards to 127.0.0.1:`upstream_port`, setting `headers`
    (changeable between requests with `set_headers`; a header given as None is removed)."""

    def __init__(self, upstream_port: int, headers: dict[str, str | None] | None = None):
        super().__init__()
        self.upstream_port = upstream_port
        self.requests = 0  # forwarded, upgrades included: lets a test see its browser came through here
        self._headers: dict[str, str | None] = dict(headers or {})
        self._lock = threading.Lock()

    def set_headers(self, headers: dict[str, str | None]) -> None:
        with self._lock:
            self._headers = dict(headers)

    def _rewrite(self, head: bytes) -> tuple[bytes, int | None, bool, bool]:
        """The request head as forwarded; its body length, whether the body is chunked, and
        whether it asks to upgrade the connection."""
        lines = head.decode("latin-1").split("\r\n")
        with self._lock:
            mine = dict(self._headers)
        names = {name.lower() for name in mine}
        kept, length, chunked, upgrade = [lines[0]], None, False, False
        for line in lines[1:]:
            if not line:
                continue
            name, _, value = line.partition(":")
            key = name.strip().lower()
            if key in names:
                continue  # the client's own copy: a proxy sets these, the client cannot
            if key == "content-length":
                length = int(value.strip())
            elif key == "transfer-encoding" and "chunked" in value.lower():
                chunked = True
            elif key == "upgrade":
                upgrade = True
            kept.append(line)
        kept += [f"{name}: {value}" for name, value in mine.items() if value is not None]
        return ("\r\n".join(kept) + "\r\n\r\n").encode("latin-1"), length, chunked, upgrade

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.close()
            return
        replies = asyncio.create_task(_copy(up_reader, writer))
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    break
                if len(head) > _HEAD_LIMIT:
                    break
                forwarded, length, chunked, upgrade = self._rewrite(head)
                self.requests += 1
                up_writer.write(forwarded)
                if upgrade:
                    await _copy(reader, up_writer)
                    break
                if chunked:
                    await _copy_chunked(reader, up_writer)
                elif length:
                    up_writer.write(await reader.readexactly(length))
                await up_writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            with contextlib.suppress(Exception):
                up_writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(replies, 5)
            writer.close()


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Bytes from one side to the other until either closes."""
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


async def _copy_chunked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """One chunked request body, through its last chunk and trailers."""
    while True:
        size_line = await reader.readuntil(b"\r\n")
        writer.write(size_line)
        size = int(size_line.split(b";")[0].strip(), 16)
        if size == 0:
            while (trailer := await reader.readuntil(b"\r\n")) != b"\r\n":
                writer.write(trailer)
            writer.write(b"\r\n")
            return
        writer.write(await reader.readexactly(size + 2))


@contextlib.contextmanager
def proxied(upstream_port: int, headers: dict[str, str | None] | None = None) -> Iterator[ReverseProxy]:
    with ReverseProxy(upstream_port, headers) as proxy:
        yield proxy


class WebSocketProbe(LoopbackServer):
    """A page that sets a cookie and opens a WebSocket back to this server, which answers with one
    text message: what a browser must do for the dashboard to work at all (Streamlit runs every
    session on a WebSocket, and a sign-in rides on the cookie sent with it). Records the Cookie
    and Origin headers the WebSocket's upgrade request carried."""

    MESSAGE = "websocket open"
    PAGE = ("<!doctype html><title>probe</title><script>"
            "const ws = new WebSocket('ws://' + location.host + '/ws');"
            "ws.onmessage = (e) => { document.title = e.data; };"
            "ws.onerror = () => { document.title = 'websocket failed'; };"
            "</script>")

    def __init__(self) -> None:
        super().__init__()
        self.upgrade_headers: dict[str, str] | None = None

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            writer.close()
            return
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in head[1:] if line)}
        if head[0].startswith("GET /ws ") and "sec-websocket-key" in headers:
            self.upgrade_headers = headers
            accept = base64.b64encode(hashlib.sha1(
                (headers["sec-websocket-key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
            payload = self.MESSAGE.encode()
            writer.write(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                          f"Sec-WebSocket-Accept: {accept}\r\n\r\n").encode()
                         + bytes([0x81, len(payload)]) + payload)
            await writer.drain()
            with contextlib.suppress(Exception):
                await reader.read(65536)  # until the browser goes away
        else:
            body = self.PAGE.encode()
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nSet-Cookie: probe=1; Path=/\r\n"
                         + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
            await writer.drain()
        writer.close()
