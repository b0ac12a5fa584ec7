"""The computer_use benchmark's heavy page and the local HTTPS site that serves it.

The page: 50 inputs in all, 5 of them secret (3 `type=password`, 1 `autocomplete=cc-number`,
1 `autocomplete=one-time-code`), 40 in the document, 2 in each of 3 same-origin iframes and
4 in one open shadow root; every one inside a 1280x800 viewport, so the masking probe finds
all 5 secret fields and the gateway paints them.

Served two ways: as routes of a site container (tests/sites.py: `make_certs`, `start_site`,
on the `corral-egress` network) that a kiosk session opens with `computer_navigate`, and as
a data: URL (srcdoc iframes, same origin as their page) for the kiosk channel, which has no
network. The site containers are removed when `heavy_site` exits, also on an error or a
Ctrl-C, and it fails if one is left.
"""

from __future__ import annotations

import contextlib
import html
import os
import shutil
import sys
import tempfile
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import BenchError, docker_cli, sigint_ignored
from testcontainers.core.config import testcontainers_config

REPO = Path(__file__).resolve().parents[1]

SITE = "site.corral.test"  # mapped to the site container through resolve_overrides
HEAVY_PATH = "/heavy"
HEAVY_URL = f"https://{SITE}{HEAVY_PATH}"
SITE_KIND = "test-site"  # tests.helpers.control_labels(SITE_KIND) labels the containers

TOTAL_INPUTS = 50
FRAMES = 3
INPUTS_PER_FRAME = 2
SHADOW_INPUTS = 4
DOCUMENT_INPUTS = TOTAL_INPUTS - FRAMES * INPUTS_PER_FRAME - SHADOW_INPUTS  # 40
SECRET_FIELDS = 5
# Secret inputs in the document, by index: the attributes that make each one secret.
DOCUMENT_SECRETS = {
    5: 'type="password" value="hunter2"',
    17: 'autocomplete="cc-number" value="4111 1111 1111 1111"',
    29: 'autocomplete="one-time-code" value="123456"',
}
SECRET_FRAME = 2  # its second input is a password
SECRET_SHADOW_INPUT = 1  # the shadow root's second input is a password

STYLE = (
    "body{margin:0;font:13px sans-serif;background:#fff}"
    ".g{display:grid;grid-template-columns:repeat(4,300px);gap:6px 12px;padding:8px}"
    "label{display:flex;gap:6px;align-items:center;height:24px}"
    "input{width:200px;height:20px;box-sizing:border-box}"
    "iframe{width:400px;height:80px;border:1px solid #888;margin:4px 8px}"
)


def _document_input(i: int) -> str:
    attrs = DOCUMENT_SECRETS.get(i, f'type="text" value="value {i}"')
    return f'<label>Field {i}<input name="f{i}" {attrs}></label>'


def frame_page(n: int) -> str:
    """Iframe `n` (1-based): INPUTS_PER_FRAME inputs, the last a password in SECRET_FRAME."""
    fields = []
    for i in range(INPUTS_PER_FRAME):
        secret = n == SECRET_FRAME and i == INPUTS_PER_FRAME - 1
        attrs = 'type="password" value="hunter2"' if secret else f'value="frame {n} {i}"'
        fields.append(f'<label>Frame {n}.{i}<input name="fr{n}_{i}" {attrs}></label>')
    return (
        f"<!doctype html><html><head><title>frame {n}</title><style>{STYLE}</style></head>"
        f"<body>{''.join(fields)}</body></html>"
    )


def _shadow_script() -> str:
    fields = []
    for i in range(SHADOW_INPUTS):
        kind = "password" if i == SECRET_SHADOW_INPUT else "text"
        fields.append(f"<label>Shadow {i}<input name=s{i} type={kind} value=shadow{i}></label>")
    inner = "<style>label{display:inline-flex;gap:6px;margin:0 8px}</style>" + "".join(fields)
    return (
        "<script>document.getElementById('host').attachShadow({mode:'open'}).innerHTML="
        f"'{inner}';</script>"
    )


def heavy_page(frame: Callable[[int], str]) -> str:
    """The heavy page; `frame(n)` is the attributes that load iframe n (src= or srcdoc=)."""
    inputs = "".join(_document_input(i) for i in range(DOCUMENT_INPUTS))
    frames = "".join(f"<iframe {frame(n)}></iframe>" for n in range(1, FRAMES + 1))
    return (
        f"<!doctype html><html><head><title>heavy</title><style>{STYLE}</style></head><body>"
        f'<form class="g">{inputs}</form><div>{frames}</div>'
        f'<div id="host" style="padding:8px"></div>{_shadow_script()}</body></html>'
    )


def frame_path(n: int) -> str:
    return f"{HEAVY_PATH}/frame/{n}"


Routes = dict[str, tuple[int, dict[str, str], str]]  # tests.sites.Route: status, headers, body


def site_routes() -> Routes:
    """The site's routes (tests.sites.Route): the heavy page and its iframe pages."""
    page = {"Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store"}
    routes = {HEAVY_PATH: (200, page, heavy_page(lambda n: f'src="{frame_path(n)}"'))}
    for n in range(1, FRAMES + 1):
        routes[frame_path(n)] = (200, page, frame_page(n))
    return routes


def heavy_data_url() -> str:
    """The same page as a data: URL for the kiosk channel (no network): srcdoc iframes."""
    page = heavy_page(lambda n: f'srcdoc="{html.escape(frame_page(n), quote=True)}"')
    return "data:text/html;charset=utf-8," + urllib.parse.quote(page)


# --- the site container ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HeavySite:
    ca_file: Path  # the test CA the kiosk must trust (config.toml extra_ca_file)
    ip: str  # the site container's address on corral-egress (resolve_overrides)


def disable_ryuk() -> None:
    """As tests/conftest.py does, before any container starts: testcontainers' reaper is an
    image from a registry, and nothing is pulled here (the attribute outranks the variable,
    which is also set for anything that reads it)."""
    os.environ["TESTCONTAINERS_RYUK_DISABLED"] = "true"
    testcontainers_config.ryuk_disabled = True


def own_sites() -> list[str]:
    """Site containers this process started ("ID name status" lines), found by label."""
    out = docker_cli(
        "ps",
        "-a",
        "--filter",
        f"label=corral.test.pid={os.getpid()}",
        "--filter",
        f"label=corral.kind={SITE_KIND}",
        "--format",
        "{{.ID}} {{.Names}} {{.Status}}",
    )
    return [line for line in out.splitlines() if line.strip()]


def remove_sites(started: list[Any], *, failing: bool) -> None:
    """Remove every site container (`started`, then any other this process's label names);
    a BenchError if one had to be swept up, unless the run is failing already."""
    problems: list[str] = []
    left: list[str] = []
    for container in started:
        try:
            container.stop()  # testcontainers' stop is a forced remove
        except Exception as exc:
            problems.append(f"stop: {exc}")
    try:
        left = own_sites()
        for line in left:
            docker_cli("rm", "-f", line.split()[0])
    except BenchError as exc:
        problems.append(str(exc))
    if (left or problems) and not failing:
        raise BenchError(
            "the heavy page's site containers were not removed cleanly (now removed): "
            + "; ".join(problems + left)
        )


@contextlib.contextmanager
def heavy_site(routes: Routes | None = None) -> Iterator[HeavySite]:
    """A site container on corral-egress serving the heavy page (or other `routes`) over
    HTTPS for SITE, with a throwaway CA; removed on the way out, whatever happens (a second
    Ctrl-C included)."""
    disable_ryuk()
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))  # tests/ is not installed; the helpers live there
    import docker

    from orchestrator.backends.docker.networks import _ensure_egress_network_sync
    from tests.sites import make_certs, start_site

    client = docker.from_env(version="1.41")
    certs = Path(tempfile.mkdtemp(prefix="corral-bench-certs-"))
    started: list[Any] = []
    failing = True
    try:
        _ensure_egress_network_sync(client)
        ca_pem = make_certs(certs, (SITE,))
        ca_file = certs / "ca.pem"
        ca_file.write_text(ca_pem, encoding="utf-8")
        try:
            ip = start_site(client, certs, routes or site_routes(), 443, [], started)
        except (AssertionError, RuntimeError) as exc:
            raise BenchError(f"the heavy page's site did not start: {exc}") from exc
        yield HeavySite(ca_file, ip)
        failing = False
    finally:
        with sigint_ignored():
            try:
                remove_sites(started, failing=failing)
            finally:
                client.close()
                shutil.rmtree(certs, ignore_errors=True)
