"""Secret files in CORRAL_HOME: the agents' channel keys and HTTP tokens.

Each is 64 lower-case hex characters (32 random bytes), mode 0600, owned by the user
that runs corral. Creation is race-safe between processes: the secret is written to a
private file opened with O_EXCL, then published under its final name with link(2),
which, like O_EXCL, never replaces an existing file or follows a symlink; so whichever
process comes first creates it, the others read it, and nobody reads half a secret.
Every read checks the file: a regular file, this user's, no access for group or others.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
from pathlib import Path

from orchestrator.errors import KeyFileError

SECRET_BYTES = 32
_SECRET_RE = re.compile(r"[0-9a-f]{64}", re.ASCII)


def load_or_create_secret(path: Path) -> str:
    """The secret in `path` (64 hex characters), created there first if absent."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        return read_secret(path)
    except FileNotFoundError:
        pass
    temp = _write_private(path)
    try:
        with contextlib.suppress(FileExistsError):  # another process won the race: use its
            os.link(temp, path)
    finally:
        temp.unlink(missing_ok=True)
    return read_secret(path)


def replace_secret(path: Path) -> str:
    """Write a new secret to `path` and return it. The new one is written privately, then
    renamed over the old (rename replaces a symlink itself, never its target)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temp = _write_private(path)
    try:
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)
    return read_secret(path)


def _write_private(path: Path) -> Path:
    temp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(8)}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, secrets.token_hex(SECRET_BYTES).encode("ascii"))
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        temp.unlink(missing_ok=True)
        raise
    os.close(fd)
    return temp


def read_secret(path: Path) -> str:
    """Read and check a secret file. FileNotFoundError passes through; every other problem
    is a KeyFileError that says how to fix it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise  # the caller creates it
    except OSError as exc:
        raise KeyFileError(path, f"cannot be opened: {exc.strerror}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise KeyFileError(path, "is not a regular file; remove it and run corral again")
        if info.st_uid != os.getuid():
            raise KeyFileError(
                path,
                f"is owned by uid {info.st_uid}, not by this user (uid {os.getuid()}): a "
                "secret someone else wrote could let them in; remove it and run corral "
                "again as the user that runs it",
            )
        mode = stat.S_IMODE(info.st_mode)
        if mode & 0o077:
            raise KeyFileError(
                path,
                f"has mode {mode:04o}: group or others may read this secret; "
                f"run `chmod 600 {path}` (or remove the file to make a new one)",
            )
        raw = os.read(fd, 4 * SECRET_BYTES)
    finally:
        os.close(fd)
    text = raw.decode("ascii", errors="replace").strip()
    if not _SECRET_RE.fullmatch(text):
        raise KeyFileError(
            path, "is not 64 lower-case hex characters; remove it and run corral again"
        )
    return text
