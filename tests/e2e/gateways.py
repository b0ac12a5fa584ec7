"""A real `corral gateway` process for e2e tests: started on a free port with the given
config, healthy before the test runs, stopped with SIGTERM (every session removed)."""

from __future__ import annotations

import signal
import subprocess
import tempfile
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

import httpx

from orchestrator.home import CorralHome
from tests.e2e.conftest import free_port, wait_until
from tests.helpers import corral_bin, env_with_home

# The stacks a gateway dumped when its stop was stuck, kept across tests and runs.
STUCK_LOG = Path(tempfile.gettempdir()) / "corral-stuck-gateways.log"


@asynccontextmanager
async def running_gateway(
    home: CorralHome,
    config: str = "",
    *,
    recording: bool = False,
    environ: Mapping[str, str | None] | None = None,
) -> AsyncIterator[tuple[str, int]]:
    """(base URL, pid) of a gateway whose config.toml is `[gateway] port` + `config`.
    Recording (on by default in the product) is off unless `recording`: the tests of
    recordings and of the rigs' recordings turn it on; the rest need not pay for it.
    `environ` changes the gateway's environment (None: the variable removed); the tests'
    own sets CORRAL_WARM_DEFAULT=0 (tests/images.py): no warm pool unless asked."""
    port = free_port()
    off = "" if recording or "[recording]" in config else "\n[recording]\nenabled = false\n"
    home.config_file.write_text(f"[gateway]\nport = {port}\n\n{config}{off}")
    # stderr goes to a file, never a pipe nobody reads while the gateway runs: a full pipe
    # would block the gateway on its next log line (and then its shutdown).
    log = home.root / "gateway.stderr"
    env = env_with_home(home)
    for name, value in (environ or {}).items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [corral_bin(), "gateway"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    base = f"http://127.0.0.1:{port}"

    async def healthy() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"gateway exited: {log.read_text(errors='replace')}")
        try:
            async with httpx.AsyncClient() as client:
                return (await client.get(f"{base}/healthz")).status_code == 200
        except httpx.TransportError:
            return False

    try:
        await wait_until(healthy, limit=30)
        yield base, proc.pid
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        told = log.read_text(errors="replace")
        # Shown with a failed test's captured output: a traceback, or the stacks of a stop
        # that was stuck (`corral gateway` dumps them, corral_cli/gateway.py).
        if "most recent call first" in told:  # also kept past the test: a slow stop is a bug
            with STUCK_LOG.open("a") as kept:
                kept.write(f"=== {log} ===\n{told[-20000:]}\n")
        if "Traceback" in told or "most recent call first" in told:
            print(f"--- the gateway's stderr ({log}) ---\n{told[-20000:]}")


_TOKENS: dict[tuple[Path, str], str] = {}


def add_operator(home: CorralHome, name: str) -> str:
    """`corral operators add NAME`; its token (the last line it prints), remembered for
    `operator_env`."""
    done = subprocess.run(
        [corral_bin(), "operators", "add", name],
        env=env_with_home(home),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    token = done.stdout.strip().splitlines()[-1]
    _TOKENS[(home.root, name)] = token
    return token


def operator_env(home: CorralHome, name: str) -> dict[str, str]:
    """The environment of a `corral` command run by operator `name` (added first if this
    test has not added it): CORRAL_HOME and CORRAL_OPERATOR_TOKEN."""
    token = _TOKENS.get((home.root, name)) or add_operator(home, name)
    return {**env_with_home(home), "CORRAL_OPERATOR_TOKEN": token}
