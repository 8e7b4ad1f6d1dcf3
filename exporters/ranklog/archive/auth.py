"""Bearer-token authentication against a tokens file (one token per line, `#` comments allowed).

The file is re-read when its mtime, size or inode changes (checked at most every 0.5 s), so adding
or revoking a token needs no restart. Tokens are compared in constant time against every entry
(`hmac.compare_digest`, no early exit on the first match), and never logged: log lines name only
the file. A file that cannot be read keeps the last good token set (and says so in the log) rather
than locking every agent out; an empty file accepts nobody.
"""

from __future__ import annotations

import hmac
import logging
import os
import threading
import time

log = logging.getLogger("ranklog.archive.auth")


class TokenStore:
    def __init__(self, path: str, check_every: float = 0.5) -> None:
        self.path = path
        self.check_every = check_every
        self._tokens: tuple[bytes, ...] = ()
        self._identity: tuple[int, int, int] | None = None
        self._checked = -1e9
        self._lock = threading.Lock()
        self._reload(force=True)

    def _reload(self, force: bool = False) -> None:
        try:
            st = os.stat(self.path)
        except OSError as exc:
            if force:
                raise OSError(f"cannot read token file {self.path}: {exc.strerror}") from None
            log.error("token file %s unreadable (%s); keeping the previous tokens", self.path, exc.strerror)
            return
        identity = (st.st_ino, st.st_size, st.st_mtime_ns)
        if identity == self._identity and not force:
            return
        try:
            with open(self.path, "rb") as handle:
                lines = handle.read().splitlines()
        except OSError as exc:
            if force:
                raise OSError(f"cannot read token file {self.path}: {exc.strerror}") from None
            log.error("token file %s unreadable (%s); keeping the previous tokens", self.path, exc.strerror)
            return
        tokens = tuple(line.strip() for line in lines if line.strip() and not line.strip().startswith(b"#"))
        self._tokens, self._identity = tokens, identity
        log.info("loaded %d token(s) from %s", len(tokens), self.path)

    def _refresh(self) -> None:
        now = time.monotonic()
        if now - self._checked < self.check_every:
            return
        with self._lock:
            if now - self._checked >= self.check_every:
                self._checked = now
                self._reload()

    def check(self, authorization: str | None) -> bool:
        """True when the `Authorization` header carries a current token."""
        self._refresh()
        if not authorization:
            return False
        scheme, _, presented = authorization.partition(" ")
        if scheme.lower() != "bearer" or not presented.strip():
            return False
        candidate = presented.strip().encode("utf-8", "surrogateescape")
        matched = False
        for token in self._tokens:
            matched |= hmac.compare_digest(candidate, token)
        return matched
