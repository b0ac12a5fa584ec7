"""The signed loopback channel (SPEC S2.2, docs/kiosk-internals.md s1): key file, signatures,
freshness, replay."""

from __future__ import annotations

import hashlib
import hmac
import os
import stat
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.errors import KeyFileError, NonceCacheFull, SignatureRefused
from orchestrator.gateway.signing import (
    HEADER_NONCE,
    HEADER_SIGNATURE,
    HEADER_TIMESTAMP,
    REASONS,
    NonceCache,
    canonical,
    key_path,
    load_or_create_key,
    new_nonce,
    read_key,
    rotate_keys,
    sign,
    verify,
)
from orchestrator.home import CorralHome

pytestmark = pytest.mark.unit

KEY = bytes(range(32))
NOW = 1_700_000_000.0
PATH = "/api/internal/computer-use"
BODY = b'{"agent":"alice","tool":"computer_click","arguments":{"x":1,"y":2}}'
AGENT = "alice"


def signed(body: bytes = BODY, *, now: float = NOW, nonce: str | None = None) -> dict[str, str]:
    return sign(KEY, "POST", PATH, body, now=now, nonce=nonce or new_nonce())


def refusal(
    headers: dict[str, str],
    *,
    body: bytes = BODY,
    method: str = "POST",
    path: str = PATH,
    now: float = NOW,
    nonces: NonceCache | None = None,
    key: bytes = KEY,
) -> str:
    with pytest.raises(SignatureRefused) as caught:
        verify(key, method, path, headers, body, now=now, nonces=nonces or NonceCache())
    return caught.value.reason


# ------------------------------------------------------------------ signatures
def test_canonical_string_is_method_path_timestamp_nonce_and_body_digest() -> None:
    nonce = "ab" * 16
    expected = f"POST\n{PATH}\n1700000000\n{nonce}\n{hashlib.sha256(BODY).hexdigest()}".encode()
    assert canonical("POST", PATH, "1700000000", nonce, BODY) == expected


def test_signature_is_lowercase_hex_hmac_sha256_of_the_canonical_string() -> None:
    nonce = "cd" * 16
    headers = sign(KEY, "POST", PATH, BODY, now=NOW + 0.9, nonce=nonce)

    assert headers[HEADER_TIMESTAMP] == "1700000000"
    assert headers[HEADER_NONCE] == nonce
    message = canonical("POST", PATH, "1700000000", nonce, BODY)
    assert headers[HEADER_SIGNATURE] == hmac.new(KEY, message, hashlib.sha256).hexdigest()


def test_a_valid_signature_is_accepted() -> None:
    verify(KEY, "POST", PATH, signed(), BODY, now=NOW, nonces=NonceCache())


def test_header_names_are_matched_case_insensitively() -> None:
    headers = {name.lower(): value for name, value in signed().items()}
    verify(KEY, "POST", PATH, headers, BODY, now=NOW, nonces=NonceCache())


@pytest.mark.parametrize("name", [HEADER_TIMESTAMP, HEADER_NONCE, HEADER_SIGNATURE])
def test_a_missing_header_is_refused_naming_the_header(name: str) -> None:
    headers = signed()
    del headers[name]
    assert refusal(headers) == f"missing header {name}"


@pytest.mark.parametrize("value", ["", "-5", "1.5", "17e8", " 1700000000", "1700000000\n", "٣"])
def test_a_timestamp_that_is_not_integer_seconds_is_malformed(value: str) -> None:
    headers = signed()
    headers[HEADER_TIMESTAMP] = value
    assert refusal(headers) == "malformed timestamp"


@pytest.mark.parametrize("value", ["", "ab" * 15, "AB" * 16, "zz" * 16, "ab" * 17])
def test_a_nonce_that_is_not_32_lowercase_hex_is_malformed(value: str) -> None:
    headers = signed()
    headers[HEADER_NONCE] = value
    assert refusal(headers) == "malformed nonce"


@pytest.mark.parametrize("offset", [-31, 31, -3600, 3600])
def test_a_timestamp_more_than_30_seconds_from_now_is_stale(offset: int) -> None:
    assert refusal(signed(now=NOW + offset)) == "stale timestamp"


@pytest.mark.parametrize("offset", [-30, -29, 29, 30])
def test_a_timestamp_within_30_seconds_of_now_is_accepted(offset: int) -> None:
    verify(KEY, "POST", PATH, signed(now=NOW + offset), BODY, now=NOW, nonces=NonceCache())


def test_a_body_altered_after_signing_is_refused() -> None:
    headers = signed()
    assert refusal(headers, body=BODY.replace(b'"x":1', b'"x":9')) == "bad signature"


def test_a_path_altered_after_signing_is_refused() -> None:
    assert refusal(signed(), path="/api/internal/other") == "bad signature"


def test_a_method_altered_after_signing_is_refused() -> None:
    assert refusal(signed(), method="PUT") == "bad signature"


def test_a_signature_made_with_another_key_is_refused() -> None:
    assert refusal(signed(), key=b"k" * 32) == "bad signature"


@pytest.mark.parametrize("value", ["", "00" * 32, "AB" * 32, "é" * 64, "ab" * 31])
def test_a_wrong_or_malformed_signature_is_a_bad_signature(value: str) -> None:
    headers = signed()
    headers[HEADER_SIGNATURE] = value
    assert refusal(headers) == "bad signature"


def test_a_replayed_nonce_is_refused() -> None:
    nonces = NonceCache()
    headers = signed()
    verify(KEY, "POST", PATH, headers, BODY, now=NOW, nonces=nonces)

    assert refusal(headers, nonces=nonces, now=NOW + 5) == "replayed nonce"


def test_a_refused_request_does_not_burn_its_nonce() -> None:
    nonces = NonceCache()
    nonce = new_nonce()
    forged = signed(nonce=nonce)
    forged[HEADER_SIGNATURE] = "00" * 32
    assert refusal(forged, nonces=nonces) == "bad signature"

    verify(KEY, "POST", PATH, signed(nonce=nonce), BODY, now=NOW, nonces=nonces)


def test_every_reason_is_one_of_the_documented_reasons() -> None:
    assert set(REASONS) == {
        "missing header X-Corral-Timestamp",
        "missing header X-Corral-Nonce",
        "missing header X-Corral-Signature",
        "malformed timestamp",
        "malformed nonce",
        "stale timestamp",
        "replayed nonce",
        "bad signature",
        "no channel key for the agent the body names",
    }


# ---------------------------------------------------------------------- nonces
def test_a_nonce_is_remembered_for_60_seconds_then_forgotten() -> None:
    cache = NonceCache()
    assert cache.add("a" * 32, NOW)
    assert not cache.add("a" * 32, NOW + 59.9)
    assert cache.add("a" * 32, NOW + 60)


def test_expired_nonces_are_pruned_on_insert() -> None:
    cache = NonceCache()
    for i in range(10):
        cache.add(f"{i:032x}", NOW)
    cache.add("f" * 32, NOW + 61)
    assert len(cache) == 1


def test_a_full_nonce_cache_refuses_rather_than_forgets() -> None:
    cache = NonceCache(max_entries=2)
    cache.add("1" * 32, NOW)
    cache.add("2" * 32, NOW)
    with pytest.raises(NonceCacheFull):
        cache.add("3" * 32, NOW + 1)
    assert not cache.add("1" * 32, NOW + 1), "the first nonce must still be remembered"
    assert cache.add("3" * 32, NOW + 60), "room again once the old ones expired"


# ------------------------------------------------------------------------- key
def test_the_key_file_is_created_with_mode_0600_and_64_hex_chars(corral_home: CorralHome) -> None:
    key = load_or_create_key(corral_home, AGENT)

    path = key_path(corral_home, AGENT)
    assert path == corral_home.root / "channel" / "alice.key"
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text()
    assert len(text) == 64
    assert bytes.fromhex(text) == key
    assert len(key) == 32


def test_the_key_file_is_reused_not_replaced(corral_home: CorralHome) -> None:
    first = load_or_create_key(corral_home, AGENT)
    inode = key_path(corral_home, AGENT).stat().st_ino

    assert load_or_create_key(corral_home, AGENT) == first
    assert key_path(corral_home, AGENT).stat().st_ino == inode


def test_the_key_is_created_in_a_home_that_does_not_exist_yet(tmp_path: Path) -> None:
    home = CorralHome(root=tmp_path / "fresh" / "home")
    assert len(load_or_create_key(home, AGENT)) == 32


def test_concurrent_first_loads_agree_on_one_key(corral_home: CorralHome) -> None:
    keys: list[bytes] = []
    barrier = threading.Barrier(8)

    def load() -> None:
        barrier.wait()
        keys.append(load_or_create_key(corral_home, AGENT))

    threads = [threading.Thread(target=load) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(keys) == 8
    assert len(set(keys)) == 1
    assert sorted(p.name for p in (corral_home.root / "channel").iterdir()) == ["alice.key"]


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_a_key_file_readable_by_group_or_others_is_refused(
    corral_home: CorralHome, mode: int
) -> None:
    load_or_create_key(corral_home, AGENT)
    path = key_path(corral_home, AGENT)
    path.chmod(mode)

    with pytest.raises(KeyFileError) as caught:
        load_or_create_key(corral_home, AGENT)
    message = str(caught.value)
    assert str(path) in message
    assert f"{mode:04o}" in message
    assert f"chmod 600 {path}" in message


def test_a_key_file_that_is_not_64_hex_chars_is_refused(corral_home: CorralHome) -> None:
    path = key_path(corral_home, AGENT)
    path.parent.mkdir(mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, b"not a key")
    os.close(fd)

    with pytest.raises(KeyFileError, match="64 lower-case hex"):
        load_or_create_key(corral_home, AGENT)


def test_a_key_file_that_is_a_symlink_is_refused(corral_home: CorralHome, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.key"
    target.write_text("ab" * 32)
    target.chmod(0o600)
    key_path(corral_home, AGENT).parent.mkdir(mode=0o700)
    key_path(corral_home, AGENT).symlink_to(target)

    with pytest.raises(KeyFileError, match="cannot be opened"):
        load_or_create_key(corral_home, AGENT)


# -------------------------------------------------------------------- property
_header_names = st.sampled_from(
    [HEADER_TIMESTAMP, HEADER_NONCE, HEADER_SIGNATURE, "x-corral-nonce", "Content-Type"]
) | st.text(max_size=30)
_header_values = (
    st.text(max_size=80)
    | st.integers(min_value=-(10**13), max_value=10**13).map(str)
    | st.binary(min_size=16, max_size=16).map(bytes.hex)
    | st.binary(min_size=32, max_size=32).map(bytes.hex)
)


@given(
    headers=st.dictionaries(_header_names, _header_values, max_size=6),
    body=st.binary(max_size=512),
    method=st.text(max_size=10),
    path=st.text(max_size=60),
    now=st.floats(min_value=0, max_value=4e9),
)
def test_verify_either_accepts_or_refuses_never_anything_else(
    headers: dict[str, str], body: bytes, method: str, path: str, now: float
) -> None:
    try:
        verify(KEY, method, path, headers, body, now=now, nonces=NonceCache())
    except SignatureRefused as exc:
        assert exc.reason in REASONS


@given(body=st.binary(max_size=512), path=st.text(max_size=60), method=st.text(max_size=10))
def test_whatever_is_signed_verifies_with_the_same_inputs(
    body: bytes, path: str, method: str
) -> None:
    headers = sign(KEY, method, path, body, now=NOW, nonce=new_nonce())
    verify(KEY, method, path, headers, body, now=NOW, nonces=NonceCache())


@pytest.mark.parametrize(
    ("signed_at", "checked_at", "fresh"),
    [
        (NOW + 30.999, NOW, True),  # the signer truncates to NOW + 30
        (NOW + 31.0, NOW + 0.999, False),  # 31 whole seconds apart, whatever the fractions
        (NOW - 30.0, NOW + 0.999, True),
        (NOW - 31.0, NOW, False),
    ],
)
def test_the_window_is_counted_in_whole_seconds_on_both_sides(
    signed_at: float, checked_at: float, fresh: bool
) -> None:
    headers = signed(now=signed_at)
    if fresh:
        verify(KEY, "POST", PATH, headers, BODY, now=checked_at, nonces=NonceCache())
    else:
        with pytest.raises(SignatureRefused, match="stale timestamp"):
            verify(KEY, "POST", PATH, headers, BODY, now=checked_at, nonces=NonceCache())


def test_a_key_file_owned_by_another_user_is_refused(
    corral_home: CorralHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    load_or_create_key(corral_home, AGENT)
    me = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: me + 4242)

    with pytest.raises(KeyFileError, match=f"owned by uid {me}, not by this user"):
        load_or_create_key(corral_home, AGENT)


def test_rotating_the_key_replaces_it_privately_and_old_signatures_stop_working(
    corral_home: CorralHome,
) -> None:
    old = load_or_create_key(corral_home, AGENT)
    headers = sign(old, "POST", PATH, BODY, now=NOW, nonce=new_nonce())

    assert rotate_keys(corral_home) == [AGENT]
    new = load_or_create_key(corral_home, AGENT)

    assert new != old
    assert read_key(corral_home, AGENT) == new
    assert stat.S_IMODE(key_path(corral_home, AGENT).stat().st_mode) == 0o600
    assert [p.name for p in key_path(corral_home, AGENT).parent.iterdir()] == ["alice.key"]
    with pytest.raises(SignatureRefused, match="bad signature"):
        verify(new, "POST", PATH, headers, BODY, now=NOW, nonces=NonceCache())


def test_rotating_replaces_a_symlink_never_its_target(
    corral_home: CorralHome, tmp_path: Path
) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("do not touch")
    key_path(corral_home, AGENT).parent.mkdir(mode=0o700)
    key_path(corral_home, AGENT).symlink_to(target)

    rotate_keys(corral_home)

    assert target.read_text() == "do not touch"
    assert not key_path(corral_home, AGENT).is_symlink()


# ------------------------------------------------------------- one key per agent
def test_each_agent_has_its_own_key_and_the_gateway_side_never_creates_one(
    corral_home: CorralHome,
) -> None:
    alice = load_or_create_key(corral_home, "alice")
    bob = load_or_create_key(corral_home, "bob")

    assert alice != bob
    assert read_key(corral_home, "alice") == alice
    assert read_key(corral_home, "carol") is None
    assert not key_path(corral_home, "alice").with_name("carol.key").exists()


@pytest.mark.parametrize("name", ["../gateway", "Alice", "", "a/b", ".hidden"])
def test_a_name_that_is_not_an_agents_has_no_key_path(corral_home: CorralHome, name: str) -> None:
    with pytest.raises(ValueError, match="not a valid agent name"):
        key_path(corral_home, name)
    assert read_key(corral_home, name) is None


def test_a_body_signed_with_another_agents_key_does_not_verify() -> None:
    bob = bytes(reversed(KEY))
    headers = sign(bob, "POST", PATH, BODY, now=NOW, nonce=new_nonce())

    with pytest.raises(SignatureRefused, match="bad signature"):
        verify(KEY, "POST", PATH, headers, BODY, now=NOW, nonces=NonceCache())


def test_no_key_for_the_named_agent_is_its_own_refusal() -> None:
    headers = signed(now=NOW)
    with pytest.raises(SignatureRefused) as caught:
        verify(None, "POST", PATH, headers, BODY, now=NOW, nonces=NonceCache())
    assert caught.value.reason == "no channel key for the agent the body names"
    assert caught.value.reason in REASONS
