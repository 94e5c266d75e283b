"""Minting NKeys and NATS JWTs (operator, account, user) for tests against a server in operator
mode, as `nsc` would: header and claims in base64url, signed with the issuer's ed25519 NKey."""

from __future__ import annotations

import base64
import hashlib
import json
import time
from dataclasses import dataclass

import nacl.signing
import nkeys


@dataclass
class Identity:
    seed: bytes

    @property
    def public(self) -> str:
        return nkeys.from_seed(bytearray(self.seed)).public_key.decode()

    def sign(self, data: bytes) -> bytes:
        return nkeys.from_seed(bytearray(self.seed)).sign(data)


def identity(prefix: int) -> Identity:
    return Identity(nkeys.encode_seed(bytes(nacl.signing.SigningKey.generate()), prefix))


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def mint(issuer: Identity, subject: str, name: str, nats: dict) -> str:
    claims = {"iat": int(time.time()), "iss": issuer.public, "name": name, "sub": subject, "nats": nats}
    claims["jti"] = base64.b32encode(hashlib.sha256(json.dumps(claims).encode()).digest()).decode().rstrip("=")
    head = _b64(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}).encode())
    body = _b64(json.dumps(claims).encode())
    return f"{head}.{body}.{_b64(issuer.sign(f'{head}.{body}'.encode()))}"


def operator_setup() -> tuple[str, str]:
    """A server config in operator mode with one JetStream account, and a user's creds file text."""
    operator = identity(nkeys.PREFIX_BYTE_OPERATOR)
    account = identity(nkeys.PREFIX_BYTE_ACCOUNT)
    user = identity(nkeys.PREFIX_BYTE_USER)
    op_jwt = mint(operator, operator.public, "lab", {"type": "operator", "version": 2})
    unlimited = {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1, "wildcards": True,
                 "conn": -1, "leaf": -1, "mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1}
    acc_jwt = mint(operator, account.public, "APP", {"type": "account", "version": 2, "limits": unlimited,
                                                      "default_permissions": {"pub": {}, "sub": {}}})
    user_jwt = mint(account, user.public, "collector", {"type": "user", "version": 2, "pub": {}, "sub": {},
                                                         "subs": -1, "data": -1, "payload": -1})
    system = identity(nkeys.PREFIX_BYTE_ACCOUNT)  # JetStream will not start without one
    sys_jwt = mint(operator, system.public, "SYS", {"type": "account", "version": 2})
    config = (f"operator: {op_jwt}\nsystem_account: {system.public}\nresolver: MEMORY\n"
              f"resolver_preload: {{\n  {account.public}: {acc_jwt}\n  {system.public}: {sys_jwt}\n}}\n")
    creds = ("-----BEGIN NATS USER JWT-----\n" + user_jwt + "\n------END NATS USER JWT------\n\n"
             "-----BEGIN USER NKEY SEED-----\n" + user.seed.decode() + "\n------END USER NKEY SEED------\n")
    return config, creds
