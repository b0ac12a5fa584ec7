"""The signed loopback channel between `corral mcp` and `corral gateway` (SPEC S2.2).

Every internal request carries three headers:

    X-Corral-Timestamp   integer unix seconds
    X-Corral-Nonce       32 lower-case hex characters, never reused
    X-Corral-Signature   lower-case hex HMAC-SHA256, with the channel key of the agent the
                         body names (CORRAL_HOME/channel/AGENT.key), over
                         METHOD \\n PATH \\n TIMESTAMP \\n NONCE \\n sha256_hex(BODY)

One channel key per agent: a `corral mcp` process loads only its own agent's key, and the
gateway checks every request with the key of the agent named in its body, so a key
reaches only the agent routes and only as its own agent (a body naming another agent does
not verify). The operators' admin API takes no channel key at all: it wants an
operator's token (orchestrator.gateway.admin_api).

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

import functools
import hashlib
import hmac
import re
import secrets
import threading
from collections.abc import Mapping
from pathlib import Path

from orchestrator.agents.secret_files import load_or_create_secret, read_secret, replace_secret
from orchestrator.config import AGENT_NAME_RE
from orchestrator.errors import NonceCacheFull, SignatureRefused
from orchestrator.home import CorralHome

HEADER_TIMESTAMP = "X-Corral-Timestamp"
HEADER_NONCE = "X-Corral-Nonce"
HEADER_SIGNATURE = "X-Corral-Signature"
SIGNED_HEADERS = (HEADER_TIMESTAMP, HEADER_NONCE, HEADER_SIGNATURE)

KEY_DIR_NAME = "channel"
MAX_SKEW_SECONDS = 30
NONCE_TTL_SECONDS = 60.0
NONCE_CACHE_MAX_ENTRIES = 100_000

REASON_MALFORMED_TIMESTAMP = "malformed timestamp"
REASON_MALFORMED_NONCE = "malformed nonce"
REASON_STALE_TIMESTAMP = "stale timestamp"
REASON_REPLAYED_NONCE = "replayed nonce"
REASON_BAD_SIGNATURE = "bad signature"
REASON_NO_AGENT_KEY = "no channel key for the agent the body names"
REASONS = (
    *(f"missing header {name}" for name in SIGNED_HEADERS),
    REASON_MALFORMED_TIMESTAMP,
    REASON_MALFORMED_NONCE,
    REASON_STALE_TIMESTAMP,
    REASON_REPLAYED_NONCE,
    REASON_BAD_SIGNATURE,
    REASON_NO_AGENT_KEY,
)

_TIMESTAMP_RE = re.compile(r"[0-9]{1,12}", re.ASCII)
_NONCE_RE = re.compile(r"[0-9a-f]{32}", re.ASCII)
_SIGNATURE_RE = re.compile(r"[0-9a-f]{64}", re.ASCII)


# ------------------------------------------------------------------------- key
def key_path(home: CorralHome, agent: str) -> Path:
    """CORRAL_HOME/channel/AGENT.key; ValueError for a name that is not an agent's (so no
    name can point outside that directory)."""
    return _key_path(home.root, agent)


@functools.lru_cache(maxsize=256)  # read at every signed request, on both sides of it
def _key_path(root: Path, agent: str) -> Path:
    if not AGENT_NAME_RE.fullmatch(agent):
        raise ValueError(f"{agent!r} is not a valid agent name")
    return root / KEY_DIR_NAME / f"{agent}.key"


def load_or_create_key(home: CorralHome, agent: str) -> bytes:
    """`agent`'s channel key (32 bytes), created if absent (race-safe between processes,
    0600, checked on every read: `orchestrator.agents.secret_files`). `corral mcp` calls this for
    its own agent; the gateway only reads (`read_key`)."""
    return bytes.fromhex(load_or_create_secret(key_path(home, agent)))


def read_key(home: CorralHome, agent: str) -> bytes | None:
    """`agent`'s channel key, or None if it has none yet (or the name is not an agent's).
    Read per request, so a rotation takes effect at once; a KeyFileError (a key another
    user owns, a loose mode) passes through."""
    try:
        return bytes.fromhex(read_secret(key_path(home, agent)))
    except (FileNotFoundError, ValueError):
        return None


def rotate_keys(home: CorralHome) -> list[str]:
    """Give every agent that has a channel key a new one; the agents' names. Every `corral
    mcp` and the gateway read the key per call, so the old keys stop working at once."""
    folder = home.root / KEY_DIR_NAME
    found = sorted(p.stem for p in folder.glob("*.key")) if folder.is_dir() else []
    agents = [name for name in found if AGENT_NAME_RE.fullmatch(name)]
    for agent in agents:
        replace_secret(key_path(home, agent))
    return agents


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
    key: bytes | None,
    method: str,
    path: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    now: float,
    nonces: NonceCache,
) -> None:
    """Return if the request is authentic and fresh; otherwise raise SignatureRefused.
    `key` is None when the agent the body names has no channel key.

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
    if key is None:
        raise SignatureRefused(REASON_NO_AGENT_KEY)
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
