"""The signed loopback channel between `corral mcp` and `corral gateway` (SPEC S2.2).

Every internal request carries three headers:

    X-Corral-Timestamp   integer unix seconds
    X-Corral-Nonce       32 lower-case hex characters, never reused
    X-Corral-Signature   lower-case hex HMAC-SHA256, with the key in CORRAL_HOME/gateway.key,
                         over METHOD \\n PATH \\n TIMESTAMP \\n NONCE \\n sha256_hex(BODY)

`verify` refuses with `SignatureRefused(reason)`, reason one of `REASONS`
(the prefix "missing header " is followed by the header's name). A nonce is
remembered only after its signature checked out, so someone without the key
cannot burn nonces; a remembered nonce is kept for 60 s, which covers the
whole +-30 s window in which its timestamp is accepted (inclusive, compared in whole
seconds on both sides, as the signer truncates).

Its errors (`KeyFileError`, `SignatureRefused`, `NonceCacheFull`) are the
`SigningError` branch of the tree drawn in `orchestrator/errors.py`.

Everything here is a pure function of its arguments apart from the key file
and the `NonceCache`; the caller passes `now` and the nonce.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import re
import secrets
import stat
import threading
from collections.abc import Mapping
from pathlib import Path

from orchestrator.errors import KeyFileError, NonceCacheFull, SignatureRefused
from orchestrator.home import CorralHome

HEADER_TIMESTAMP = "X-Corral-Timestamp"
HEADER_NONCE = "X-Corral-Nonce"
HEADER_SIGNATURE = "X-Corral-Signature"
SIGNED_HEADERS = (HEADER_TIMESTAMP, HEADER_NONCE, HEADER_SIGNATURE)

KEY_FILE_NAME = "gateway.key"
KEY_BYTES = 32
MAX_SKEW_SECONDS = 30
NONCE_TTL_SECONDS = 60.0
NONCE_CACHE_MAX_ENTRIES = 100_000

REASON_MALFORMED_TIMESTAMP = "malformed timestamp"
REASON_MALFORMED_NONCE = "malformed nonce"
REASON_STALE_TIMESTAMP = "stale timestamp"
REASON_REPLAYED_NONCE = "replayed nonce"
REASON_BAD_SIGNATURE = "bad signature"
REASONS = (
    *(f"missing header {name}" for name in SIGNED_HEADERS),
    REASON_MALFORMED_TIMESTAMP,
    REASON_MALFORMED_NONCE,
    REASON_STALE_TIMESTAMP,
    REASON_REPLAYED_NONCE,
    REASON_BAD_SIGNATURE,
)

_TIMESTAMP_RE = re.compile(r"[0-9]{1,12}", re.ASCII)
_NONCE_RE = re.compile(r"[0-9a-f]{32}", re.ASCII)
_SIGNATURE_RE = re.compile(r"[0-9a-f]{64}", re.ASCII)
_KEY_RE = re.compile(r"[0-9a-f]{64}", re.ASCII)


# ------------------------------------------------------------------------- key
def key_path(home: CorralHome) -> Path:
    return home.root / KEY_FILE_NAME


def load_or_create_key(home: CorralHome) -> bytes:
    """The channel key (32 bytes), from CORRAL_HOME/gateway.key, created there if absent.

    Creation is race-safe between processes: the 64 hex characters are written
    to a private file opened with O_EXCL, mode 0600, then published under the
    final name with link(2), which like O_EXCL never replaces an existing file
    or follows a symlink. So whichever side comes first creates the key, the
    other reads it, and nobody ever reads a half-written key.
    """
    path = key_path(home)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        return _read_key(path)
    except FileNotFoundError:
        pass
    _publish_new_key(path)
    return _read_key(path)


def rotate_key(home: CorralHome) -> bytes:
    """Replace CORRAL_HOME/gateway.key with a new random key and return it.

    The new key is written to a private 0600 file opened with O_EXCL, then renamed over
    the old one (rename replaces a symlink itself, never its target). Every `corral mcp`
    reads the key per call, so they sign with the new key from their next call; a
    gateway already running keeps the old key until it restarts."""
    path = key_path(home)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temp = _write_private_key(path)
    try:
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)
    return _read_key(path)


def _write_private_key(path: Path) -> Path:
    temp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(8)}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, secrets.token_hex(KEY_BYTES).encode("ascii"))
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        temp.unlink(missing_ok=True)
        raise
    os.close(fd)
    return temp


def _publish_new_key(path: Path) -> None:
    temp = _write_private_key(path)
    try:
        with contextlib.suppress(FileExistsError):  # another process won the race: use its key
            os.link(temp, path)
    finally:
        temp.unlink(missing_ok=True)


def _read_key(path: Path) -> bytes:
    """Read and check the key file. FileNotFoundError passes through; every other problem
    is a KeyFileError that says how to fix it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise  # the caller creates the key
    except OSError as exc:
        raise KeyFileError(path, f"cannot be opened: {exc.strerror}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise KeyFileError(path, "is not a regular file; remove it and run corral again")
        if info.st_uid != os.getuid():
            raise KeyFileError(
                path,
                f"is owned by uid {info.st_uid}, not by this user (uid {os.getuid()}): a key "
                "someone else wrote could let them sign requests; remove it and run corral "
                "again as the user that runs the gateway",
            )
        mode = stat.S_IMODE(info.st_mode)
        if mode & 0o077:
            raise KeyFileError(
                path,
                f"has mode {mode:04o}: group or others may access the gateway key; "
                f"run `chmod 600 {path}` (or remove the file to make a new key)",
            )
        raw = os.read(fd, 4 * KEY_BYTES)
    finally:
        os.close(fd)
    text = raw.decode("ascii", errors="replace").strip()
    if not _KEY_RE.fullmatch(text):
        raise KeyFileError(
            path, "is not 64 lower-case hex characters; remove it and restart the gateway"
        )
    return bytes.fromhex(text)


# ------------------------------------------------------------------ signatures
def new_nonce() -> str:
    return secrets.token_hex(16)


def canonical(method: str, path: str, timestamp: str, nonce: str, body: bytes) -> bytes:
    """The signed string: METHOD \\n PATH \\n TIMESTAMP \\n NONCE \\n sha256_hex(BODY)."""
    digest = hashlib.sha256(body).hexdigest()
    text = f"{method.upper()}\n{path}\n{timestamp}\n{nonce}\n{digest}"
    # surrogatepass: a path decoded from arbitrary bytes still encodes; it just won't match.
    return text.encode("utf-8", errors="surrogatepass")


def _mac(key: bytes, message: bytes) -> str:
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def sign(
    key: bytes, method: str, path: str, body: bytes, *, now: float, nonce: str
) -> dict[str, str]:
    """The three headers that authenticate one request."""
    timestamp = str(int(now))
    return {
        HEADER_TIMESTAMP: timestamp,
        HEADER_NONCE: nonce,
        HEADER_SIGNATURE: _mac(key, canonical(method, path, timestamp, nonce, body)),
    }


def verify(
    key: bytes,
    method: str,
    path: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    now: float,
    nonces: NonceCache,
) -> None:
    """Return if the request is authentic and fresh; otherwise raise SignatureRefused.

    Raises NonceCacheFull (not a refusal of the signature) when the nonce
    cannot be remembered; the caller should answer "try again later".
    """
    lowered = {name.lower(): value for name, value in headers.items()}
    values = []
    for name in SIGNED_HEADERS:
        value = lowered.get(name.lower())
        if value is None:
            raise SignatureRefused(f"missing header {name}")
        values.append(value)
    timestamp, nonce, signature = values
    if not _TIMESTAMP_RE.fullmatch(timestamp):
        raise SignatureRefused(REASON_MALFORMED_TIMESTAMP)
    if not _NONCE_RE.fullmatch(nonce):
        raise SignatureRefused(REASON_MALFORMED_NONCE)
    # Whole seconds on both sides (the signer truncates too), inclusive: +-30 s is fresh.
    if abs(int(now) - int(timestamp)) > MAX_SKEW_SECONDS:
        raise SignatureRefused(REASON_STALE_TIMESTAMP)
    expected = _mac(key, canonical(method, path, timestamp, nonce, body))
    # The format check keeps compare_digest on ASCII strings (it raises TypeError otherwise).
    if not _SIGNATURE_RE.fullmatch(signature) or not hmac.compare_digest(expected, signature):
        raise SignatureRefused(REASON_BAD_SIGNATURE)
    if not nonces.add(nonce, now):
        raise SignatureRefused(REASON_REPLAYED_NONCE)


# ---------------------------------------------------------------------- nonces
class NonceCache:
    """Nonces seen in the last `ttl` seconds, at most `max_entries` of them.

    Expired entries are pruned on every insert (oldest first: entries are kept
    in insertion order). When full, `add` raises NonceCacheFull instead of
    forgetting a nonce that could then be replayed. Safe to share between threads.
    """

    def __init__(
        self, ttl: float = NONCE_TTL_SECONDS, max_entries: int = NONCE_CACHE_MAX_ENTRIES
    ) -> None:
        self.ttl = ttl
        self.max_entries = max_entries
        self._expiry: dict[str, float] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._expiry)

    def add(self, nonce: str, now: float) -> bool:
        """Remember `nonce`; False if it is already remembered (a replay)."""
        with self._lock:
            self._prune(now)
            if nonce in self._expiry:
                return False
            if len(self._expiry) >= self.max_entries:
                raise NonceCacheFull(
                    f"more than {self.max_entries} internal requests in {self.ttl:g} s"
                )
            self._expiry[nonce] = now + self.ttl
            return True

    def _prune(self, now: float) -> None:
        # If the clock went backwards, pruning stops early: nonces are kept longer, never less.
        while self._expiry:
            oldest, expiry = next(iter(self._expiry.items()))
            if expiry > now:
                return
            del self._expiry[oldest]
