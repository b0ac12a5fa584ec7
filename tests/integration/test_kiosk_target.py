"""The kiosk's `target` op on a real kiosk: the accessible name and role of what a click at
a screen point would hit, read by the browser (hit test and accessibility tree over CDP),
never by the page's own scripts. Frames of the same origin, and of another site (an
out-of-process frame, also under a CSS scale), are served by a small HTTP server inside
the kiosk container on its loopback: 127.0.0.1 and localhost are different sites, so
Chromium puts the second in a renderer of its own."""

from __future__ import annotations

import statistics
from collections.abc import AsyncIterator

import anyio
import pytest

from orchestrator.backends.channel import KioskChannel
from orchestrator.backends.docker.backend import DockerBackend
from orchestrator.errors import KioskError
from sandboxes.isolation import NON_ROOT
from tests.helpers import wait_until
from tests.kiosk_helpers import data_url, running_kiosk

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

WIDTH, HEIGHT = 1280, 800

SHOP = """<!doctype html><title>shop</title><body style="margin:0">
<button style="position:absolute;left:10px;top:10px;width:200px;height:60px">Pay
  <span style="font-size:30px">now</span></button>
<a href="https://shop.example/checkout?step=2" style="position:absolute;left:10px;
  top:100px;font-size:20px">Check <b>out</b></a>
<div onclick="1" style="position:absolute;left:10px;top:150px;width:200px;height:40px">
  Delete account</div>
<button aria-label="Cancel" style="position:absolute;left:10px;top:220px;width:200px;
  height:40px">Delete everything</button>
<div role="tab" style="position:absolute;left:10px;top:280px;width:200px;height:40px">
  <i>Billing</i></div>
<iframe srcdoc="<body style='margin:0'><button style='width:100px;height:40px'>Inner
  </button>" style="position:absolute;left:300px;top:300px;width:400px;height:200px;
  border:0"></iframe>
<script>
  // The page lies in its own world: every link says it goes somewhere harmless.
  Object.defineProperty(HTMLAnchorElement.prototype, 'href',
                        {get() { return 'https://harmless.example/'; }});
</script></body>"""

FRAME = "position:absolute;width:400px;height:200px;border:0"
PAGES = {
    "/main": "<!doctype html><title>main</title><body style='margin:0'>"
    "<a href='/next?q=1' style='position:absolute;left:10px;top:100px'>Go next</a>"
    "<a href='\\\\evil.test/x' style='position:absolute;left:10px;top:150px'>odd</a>"
    f"<iframe src='/inner' style='{FRAME};left:300px;top:300px'></iframe>"
    f"<iframe src='http://localhost:8000/inner' style='{FRAME};left:800px;top:300px'>"
    "</iframe><div style='position:absolute;left:0;top:0;transform:scale(2);"
    "transform-origin:0 0'><iframe src='http://localhost:8000/inner' style='"
    "position:absolute;left:50px;top:300px;width:200px;height:100px;border:0'></iframe>"
    "</div>",
    "/inner": "<!doctype html><title>inner</title><body style='margin:0'>"
    "<a href='/far' style='position:absolute;left:0;top:0'>far away</a>"
    "<button style='position:absolute;left:50px;top:50px;width:100px;height:40px'>"
    "Confirm <b>order</b></button>",
}
# Serves PAGES on the container's loopback; ends when its stdin ends (the exec stream).
SERVER = f"""
import http.server, os, sys, threading
PAGES = {PAGES!r}
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = PAGES.get(self.path.split("?")[0], "missing").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 8000), Handler)
threading.Thread(target=server.serve_forever, daemon=True).start()
print("ready", flush=True)
sys.stdin.buffer.read()
os._exit(0)
"""


@pytest.fixture(scope="module")
async def kiosk(backend: DockerBackend) -> AsyncIterator[KioskChannel]:
    async with running_kiosk(backend, WIDTH, HEIGHT) as (channel, _):
        yield channel


@pytest.fixture
async def shop(kiosk: KioskChannel) -> KioskChannel:
    await kiosk.request("navigate", 30, url=data_url(SHOP))
    return kiosk


@pytest.fixture
async def framed(backend: DockerBackend, kiosk: KioskChannel) -> AsyncIterator[KioskChannel]:
    """/main served from the kiosk's loopback, its frames loaded."""
    server = await backend.open_exec(kiosk.id, ["python3", "-c", SERVER], user=NON_ROOT)
    try:
        with anyio.fail_after(20):
            assert await server.receive() == b"ready\n"
        nav = await kiosk.request("navigate", 30, url="http://127.0.0.1:8000/main")
        assert nav["error_text"] is None, nav
        await wait_until(lambda: _frames_loaded(kiosk), 20)
        yield kiosk
    finally:
        await server.close()  # its stdin ends: the server exits


async def _frames_loaded(kiosk: KioskChannel) -> bool:
    probe = await kiosk.request("probe", 10)
    return sum(url.endswith("/inner") for url in probe["frame_urls"]) == 3


async def target(kiosk: KioskChannel, x: int, y: int) -> dict[str, object]:
    answer = await kiosk.request("target", 10, x=x, y=y)
    return {key: answer[key] for key in ("name", "role", "text", "href", "error")}


def named(name: str, role: str, text: str, href: str | None = None) -> dict[str, object]:
    return {"name": name, "role": role, "text": text, "href": href, "error": None}


# ---------------------------------------------------------------------------- the tests


async def test_a_button_and_a_span_inside_it_both_name_the_button(shop: KioskChannel) -> None:
    assert await target(shop, 30, 40) == named("Pay now", "button", "Pay now")
    assert await target(shop, 120, 40) == named("Pay now", "button", "Pay now")  # the span


async def test_a_link_gives_its_name_and_the_url_the_browser_would_open(
    shop: KioskChannel,
) -> None:
    """The page replaced the href getter in its own world; the URL is read in the probe's
    isolated world, where the getter is the browser's."""
    assert await target(shop, 20, 110) == named(
        "Check out", "link", "Check out", "https://shop.example/checkout?step=2"
    )


async def test_what_is_not_a_control_gives_its_text_and_the_background_gives_none(
    shop: KioskChannel,
) -> None:
    assert await target(shop, 100, 170) == named("", "generic", "Delete account")
    assert await target(shop, 100, 300) == named("Billing", "tab", "Billing")
    assert await target(shop, 1000, 700) == named("shop", "RootWebArea", "")


async def test_an_aria_label_that_hides_the_visible_text_is_reported_with_that_text(
    shop: KioskChannel,
) -> None:
    assert await target(shop, 100, 240) == named("Cancel", "button", "Delete everything")


async def test_a_button_in_a_srcdoc_frame(shop: KioskChannel) -> None:
    assert await target(shop, 340, 320) == named("Inner", "button", "Inner")


async def test_frames_of_the_same_origin_and_of_another_site_are_followed(
    framed: KioskChannel,
) -> None:
    order = named("Confirm order", "button", "Confirm order")
    assert await target(framed, 400, 370) == order  # same origin
    assert await target(framed, 900, 370) == order  # another site: out of process
    assert await target(framed, 300, 740) == order  # another site, drawn twice as big
    assert await target(framed, 810, 305) == named(
        "far away", "link", "far away", "http://localhost:8000/far"
    )


async def test_relative_and_backslashed_links_resolve_as_the_browser_does(
    framed: KioskChannel,
) -> None:
    assert (await target(framed, 20, 108))["href"] == "http://127.0.0.1:8000/next?q=1"
    assert (await target(framed, 15, 158))["href"] == "http://evil.test/x"


async def test_target_is_fast_and_checks_its_parameters(shop: KioskChannel) -> None:
    spent = []
    for _ in range(11):
        answer = await shop.request("target", 10, x=30, y=40)
        spent.append(float(answer["ms"]))
    print(f"target: median {statistics.median(spent):.1f} ms in the agent")
    assert statistics.median(spent) < 30  # about 5 ms here; the bound catches a regression

    with pytest.raises(KioskError, match="x must be an integer"):
        await shop.request("target", 10, x="30", y=40)
    with pytest.raises(KioskError, match="outside the 1280x800 screen"):
        await shop.request("target", 10, x=30, y=800)


FORM = """<!doctype html><title>form</title><body style="margin:0">
<form action="/paid"><input aria-label="Amount" style="position:absolute;left:10px;
  top:10px;width:200px;height:40px"><button style="position:absolute;left:10px;top:100px;
  width:200px;height:40px">Pay now</button></form>
<button style="position:absolute;left:300px;top:10px;width:200px;height:40px">Next</button>
<script>
  // The page lies in its own world: the focus is always on "Next".
  const next = document.querySelectorAll('button')[1];
  Object.defineProperty(Document.prototype, 'activeElement', {get() { return next; }});
</script></body>"""


async def test_focused_names_the_focus_and_a_text_fields_submit_control(
    kiosk: KioskChannel,
) -> None:
    """The `focused` op (what Return or space would act on): read in the probe's world,
    so the page's lying `activeElement` changes nothing; a text field answers its form's
    submit control beside itself."""
    await kiosk.request("navigate", 30, url=data_url(FORM))
    await kiosk.request("click", 10, x=100, y=30, button="left", double=False)

    async def field_focused() -> bool:
        return (await kiosk.request("focused", 10)).get("role") == "textbox"

    await wait_until(field_focused, 10)
    answer = await kiosk.request("focused", 10)
    assert answer["name"] == "Amount" and answer["error"] is None, answer
    submit = answer["submit"]
    assert submit["name"] == "Pay now" and submit["role"] == "button", answer

    await kiosk.request("key", 10, key="Tab")

    async def button_focused() -> bool:
        return (await kiosk.request("focused", 10)).get("name") == "Pay now"

    await wait_until(button_focused, 10)
    answer = await kiosk.request("focused", 10)
    assert answer["role"] == "button" and answer["error"] is None, answer


CLONE = """<!doctype html><title>clone</title><body style="margin:0">
<button id="b" style="position:absolute;left:10px;top:10px;width:200px;height:60px">Delete
  draft</button>
<div style="position:absolute;left:400px;top:10px;width:200px;height:60px" onclick="
  const b = document.getElementById('b'); b.replaceWith(b.cloneNode(true));">swap</div>
</body>"""


async def test_the_same_element_reads_the_same_and_a_look_alike_put_in_its_place_does_not(
    kiosk: KioskChannel,
) -> None:
    """What an approval binds of a kiosk click (issue 22 item 1): besides name, role, text
    and link URL, the element's DOM node, frame and border box. Two reads of one element
    are equal; an identical clone the page put in its place is another node."""
    await kiosk.request("navigate", 30, url=data_url(CLONE))

    async def read() -> dict[str, object]:
        answer = await kiosk.request("target", 10, x=110, y=40)
        return {k: v for k, v in answer.items() if k not in ("id", "ok", "ms")}

    first = await read()
    assert first == await read()
    assert first["bounds"] == [10, 10, 200, 60] and first["frame"], first
    assert isinstance(first["node"], int)
    await kiosk.request("click", 10, x=500, y=40, button="left", double=False)

    async def replaced() -> bool:
        return (await read())["node"] != first["node"]

    await wait_until(replaced, 10)
    clone = await read()
    assert {k: v for k, v in clone.items() if k != "node"} == {
        k: v for k, v in first.items() if k != "node"
    }


def side_by_side(left: str, right: str) -> str:
    style = "position:absolute;top:10px;width:200px;height:60px"
    return (
        f'<!doctype html><title>two</title><body style="margin:0">'
        f'<button style="{style};left:0">{left}</button>'
        f'<button style="{style};left:200px">{right}</button></body>'
    )


async def test_a_read_after_another_document_or_a_change_names_what_is_there_now(
    kiosk: KioskChannel,
) -> None:
    """A read after the first asks the viewport and the hit test in one wait, the hit test
    at the point the last viewport gives (rig_images/kiosk/kiosk_agent/viewport.py): a new
    document between two reads is read in its own isolated world, and what the page moved
    under the point is what the hit test finds. (A viewport that changes between two reads
    is tests/unit/test_kiosk_viewport.py: the AI's zoom keys are refused, sandboxes/keys.py,
    and a zoomed page reads as outside.)"""
    await kiosk.request("navigate", 30, url=data_url(side_by_side("Keep", "Pay")))
    assert (await target(kiosk, 210, 40))["name"] == "Pay"
    assert (await target(kiosk, 210, 40))["name"] == "Pay"  # the viewport known: one wait
    await kiosk.request("navigate", 30, url=data_url(side_by_side("Pay", "Keep")))
    assert (await target(kiosk, 210, 40))["name"] == "Keep"
    swap = "const [a, b] = document.querySelectorAll('button'); a.before(b);"
    swap += "[a.style.left, b.style.left] = [b.style.left, a.style.left]; 1"
    await kiosk.request("eval", 10, expression=swap)
    assert (await target(kiosk, 210, 40))["name"] == "Pay"
