"""An HTTP GET that is over within its deadline and its size cap, whatever the other end does.

A socket timeout bounds each read, not the whole: a monitoring port (or a proxy in front of it)
that accepts the connection and then trickles its reply a byte every few seconds keeps every read
alive, and a `urlopen(timeout=5)` then never ends, holding up whatever waits for it (a collector's
cycle) for as long as the other end likes. Here a timer shuts the socket down under the blocked
read at the deadline, so the call fails then.

A deadline does not bound the size: an end that sends fast can send gigabytes within it, and a
bare `read()` holds them all in memory. So the body is read in pieces, and the read stops (and
fails) at the caller's cap: what the other end sends past it is never read.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
from urllib.parse import urlsplit


class TooSlow(OSError):
    """The other end accepted the request but did not complete its reply within the deadline."""


class TooLarge(OSError):
    """The other end's reply is longer than the caller's cap: the rest was not read."""


PIECE = 1 << 20  # read at a time, so that no read asks for more than a piece past what is held


def read_capped(reply: http.client.HTTPResponse, max_bytes: int, what: str) -> bytes:
    """At most `max_bytes` of the reply's body; raises TooLarge, naming `what` and the cap, as soon
    as the reply says (Content-Length) or shows that it is longer."""
    try:
        return _read_capped(reply, max_bytes, what)
    except TooLarge:
        # Closed here, not when the reply is collected: the connection's close leaves the socket open
        # while the reply holds it, and an error kept (in a log record) keeps the reply.
        reply.close()
        raise


def _read_capped(reply: http.client.HTTPResponse, max_bytes: int, what: str) -> bytes:
    length = reply.getheader("Content-Length")
    if length is not None and length.strip().isdigit() and int(length) > max_bytes:
        raise TooLarge(f"{what} announced a reply of {int(length):,} bytes, more than the cap of {max_bytes:,} bytes: "
                       "it was not read")
    pieces: list[bytes] = []
    held = 0
    while True:
        piece = reply.read(min(PIECE, max_bytes + 1 - held))
        if not piece:
            return b"".join(pieces)
        held += len(piece)
        if held > max_bytes:
            raise TooLarge(f"{what} sent a reply longer than the cap of {max_bytes:,} bytes: the rest was not read")
        pieces.append(piece)


def cut(conn: http.client.HTTPConnection) -> None:
    """Wake a read blocked on the connection's socket (in another thread): it fails at once."""
    sock = conn.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def connection(host: str, port: int | None, https: bool, timeout_s: float) -> http.client.HTTPConnection:
    """An unopened connection to `host`, with the system's certificate checks for https."""
    if https:
        return http.client.HTTPSConnection(host, port, timeout=timeout_s, context=ssl.create_default_context())
    return http.client.HTTPConnection(host, port, timeout=timeout_s)


def get(url: str, timeout_s: float, authorization: str | None = None, *, max_bytes: int) -> bytes:
    """The body of `url` (http:// or https://), within `timeout_s` in all: connecting, sending,
    the headers and the whole body, of at most `max_bytes`. Raises TooSlow at the deadline,
    TooLarge past the cap, OSError for anything else (refused, reset, HTTP 4xx/5xx). `url` is said
    in errors: pass it without credentials (those go in `authorization`)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise OSError(f"{url!r} is not an http:// or https:// URL")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    conn = connection(parts.hostname, parts.port, parts.scheme == "https", timeout_s)
    late = threading.Event()

    def deadline() -> None:
        late.set()
        cut(conn)

    timer = threading.Timer(timeout_s, deadline)
    timer.daemon = True
    timer.start()
    try:
        conn.connect()
        if late.is_set():  # the deadline passed while connecting, before there was a socket to cut
            raise TooSlow()
        conn.request("GET", path, headers={"Authorization": authorization} if authorization else {})
        reply = conn.getresponse()
        body = read_capped(reply, max_bytes, url)
        if reply.status >= 400:
            raise OSError(f"{url} answered HTTP {reply.status} {reply.reason}")
        return body
    except TooLarge:
        raise
    except (OSError, http.client.HTTPException) as exc:
        if late.is_set():
            raise TooSlow(f"{url} did not answer within {timeout_s:g}s (it accepted the connection but its reply "
                          "never completed)") from None
        if isinstance(exc, OSError):
            raise
        raise OSError(f"{url} sent a broken HTTP reply: {type(exc).__name__}: {exc}") from None
    finally:
        timer.cancel()
        conn.close()
