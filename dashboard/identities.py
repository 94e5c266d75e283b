"""Operators are people: identities from a file, firm sessions, throttled guessing.

The identities file holds one operator a line, `name:scrypt:N:r:p:salt:hash` (hex), written by
`jetwatch operator add NAME`. A session is a signed, expiring token (HMAC-SHA256 with a random
key kept in `<file>.key`, created with mode 0600 beside it) that names the operator, a session id,
its expiry and a fingerprint of the identities file: changing the file (adding, removing or
re-keying anyone) ends every session, and so does its expiry or a logout. No Streamlit here: the
page and the HTTP routes both use this module, and plain pytest tests it.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import ipaddress
import json
import os
import re
import secrets
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from jetwatch.core.durations import duration
from jetwatch.core.errors import JetwatchError

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**14, 8, 1  # about 16 MiB and tens of ms per guess
MIN_PASSWORD = 12


class IdentityError(JetwatchError):
    """The identities file or a name/password given for it is not usable."""


def check_name(name: str) -> str:
    if not NAME.match(name or ""):
        raise IdentityError(f"operator name {name!r} is not usable: use 1-64 letters, digits, '.', '_', '@' or '-', "
                            "starting with a letter or digit")
    return name


def hash_password(password: str, salt: bytes | None = None, n: int = SCRYPT_N, r: int = SCRYPT_R,
                  p: int = SCRYPT_P) -> str:
    salt = salt or secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, n=n, r=r, p=p, dklen=32, maxmem=64 << 20)
    return f"scrypt:{n}:{r}:{p}:{salt.hex()}:{digest.hex()}"


def _verify_hash(password: str, stored: str) -> bool:
    try:
        kind, n, r, p, salt, digest = stored.split(":")
        if kind != "scrypt":
            return False
        got = hashlib.scrypt(password.encode(), salt=bytes.fromhex(salt), n=int(n), r=int(r), p=int(p),
                             dklen=len(digest) // 2, maxmem=64 << 20)
    except (ValueError, MemoryError):
        return False
    return hmac.compare_digest(got.hex(), digest)


@functools.cache
def _dummy() -> str:
    """A hash checked for unknown names, so that timing does not tell names: made on the first
    sign-in of a process, not by every command that imports this module."""
    return hash_password(secrets.token_hex(16))


_HEX = re.compile(r"(?:[0-9a-f]{2})+", re.ASCII)


def _usable_hash(stored: str) -> bool:
    """`scrypt:N:r:p:salt:hash` with costs a sign-in can pay (N a power of two up to 2^20, r up to
    32, p up to 16: at most 64 MiB and about a second) and hex salt and hash: a line with a cost
    past these would hold every sign-in under its name for minutes, or fail in hashlib's words."""
    parts = stored.split(":")
    if len(parts) != 6 or parts[0] != "scrypt" or not all(part.isascii() and part.isdigit() for part in parts[1:4]):
        return False
    n, r, p = (int(part) if len(part) < 9 else 0 for part in parts[1:4])
    return (2 <= n <= 1 << 20 and n & (n - 1) == 0 and 1 <= r <= 32 and 1 <= p <= 16 and 128 * n * r <= 64 << 20
            and bool(_HEX.fullmatch(parts[4])) and bool(_HEX.fullmatch(parts[5])) and 16 <= len(parts[5]) <= 128)


def read(path: str | Path) -> dict[str, str]:
    """name -> stored hash. Blank lines and `#` comments are skipped; a malformed line is an error,
    and so is a file that is not UTF-8 text."""
    out: dict[str, str] = {}
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise IdentityError(f"{path} is not UTF-8 text (byte {exc.start}): expected `name:scrypt:...` lines as "
                            "`jetwatch operator add` writes") from None
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, _, stored = line.partition(":")
        if not NAME.match(name) or not stored.startswith("scrypt:"):
            raise IdentityError(f"{path}, line {number}: expected `name:scrypt:...` as `jetwatch operator add` writes")
        if not _usable_hash(stored):
            raise IdentityError(f"{path}, line {number}: the hash of {name} is not `scrypt:N:r:p:salt:hash` with "
                                "costs jetwatch takes (N a power of two up to 2^20, r up to 32, p up to 16; salt "
                                "and hash in hex): write it again with `jetwatch operator add`")
        out[name] = stored
    return out


def add(path: str | Path, name: str, password: str) -> None:
    """Add or replace one operator; the file is rewritten atomically with mode 0600."""
    check_name(name)
    if len(password) < MIN_PASSWORD:
        raise IdentityError(f"the password is too short: use at least {MIN_PASSWORD} characters")
    path = Path(path)
    current = read(path) if path.exists() else {}
    current[name] = hash_password(password)
    tmp = path.with_name(path.name + ".tmp")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("# jetwatch operators: name:scrypt:N:r:p:salt:hash. Edit with `jetwatch operator add`.\n")
        f.writelines(f"{n}:{h}\n" for n, h in sorted(current.items()))
    os.replace(tmp, path)
    signing_key(path)


def fingerprint(path: str | Path) -> str:
    """Changes whenever the file does: a session signed under another fingerprint is over."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:32]
    except OSError:
        return "missing"


def signing_key(path: str | Path) -> bytes:
    """The HMAC key beside the identities file, created on first use (mode 0600)."""
    key_path = Path(str(path) + ".key")
    try:
        return bytes.fromhex(key_path.read_text().strip())
    except (OSError, ValueError):
        pass
    key = secrets.token_bytes(32)
    try:
        fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process won the race: use its key
        return bytes.fromhex(key_path.read_text().strip())
    with os.fdopen(fd, "w") as f:
        f.write(key.hex())
    return key


def verify(path: str | Path, name: str, password: str) -> bool:
    try:
        stored = read(path).get(name)
    except (OSError, IdentityError):
        return False
    if stored is None:
        _verify_hash(password, _dummy())
        return False
    return _verify_hash(password, stored)


@dataclass(frozen=True)
class Session:
    name: str
    sid: str
    expires: float
    fingerprint: str


_REVOKED: dict[str, float] = {}  # sid -> expiry, for logouts (this dashboard process)
_LOCK = threading.Lock()


def issue(path: str | Path, name: str, ttl_s: float, now: float | None = None) -> tuple[Session, str]:
    """A new session and its signed token (the cookie value)."""
    now = time.time() if now is None else now
    session = Session(name, secrets.token_hex(16), now + ttl_s, fingerprint(path))
    body = base64.urlsafe_b64encode(json.dumps(
        {"n": session.name, "sid": session.sid, "exp": session.expires, "fp": session.fingerprint}).encode()
    ).decode().rstrip("=")  # no padding: the token is a plain cookie value
    mac = hmac.new(signing_key(path), body.encode(), hashlib.sha256).hexdigest()
    return session, f"{body}.{mac}"


def check(path: str | Path, session: Session, now: float | None = None) -> str | None:
    """Why `session` is over, or None while it holds."""
    now = time.time() if now is None else now
    if session.expires <= now:
        return "your operator session expired: sign in again"
    if session.fingerprint != fingerprint(path):
        return "the operator identities changed: sign in again"
    with _LOCK:
        if session.sid in _REVOKED:
            return "you signed out"
    try:
        if session.name not in read(path):
            return "you are no longer an operator"
    except (OSError, IdentityError):
        return "the operator identities cannot be read"
    return None


def parse(path: str | Path, token: str | None) -> Session | None:
    """The session a token names, if its signature is good (validity is `check`'s job)."""
    if not token or "." not in token:
        return None
    body, mac = token.rsplit(".", 1)
    good = hmac.new(signing_key(path), body.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(good, mac):
        return None
    try:
        data = json.loads(base64.urlsafe_b64decode(body.encode() + b"=" * (-len(body) % 4)))
        return Session(str(data["n"]), str(data["sid"]), float(data["exp"]), str(data["fp"]))
    except (ValueError, KeyError, TypeError):
        return None


def revoke(session: Session) -> None:
    with _LOCK:
        now = time.time()
        for sid in [s for s, exp in _REVOKED.items() if exp <= now]:
            del _REVOKED[sid]
        _REVOKED[session.sid] = session.expires


# One-time handoffs: the page (which has no HTTP response to set a cookie on) hands a token to the
# browser, whose script trades it at /_jetwatch/session for an HttpOnly cookie. Short-lived, used once.
CALL_VALID_S = 60.0  # how long the one-time code of a browser call (the sign-in handoff, the sign-out) holds
_HANDOFFS: dict[str, tuple[str, float, float]] = {}  # handoff -> (cookie value, max-age, valid until)


def handoff(token: str, max_age_s: float, now: float | None = None) -> str:
    now = time.time() if now is None else now
    key = secrets.token_urlsafe(24)
    with _LOCK:
        for k in [k for k, (_, _, until) in _HANDOFFS.items() if until <= now]:
            del _HANDOFFS[k]
        _HANDOFFS[key] = (token, max_age_s, now + CALL_VALID_S)
    return key


def handoff_waiting(key: str, now: float | None = None) -> bool:
    """Whether the browser has yet to trade this handoff (and still may)."""
    now = time.time() if now is None else now
    with _LOCK:
        found = _HANDOFFS.get(key)
    return found is not None and found[2] > now


def redeem(key: str, now: float | None = None) -> tuple[str, float] | None:
    now = time.time() if now is None else now
    with _LOCK:
        found = _HANDOFFS.pop(key, None)
    if found is None or found[2] <= now:
        return None
    return found[0], found[1]


# Pending sign-outs: the page asks the browser to clear its cookie at /_jetwatch/logout, with a
# one-time code the route marks as done, so the page draws the request until the browser made it.
_LOGOUTS: dict[str, float] = {}  # code -> valid until


def logout_code(now: float | None = None) -> str:
    now = time.time() if now is None else now
    key = secrets.token_urlsafe(24)
    with _LOCK:
        for k in [k for k, until in _LOGOUTS.items() if until <= now]:
            del _LOGOUTS[k]
        _LOGOUTS[key] = now + CALL_VALID_S
    return key


def logout_waiting(key: str, now: float | None = None) -> bool:
    """Whether the browser has yet to clear its cookie for this sign-out (and still may be asked)."""
    now = time.time() if now is None else now
    with _LOCK:
        until = _LOGOUTS.get(key)
    return until is not None and until > now


def logout_done(key: str) -> None:
    with _LOCK:
        _LOGOUTS.pop(key, None)


def source_of(address: str | None) -> str:
    """The source a failed sign-in is counted against: the client's address as the web server
    reports it (behind a proxy on the same host, the address the proxy puts in X-Forwarded-For);
    an IPv6 address by its /64, which one machine usually holds whole. None (a client on this
    host, with no proxy's word) is "this host"."""
    if not address:
        return "this host"
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address[:64]
    if ip.version == 6:
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


class Throttle:
    """Failed sign-ins, limited per browser session, per source address and for the whole dashboard.

    A session gets `per_session` failures per `window_s`, a source address `per_source`. Past
    `overall` failures in the window (guessing from several addresses), every address that has
    failed in the window waits; an address that has not may still sign in, so no one address can
    lock the operators out. Past `ceiling` failures everyone waits: guessing stays bounded however
    many addresses it comes from. While a limit holds, passwords are not even checked."""

    def __init__(self, per_session: int = 5, overall: int = 20, window_s: float = 300.0, per_source: int = 10,
                 ceiling: int | None = None):
        self.per_session, self.per_source, self.overall, self.window_s = per_session, per_source, overall, window_s
        self.ceiling = 3 * overall if ceiling is None else ceiling
        self._by_session: dict[str, deque[float]] = {}
        self._by_source: dict[str, deque[float]] = {}
        self._all: deque[float] = deque()
        self._lock = threading.Lock()

    def _trim(self, q: deque[float], now: float) -> None:
        while q and q[0] <= now - self.window_s:
            q.popleft()

    def _recent(self, table: dict[str, deque[float]], key: str, now: float) -> deque[float]:
        q = table.get(key) or deque()
        self._trim(q, now)
        return q

    def blocked(self, session_id: str, source: str = "this host", now: float | None = None) -> str | None:
        """Why sign-in is refused right now, or None."""
        now = time.time() if now is None else now
        with self._lock:
            mine = self._recent(self._by_session, session_id, now)
            theirs = self._recent(self._by_source, source, now)
            self._trim(self._all, now)
            if len(mine) >= self.per_session:
                return (f"too many failed sign-ins in this session: wait {duration(mine[0] + self.window_s - now)} "
                        "before trying again")
            if len(theirs) >= self.per_source:
                return (f"too many failed sign-ins from your address ({source}): wait "
                        f"{duration(theirs[0] + self.window_s - now)} before trying again")
            if len(self._all) >= self.ceiling:
                return (f"too many failed sign-ins on this dashboard, from many addresses: every sign-in waits "
                        f"{duration(self._all[0] + self.window_s - now)}")
            if len(self._all) >= self.overall and theirs:
                return (f"too many failed sign-ins on this dashboard, from several addresses: sign-ins from an "
                        f"address that has failed wait {duration(min(theirs[-1], self._all[-self.overall]) + self.window_s - now)}")
        return None

    def failed(self, session_id: str, source: str = "this host", now: float | None = None) -> None:
        now = time.time() if now is None else now
        with self._lock:
            for table, key in ((self._by_session, session_id), (self._by_source, source)):
                if len(table) > 1000:  # forget the keys whose failures are all past the window
                    for k in [k for k, q in table.items() if not q or q[-1] <= now - self.window_s]:
                        del table[k]
                table.setdefault(key, deque()).append(now)
            self._all.append(now)


THROTTLE = Throttle()
