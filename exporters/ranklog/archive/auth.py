"""Bearer-token authentication against a tokens file, and what each token may write.

One token per line, `#` comments allowed. A line is either

* ``TOKEN`` — a shared token (trusting mode, for small setups): its holder may write records of any
  host, and all shared tokens share one dedup namespace, so every holder is trusted not to write
  under another node's keys; or
* ``TOKEN IDENTITY [HOST-PATTERN …]`` — a token bound to a node identity: it may write only records
  whose ``host`` matches one of the patterns (exact names or shell globs ``*``, ``?``, ``[…]``;
  no pattern means the identity's own name). Its records' idempotency keys live in the identity's
  own namespace, so no other token can shadow them (issue 20: a forged ``source_id`` at offset 0
  once made the archive drop a node's real record as a duplicate).

Several tokens may name one identity (rotation: old and new token for a while); one token with two
identities is an error. Identities are letters, digits, ``.``, ``_``, ``-``.

The file is re-read when its mtime, size or inode changes (checked at most every 0.5 s), so adding
or revoking a token needs no restart. Tokens are compared in constant time against every entry
(`hmac.compare_digest`, no early exit on the first match), and never logged: log lines name only
the file, line numbers and identities. A file that cannot be read or holds a bad line keeps the last
good token set (and says so in the log) rather than locking every agent out; at start it fails.
An empty file accepts nobody.

A token is presented as ``Authorization: Bearer TOKEN``, or as HTTP basic auth for clients that can
only do that (python-logging-loki, Promtail's ``basic_auth``, Grafana's basic-auth datasource
setting): ``Authorization: Basic base64(USER:TOKEN)`` — the password is the token and the user
name is free (it is logged nowhere); with an empty password the user name is taken as the token
(``curl -u TOKEN:``). The same token, the same identity, the same comparison.
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
import hmac
import logging
import os
import re
import threading
import time
from dataclasses import dataclass

from .. import token_file

log = logging.getLogger("ranklog.archive.auth")
_IDENTITY = re.compile(r"^[A-Za-z0-9._-]+$")


@dataclass(frozen=True)
class Caller:
    """Who an accepted token belongs to: `identity` None for a shared token (may write any host)."""

    identity: str | None = None
    hosts: tuple[str, ...] = ()

    def may_write(self, host: str) -> bool:
        return self.identity is None or any(fnmatch.fnmatchcase(host, pattern) for pattern in self.hosts)

    def describe(self) -> str:
        return "a shared token" if self.identity is None else f"identity {self.identity!r}"


SHARED = Caller()


def foreign_hosts(hosts: list[str | None], caller: Caller) -> list[str]:
    """The distinct `hosts` values `caller` may not write. A record without a host claims no node
    and is allowed (its keys are in the caller's namespace anyway)."""
    if caller.identity is None:
        return []
    return sorted({host for host in hosts if host and not caller.may_write(host)})


class TokenFileError(ValueError):
    """A tokens file line that cannot be used (the message names the line, never the token)."""


def parse_tokens(lines: list[bytes], path: str) -> tuple[tuple[bytes, Caller], ...]:
    """(token, caller) per line of a tokens file; TokenFileError on a malformed line."""
    entries: dict[bytes, Caller] = {}
    for number, raw in enumerate(lines, 1):
        fields = raw.split()
        if not fields or fields[0].startswith(b"#"):
            continue
        token, rest = fields[0], [f.decode("utf-8", "replace") for f in fields[1:]]
        caller = SHARED
        if rest:
            identity, patterns = rest[0], tuple(rest[1:]) or (rest[0],)
            if not _IDENTITY.match(identity):
                raise TokenFileError(f"{path}:{number}: identity {identity!r} must be letters, digits, '.', '_', '-'")
            caller = Caller(identity, patterns)
        if entries.get(token, caller) != caller:
            raise TokenFileError(f"{path}:{number}: this token is already listed with another identity")
        entries[token] = caller
    return tuple(entries.items())


def presented_token(authorization: str | None) -> bytes | None:
    """The token an `Authorization` header presents: a bearer token, or the password (else the user
    name) of basic auth."""
    if not authorization:
        return None
    scheme, _, presented = authorization.strip().partition(" ")
    presented = presented.strip()
    if not presented:
        return None
    if scheme.lower() == "bearer":
        return presented.encode("utf-8", "surrogateescape")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(presented.encode("ascii"), validate=True)
    except (binascii.Error, ValueError, UnicodeEncodeError):
        return None
    user, colon, password = decoded.partition(b":")
    token = (password if password else user) if colon else b""
    return token.strip() or None


class TokenStore:
    def __init__(self, path: str, check_every: float = 0.5, exposed_gauge=None) -> None:
        self.path = path
        self.check_every = check_every
        self._entries: tuple[tuple[bytes, Caller], ...] = ()
        self._identity: tuple[int, int, int, int] | None = None
        self._checked = -1e9
        self._lock = threading.Lock()
        self.exposed_gauge = exposed_gauge  # ranklog_token_file_insecure (token_file)
        self._reload(force=True)

    def _reload(self, force: bool = False) -> None:
        try:
            st = os.stat(self.path)
            identity = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_mode)  # (a chmod is seen too)
            if identity == self._identity and not force:
                return
            with open(self.path, "rb") as handle:
                entries = parse_tokens(handle.read().splitlines(), self.path)
        except (OSError, TokenFileError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else str(exc)
            if force:
                raise OSError(f"cannot use token file {self.path}: {why}") from None
            log.error("token file %s unusable (%s); keeping the previous tokens", self.path, why)
            return
        self._entries, self._identity = entries, identity
        token_file.check(self.path, st.st_mode, self.exposed_gauge)
        bound = sum(caller.identity is not None for _, caller in entries)
        log.info("loaded %d token(s) from %s (%d bound to node identities, %d shared)", len(entries), self.path,
                 bound, len(entries) - bound)

    def refresh(self) -> None:
        """Re-read the file if it changed (also its mode: ranklog_token_file_insecure follows a chmod)."""
        self._refresh()

    def _refresh(self) -> None:
        now = time.monotonic()
        if now - self._checked < self.check_every:
            return
        with self._lock:
            if now - self._checked >= self.check_every:
                self._checked = now
                self._reload()

    def identify(self, authorization: str | None) -> Caller | None:
        """The caller of a current token in the `Authorization` header (bearer or basic), or None."""
        self._refresh()
        candidate = presented_token(authorization)
        if candidate is None:
            return None
        found: Caller | None = None
        for token, caller in self._entries:  # every entry, no early exit
            if hmac.compare_digest(candidate, token):
                found = caller
        return found

    def check(self, authorization: str | None) -> bool:
        """True when the `Authorization` header carries a current token."""
        return self.identify(authorization) is not None
