"""Server URLs without their secrets.

`nats://user:pass@host:4222` is how many people write a server with credentials, and nats-py
accepts it; but the URL then travels into logs, the store, error text, pages and `ps`. So
jetwatch takes the user name and password out of every server URL when settings are read (they
become the `user`/`password` settings) and shows or stores only the bare address.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit, urlunsplit


def split_userinfo(url: str) -> tuple[str, str | None, str | None]:
    """(the URL without userinfo, user, password). A token-only URL (`nats://tok@host`) gives
    the token as the user, as nats-py reads it."""
    text = url.strip()
    if "@" not in text:
        return text, None, None
    parts = urlsplit(text if "://" in text else f"nats://{text}")
    if "@" not in parts.netloc:
        return text, None, None
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, sep, password = userinfo.partition(":")
    bare = urlunsplit((parts.scheme, hostport, parts.path, parts.query, parts.fragment))
    return bare, unquote(user) or None, unquote(password) if sep else None


def strip_userinfo(url: str) -> str:
    return split_userinfo(url)[0]


def shown_servers(servers: str | None) -> str:
    """A server setting (comma separated URLs) fit to print: no userinfo in any of them."""
    if not servers:
        return "the configured server"
    return ",".join(strip_userinfo(s) for s in servers.split(",") if s.strip())
