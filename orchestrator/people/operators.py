"""Operators (SPEC S6.1a): named people who approve held actions and take over desktops.

`corral operators add NAME` makes a random token, prints it once and stores only its
SHA-256 (the token is 32 random bytes, so a plain hash is enough: there is nothing to
guess). The file is CORRAL_HOME/operators.json, mode 0600, replaced atomically.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.errors import OperatorError
from orchestrator.home import CorralHome

NAME_RE = re.compile(r"^[a-z][a-z0-9_.-]{0,62}$")
TOKEN_PREFIX = "crl_op_"


@dataclass(frozen=True, slots=True)
class Operator:
    name: str
    created_at: float


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def check_name(name: str) -> str:
    if not NAME_RE.fullmatch(name):
        raise OperatorError(
            f"operator name {name!r}: 1-63 characters, a lower-case letter first, then "
            "lower-case letters, digits, '.', '-' or '_'"
        )
    return name


def _read(path: Path) -> dict[str, dict[str, Any]]:
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise OperatorError(f"{path} cannot be read: {exc.strerror}") from exc
    try:
        data = json.loads(raw)
        operators = data["operators"]
        if not isinstance(operators, dict):
            raise TypeError("operators is not an object")
    except (ValueError, KeyError, TypeError) as exc:
        raise OperatorError(f"{path} is not a corral operators file: {exc}") from exc
    return operators


def _write(path: Path, operators: dict[str, dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(6)}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, json.dumps({"operators": operators}, indent=2).encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)


def add_operator(home: CorralHome, name: str) -> str:
    """Create operator `name`; returns its token (shown once, never stored)."""
    check_name(name)
    operators = _read(home.operators_file)
    if name in operators:
        raise OperatorError(f"operator {name!r} exists (remove it first to issue a new token)")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    operators[name] = {"token_sha256": _digest(token), "created_at": time.time()}
    _write(home.operators_file, operators)
    return token


def remove_operator(home: CorralHome, name: str) -> None:
    operators = _read(home.operators_file)
    if name not in operators:
        raise OperatorError(f"no operator {name!r}")
    del operators[name]
    _write(home.operators_file, operators)


def list_operators(home: CorralHome) -> list[Operator]:
    return [
        Operator(name, float(entry.get("created_at", 0)))
        for name, entry in sorted(_read(home.operators_file).items())
    ]


def operator_for_token(home: CorralHome, token: str) -> str | None:
    """The operator holding `token`, or None. Every entry is compared in constant time."""
    if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
        return None
    digest = _digest(token)
    found = None
    for name, entry in _read(home.operators_file).items():
        if hmac.compare_digest(str(entry.get("token_sha256", "")), digest):
            found = name
    return found
