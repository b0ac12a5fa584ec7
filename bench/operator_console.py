"""Benchmark: the operator console (issue 10): Approve to the agent's call returning, and
the first console input to the AI being frozen.

Run from the repository root:

    .venv/bin/python bench/operator_console.py [--runs 20] [--write docs/benchmarks.md]

One run: a local HTTPS site container (bench/computer_use_site.py's `heavy_site`, serving a
checkout page with "Pay now" at (100..300, 100..180) and "Continue" at (400..600,
100..180)); a throwaway CORRAL_HOME (bench/computer_use.py's `prepare_home`: agent
`bench-web` with computer_use on and the site in allowed_domains; the template's default
confirm_words hold a click on "Pay now"); operator `bench-op` (`corral operators add`);
`corral gateway` as a subprocess; the agent `corral mcp --agent bench-web` over stdio (the
MCP SDK's `Client(..., mode="legacy")`), one kiosk session on the checkout page; the
operator logged in to the console over HTTP (httpx), as a browser would.

1. Approve -> the agent's call returns. The agent clicks "Pay now" (held); the bench polls
   GET /console/api/state until the pending approval shows; t0 just before the decision,
   t1 when the agent's `call_tool` returns. Three ways to decide, in rotating order each
   round: the console's Approve button (POST /console/act/approve/ID with the login's
   X-CSRF-Token), the admin API (what the CLI sends, from this process over its
   open connection), and the CLI (`corral approvals approve ID`, a fresh process).
2. First console input -> the AI is frozen. A live-view WebSocket (/console/sessions/AGENT/
   vnc, the login's cookie, a same-origin Origin) speaks RFB 3.8 as a client (security
   None, shared ClientInit) while the AI holds the seat; t0 just before one PointerEvent
   with button 1 down (which takes the desktop). Agent side: the agent then clicks
   "Continue" back to back until a click is refused ("A person has the desktop"); t1 when
   that answer arrives; the gateway's `takeover` audit event against t0 is recorded in
   the same rounds (an upper bound: its time is cut to the ms, so 1 ms is added).
   Console side, rounds of their own: GET /console/api/state back to back until the
   session's controller is "human". After each round the button is released (mask 0)
   and the desktop handed back (POST /console/act/handback/AGENT).

Every container of the run (the gateway's kiosk and proxy, the site) is removed at the
end, also on an error or Ctrl-C; the run fails if one is left.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import struct
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
from _common import BenchError, run_main, runs_and_write, sigint_ignored, write_section
from computer_use import (
    corral_bin,
    corral_env,
    free_port,
    mcp_params,
    prepare_home,
    rounds,
    running_gateway,
    session_of,
)
from computer_use_paths import (
    WARMUP,
    McpPath,
    Observations,
    Result,
    RowKey,
    TimedCall,
    console,
    key,
    result_text,
)
from computer_use_report import check_leftovers, describe_machine
from computer_use_site import SITE, Routes, heavy_site
from mcp import Client
from operator_console_report import (
    AGENT,
    AGENT_SIDE,
    APPROVE,
    AUDITED,
    BY_ADMIN,
    BY_CLI,
    BY_CONSOLE,
    DEFAULT_RUNS,
    FREEZE,
    OPERATOR,
    POLLED,
    ROWS,
    SECTION,
    Extras,
    markdown_section,
    print_report,
)
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Origin

from orchestrator.backends.owner import read_start_time
from orchestrator.gateway.wire import ADMIN_DECIDE_PATH
from orchestrator.home import CorralHome, Environment
from sandboxes.rfb import pointer_event

CHECKOUT_URL = f"https://{SITE}/checkout"
PAY_NOW = {"x": 200, "y": 140}  # held: its name contains the confirm word "pay"
CONTINUE = {"x": 500, "y": 140}  # not held
PRESS_AT = (900, 600)  # where the operator's button goes down: the empty page
REFUSED = "A person has the desktop"
APPROVAL_POLL_S = 0.005  # polling for the approval to show (outside the timed span)
RAISE_TIMEOUT_S = 30.0
FREEZE_TIMEOUT_S = 10.0
HANDSHAKE_TIMEOUT_S = 30.0
AUDIT_RESOLUTION_S = 0.001  # the audit's times are cut to the ms: the bound adds it

CHECKOUT_PAGE = (
    "<!doctype html><html><head><title>checkout</title><style>body{margin:0;"
    "background:#fff}button{position:absolute;top:100px;width:200px;height:80px}</style>"
    '</head><body><button style="left:100px">Pay now</button>'
    '<button style="left:400px">Continue</button></body></html>'
)


def checkout_routes() -> Routes:
    return {"/checkout": (200, {"Content-Type": "text/html; charset=utf-8"}, CHECKOUT_PAGE)}


# --- the operator's side: the console over HTTP, the live view over RFB ---------------


def add_operator(home: CorralHome) -> str:
    """`corral operators add OPERATOR`; its token is the last line it prints."""
    done = subprocess.run(
        [corral_bin(), "operators", "add", OPERATOR],
        env=corral_env(home),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise BenchError(f"corral operators add failed: {done.stderr.strip()}")
    return lines[-1].strip()


def html_value(pattern: str, page: str, what: str) -> str:
    found = re.search(pattern, page)
    if found is None:
        raise BenchError(f"no {what} in the console's page")
    return found.group(1)


@dataclass
class OperatorConsole:
    http: httpx.AsyncClient
    csrf: str = ""

    async def login(self, token: str) -> None:
        form = await self.http.get("/console/login")
        login_csrf = html_value(r'name="csrf" value="([^"]+)"', form.text, "login form")
        done = await self.http.post("/console/login", data={"csrf": login_csrf, "token": token})
        if done.status_code != 303 or done.headers.get("location") != "/console/":
            raise BenchError(f"the console login failed: HTTP {done.status_code}")
        home = await self.http.get("/console/")
        self.csrf = html_value(r'<meta name="csrf" content="([^"]+)"', home.text, "CSRF token")

    @property
    def cookie(self) -> str:
        value = self.http.cookies.get("corral_console")
        if not value:
            raise BenchError("the console login set no cookie")
        return f"corral_console={value}"

    async def state(self) -> dict[str, Any]:
        answer = await self.http.get("/console/api/state")
        if answer.status_code != 200:
            raise BenchError(f"GET /console/api/state: HTTP {answer.status_code}")
        data: dict[str, Any] = answer.json()
        return data

    async def act(self, what: str, target: str) -> None:
        """What the console's buttons do: POST /console/act/WHAT/TARGET."""
        headers = {"X-CSRF-Token": self.csrf, "Accept": "application/json"}
        answer = await self.http.post(f"/console/act/{what}/{target}", headers=headers)
        if answer.status_code != 200 or answer.json() != {"ok": True}:
            raise BenchError(f"console {what} {target}: HTTP {answer.status_code} {answer.text}")


def controller(state: dict[str, Any]) -> tuple[str, str | None]:
    for session in state["sessions"]:
        if session["agent"] == AGENT:
            return session["controller"], session["holder"]
    raise BenchError(f"{AGENT} has no session in /console/api/state")


@dataclass
class Viewer:
    """A live-view WebSocket speaking RFB 3.8 as a client (what noVNC does)."""

    ws: ClientConnection
    buffer: bytearray = field(default_factory=bytearray)

    async def read(self, size: int) -> bytes:
        while len(self.buffer) < size:
            try:
                data = await self.ws.recv()
            except ConnectionClosed as exc:
                raise BenchError(f"the live view closed during the RFB handshake: {exc}") from exc
            if isinstance(data, str):
                raise BenchError("the live view sent a text frame")
            self.buffer += data
        out = bytes(self.buffer[:size])
        del self.buffer[:size]
        return out

    async def handshake(self) -> tuple[int, int]:
        """Version 3.8, security None, shared ClientInit; the ServerInit's desktop size."""
        version = await self.read(12)
        if not version.startswith(b"RFB 003."):
            raise BenchError(f"not an RFB server: {version!r}")
        await self.ws.send(b"RFB 003.008\n")
        offered = await self.read((await self.read(1))[0])
        if 1 not in offered:
            raise BenchError(f"the VNC server offers no security type None: {list(offered)}")
        await self.ws.send(bytes([1]))
        if struct.unpack(">I", await self.read(4))[0] != 0:
            raise BenchError("the VNC server refused security type None")
        await self.ws.send(b"\x01")  # ClientInit: shared
        width, height = struct.unpack(">HH", await self.read(4))
        await self.read(16)  # the pixel format
        await self.read(struct.unpack(">I", await self.read(4))[0])  # the desktop's name
        return int(width), int(height)

    async def drain(self) -> None:
        """Read (and drop) whatever the server sends until the connection closes."""
        with contextlib.suppress(ConnectionClosed):
            async for _ in self.ws:
                pass

    async def press(self) -> None:
        await self.ws.send(pointer_event(*PRESS_AT, 1))

    async def release(self) -> None:
        await self.ws.send(pointer_event(*PRESS_AT, 0))


@contextlib.asynccontextmanager
async def live_view(base: str, cookie: str) -> AsyncIterator[Viewer]:
    """The live view of AGENT's session, handshake done, the server's bytes drained."""
    url = base.replace("http://", "ws://", 1) + f"/console/sessions/{AGENT}/vnc"
    async with connect(
        url,
        origin=Origin(base),
        additional_headers={"Cookie": cookie},
        compression=None,
        proxy=None,
    ) as ws:
        viewer = Viewer(ws)
        with anyio.fail_after(HANDSHAKE_TIMEOUT_S):
            width, height = await viewer.handshake()
        console.print(f"[dim]live view: RFB 3.8 handshake done, desktop {width}x{height}[/dim]")
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(viewer.drain)
            yield viewer
            tasks.cancel_scope.cancel()


class AuditTail:
    """The audit events appended since `skip()`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0

    def skip(self) -> None:
        self.offset = self.path.stat().st_size if self.path.exists() else 0

    def takeover_time(self) -> float:
        """The wall time (s) of the one console-input takeover since `skip()`."""
        with self.path.open("rb") as f:
            f.seek(self.offset)
            data = f.read()
        events = [json.loads(line) for line in data.splitlines() if line.strip()]
        found = [
            e
            for e in events
            if e["event"] == "takeover" and e["details"].get("how") == "console input"
        ]
        if len(found) != 1:
            raise BenchError(f"{len(found)} console-input takeover event(s) in the audit, not 1")
        return datetime.fromisoformat(found[0]["time"]).timestamp()


# --- the rounds -----------------------------------------------------------------------

Decide = Callable[[str], Awaitable[None]]


@dataclass
class Bench:
    home: CorralHome
    mcp: McpPath
    op: OperatorConsole
    audit: AuditTail
    extras: Extras
    token: str  # the operator's (console login, admin API, CLI)
    viewer: Viewer | None = None

    async def click(self, where: dict[str, int]) -> types.CallToolResult:
        return await self.mcp.call("computer_click", where)

    async def pending_approval(self, answered: list[types.CallToolResult]) -> dict[str, Any]:
        with anyio.fail_after(RAISE_TIMEOUT_S):
            while True:
                if answered:
                    raise BenchError(f"the held click answered: {result_text(answered[0])}")
                for approval in (await self.op.state())["approvals"]:
                    if approval["agent"] == AGENT and approval["state"] == "pending":
                        if not str(approval["rule"]).startswith("confirm_words"):
                            raise BenchError(f"held by another rule: {approval['rule']}")
                        return dict(approval)
                await anyio.sleep(APPROVAL_POLL_S)  # polling, outside the timed span

    def approve_via(self, decide: Decide, path: str) -> TimedCall:
        """One round: click "Pay now", wait until it is listed, decide it with `decide`."""

        async def timed(run: int) -> float:
            answered: list[types.CallToolResult] = []
            done_at: list[float] = []

            async def held_click() -> None:
                answered.append(await self.click(PAY_NOW))
                done_at.append(time.perf_counter())

            async with anyio.create_task_group() as tasks:
                clicked = time.perf_counter()
                tasks.start_soon(held_click)
                approval = await self.pending_approval(answered)
                started = time.perf_counter()
                await decide(approval["id"])
            if answered[0].is_error:
                raise BenchError(f"approved by {path}, but: {result_text(answered[0])}")
            if path == BY_CONSOLE and run >= WARMUP:
                self.extras.raised_ms.append((started - clicked) * 1000)
            return done_at[0] - started

        return timed

    async def by_console(self, approval_id: str) -> None:
        await self.op.act("approve", approval_id)

    async def by_admin_api(self, approval_id: str) -> None:
        """What `corral approvals approve` sends (orchestrator.gateway.admin_client.admin_call),
        over this process's open connection (admin_call opens a new client per call)."""
        payload = {"id": approval_id, "decision": "approve", "reason": ""}
        body = json.dumps(payload).encode()
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {self.token}"}
        answer = await self.op.http.post(ADMIN_DECIDE_PATH, content=body, headers=headers)
        if answer.status_code != 200 or answer.json()["approval"]["state"] != "approved":
            raise BenchError(f"the admin API answered HTTP {answer.status_code} {answer.text}")

    async def by_cli(self, approval_id: str) -> None:
        argv = [corral_bin(), "approvals", "approve", approval_id]
        env = {**corral_env(self.home), "CORRAL_OPERATOR_TOKEN": self.token}
        done = await anyio.run_process(argv, env=env, check=False)
        if done.returncode != 0:
            raise BenchError(f"{shlex.join(argv[1:])}: {done.stderr.decode().strip()}")

    def _viewer(self) -> Viewer:
        if self.viewer is None:
            raise BenchError("the live view is not open")
        return self.viewer

    async def hand_back(self) -> None:
        """Release the button (forwarded while this viewer holds the seat), hand back."""
        await self._viewer().release()
        await self.op.act("handback", AGENT)

    async def frozen_for_agent(self, run: int) -> float:
        """t0: the button goes down; t1: the agent's first refused click answers."""
        viewer = self._viewer()
        self.audit.skip()
        wall_t0, started = time.time(), time.perf_counter()
        await viewer.press()
        through = 0
        with anyio.fail_after(FREEZE_TIMEOUT_S):
            while True:
                sent = time.perf_counter()
                result = await self.click(CONTINUE)
                if not result.is_error:
                    through += 1
                    continue
                if REFUSED not in result_text(result):
                    raise BenchError(f"a click failed otherwise: {result_text(result)}")
                break
        ended = time.perf_counter()
        audited = self.audit.takeover_time()
        await self.hand_back()
        if run >= WARMUP:
            self.extras.clicks_through.append(through)
            self.extras.refused_ms.append((ended - sent) * 1000)
            self.extras.audited_ms.append((audited + AUDIT_RESOLUTION_S - wall_t0) * 1000)
        return ended - started

    async def frozen_in_state(self, run: int) -> float:
        """t0: the button goes down; t1: GET /console/api/state says a human has it."""
        viewer = self._viewer()
        started = time.perf_counter()
        await viewer.press()
        polls = 0
        with anyio.fail_after(FREEZE_TIMEOUT_S):
            while True:
                polls += 1
                if controller(await self.op.state()) == ("human", OPERATOR):
                    break
        ended = time.perf_counter()
        await self.hand_back()
        if run >= WARMUP:
            self.extras.polls.append(polls)
        return ended - started


async def check_world(bench: Bench) -> None:
    """The AI holds the seat and "Continue" is not held (a held click would hang a round)."""
    if controller(await bench.op.state()) != ("ai", None):
        raise BenchError("the AI does not hold the seat at the start")
    with anyio.fail_after(FREEZE_TIMEOUT_S):
        result = await bench.click(CONTINUE)
    if result.is_error:
        raise BenchError(f"the click on Continue failed: {result_text(result)}")


async def measure(
    home: CorralHome, base: str, token: str, runs: int
) -> tuple[list[Result], Extras]:
    samples: dict[RowKey, list[float]] = {key(row): [] for row in ROWS}
    extras = Extras()
    async with (
        httpx.AsyncClient(base_url=base, trust_env=False, timeout=30.0) as http,
        Client(mcp_params(home, AGENT), mode="legacy") as client,
        session_of(McpPath(client, Observations())) as mcp,
    ):
        op = OperatorConsole(http)
        await op.login(token)
        await mcp.navigate(CHECKOUT_URL)
        bench = Bench(home, mcp, op, AuditTail(home.audit_file), extras, token)
        await check_world(bench)
        console.print(
            f"[dim]{WARMUP} warm-up + {runs} timed rounds of a held click approved three "
            "ways, in rotating order...[/dim]"
        )
        approve = [(APPROVE, BY_CONSOLE), (APPROVE, BY_ADMIN), (APPROVE, BY_CLI)]
        calls = {
            approve[0]: bench.approve_via(bench.by_console, BY_CONSOLE),
            approve[1]: bench.approve_via(bench.by_admin_api, BY_ADMIN),
            approve[2]: bench.approve_via(bench.by_cli, BY_CLI),
        }
        await rounds(calls, [approve], WARMUP, runs, samples)
        async with live_view(base, op.cookie) as viewer:
            bench.viewer = viewer
            console.print(
                f"[dim]{WARMUP} warm-up + {runs} timed rounds of take over by console input, "
                "seen by the agent and by the console...[/dim]"
            )
            freeze = [(FREEZE, AGENT_SIDE), (FREEZE, POLLED)]
            calls = {freeze[0]: bench.frozen_for_agent, freeze[1]: bench.frozen_in_state}
            await rounds(calls, [freeze], WARMUP, runs, samples)
            bench.viewer = None
        samples[(FREEZE, AUDITED)] = list(extras.audited_ms)
    return [Result(row, tuple(samples[key(row)])) for row in ROWS], extras


# --- main -----------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    return runs_and_write(argv, __doc__, DEFAULT_RUNS, f"timed rounds of each ({DEFAULT_RUNS})")


def canonical_command(runs: int, write: str | None) -> str:
    argv = [".venv/bin/python", "bench/operator_console.py", "--runs", str(runs)]
    return shlex.join(argv + (["--write", write] if write is not None else []))


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    runs: int = args.runs
    began = time.monotonic()
    machine = describe_machine()
    me = os.getpid()
    owners: list[tuple[int, int | None]] = [(me, read_start_time(me))]
    # The site goes last: its container is removed after the gateway has stopped.
    with (
        tempfile.TemporaryDirectory(prefix="corral-bench-console-") as tmp,
        heavy_site(checkout_routes()) as site,
    ):
        console.print(f"[dim]the checkout page's site at {site.ip} ({CHECKOUT_URL})[/dim]")
        home = CorralHome(Path(tmp).resolve() / "home", env=Environment.from_environ(os.environ))
        port = free_port()
        prepare_home(home, port, site)
        token = add_operator(home)
        try:
            # Its own process session: a Ctrl-C reaches this process, which stops it.
            with running_gateway(
                home,
                port,
                Path(tmp) / "gateway.log",
                own_session=True,
                while_stopping=sigint_ignored,
            ) as gateway:
                owners.append((gateway.proc.pid, gateway.start_time))
                console.print(f"[dim]corral gateway (pid {gateway.proc.pid}) at {gateway.url}[/]")
                results, extras = anyio.run(measure, home, gateway.url, token, runs)
        except BaseException:
            with contextlib.suppress(BenchError):  # the first failure is the one to report
                check_leftovers(owners)
            raise
        # The leak check comes before --write: figures from a run that leaks are not published.
        check_leftovers(owners)
    console.print("no container of this benchmark, its gateway or its site left behind")
    print_report(machine, results, extras)
    console.print(f"[dim]the run took {time.monotonic() - began:.0f} s[/dim]")
    if args.write is not None:
        section = markdown_section(
            machine, results, extras, runs, canonical_command(runs, args.write)
        )
        write_section(Path(args.write), SECTION, section)
        console.print(f"wrote the section to {args.write}")
    return 0


if __name__ == "__main__":
    run_main(main, console)
