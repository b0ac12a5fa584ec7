"""A target read's viewport and hit test asked in one wait (rig_images/kiosk/kiosk_agent/
viewport.py): the hit test asked at the last viewport's point is used only when the frame
tree still names the cached world's document and the fresh viewport puts the point on the
same CSS pixel; anything else is read again. The browser here is a stand-in that answers
CDP calls from a page's state (its loader, its worlds, its viewport), so that each change
between two reads can be made exactly; the same reads against real Chromium, a navigation
between two reads included, are tests/integration/test_kiosk_target.py."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "rig_images" / "kiosk"))
from kiosk_agent.browser import Browser
from kiosk_agent.cdp import CDPError
from kiosk_agent.viewport import viewport_and_hit

pytestmark = pytest.mark.unit

SID = "page-session"


class Page:
    """The browser's side: one page with a document (its loader), the isolated worlds made
    in it, and a viewport; every call asked is kept in `asked` by the wait it came in."""

    def __init__(self) -> None:
        self.loader = "loader-1"
        self.view = {"offX": 0, "offY": 0, "vw": 1280, "vh": 800, "dpr": 1}
        self.worlds: dict[int, str] = {}  # context id -> the loader it was made for
        self.asked: list[list[str]] = []
        self.closed = False
        self.detached_sessions: set[str] = set()
        self.keep_old_worlds = False  # a world of a left document still answers

    def call(self, method: str, params: dict[str, Any] | None = None, **_: Any) -> dict[str, Any]:
        self.asked.append([method])
        answer = self._answer(method, params or {})
        if isinstance(answer, CDPError):
            raise answer
        return answer

    def call_all(
        self, calls: Sequence[tuple[str, dict[str, Any], str | None]], **_: Any
    ) -> list[Any]:
        self.asked.append([method for method, _, _ in calls])
        return [self._answer(method, params) for method, params, _ in calls]

    def _answer(self, method: str, params: dict[str, Any]) -> dict[str, Any] | CDPError:
        if method == "Page.getFrameTree":
            return {"frameTree": {"frame": {"id": "main", "loaderId": self.loader}}}
        if method == "Page.createIsolatedWorld":
            context = len(self.worlds) + 1
            self.worlds[context] = self.loader
            return {"executionContextId": context}
        if method == "Runtime.evaluate":
            made_for = self.worlds.get(params["contextId"])
            if made_for != self.loader and not self.keep_old_worlds:
                return CDPError("Runtime.evaluate: Cannot find context with specified id")
            return {"result": {"value": dict(self.view)}}
        if method == "DOM.getNodeForLocation":
            return {"backendNodeId": params["x"] * 10_000 + params["y"], "loader": self.loader}
        raise AssertionError(f"not expected: {method}")


@pytest.fixture
def page() -> Page:
    return Page()


@pytest.fixture
def browser(page: Page) -> Browser:
    made = Browser()
    made.cdp = page  # type: ignore[assignment]
    made.session = SID
    return made


def read(browser: Browser, page: Page, x: int = 300, y: int = 200) -> tuple[Any, Any]:
    page.asked.clear()
    return viewport_and_hit(browser, page, SID, x, y)  # type: ignore[arg-type,no-any-return]


def test_the_first_read_asks_one_call_after_another_and_the_next_in_one_wait(
    browser: Browser, page: Page
) -> None:
    view, hit = read(browser, page)
    assert view == page.view and hit is None  # the caller hit-tests at the point it gives
    assert page.asked == [["Page.getFrameTree"], ["Page.createIsolatedWorld"], ["Runtime.evaluate"]]
    view, hit = read(browser, page)
    assert view == page.view and hit == {"backendNodeId": 300 * 10_000 + 200, "loader": "loader-1"}
    assert page.asked == [["Page.getFrameTree", "Runtime.evaluate", "DOM.getNodeForLocation"]]


def test_a_zoom_between_two_reads_discards_the_hit_asked_at_the_old_point(
    browser: Browser, page: Page
) -> None:
    read(browser, page)
    page.view = {**page.view, "dpr": 2, "vw": 640, "vh": 400}
    view, hit = read(browser, page)
    assert view["dpr"] == 2 and hit is None  # 300,200 is CSS 150,100 now: hit-tested again
    view, hit = read(browser, page)  # the new viewport is the next read's guess
    assert hit == {"backendNodeId": 150 * 10_000 + 100, "loader": "loader-1"}


@pytest.mark.parametrize("old_world_answers", [False, True])
def test_another_document_between_two_reads_gets_its_own_world_and_hit_test(
    browser: Browser, page: Page, old_world_answers: bool
) -> None:
    read(browser, page)
    page.loader, page.keep_old_worlds = "loader-2", old_world_answers
    page.view = {**page.view, "offY": 100}
    view, hit = read(browser, page)
    assert hit is None and view["offY"] == 100
    assert page.asked[-2:] == [["Page.createIsolatedWorld"], ["Runtime.evaluate"]]
    assert len(page.asked) == 3  # the frame tree of the one wait is not read again
    assert page.worlds[max(page.worlds)] == "loader-2"
    view, hit = read(browser, page)
    assert hit == {"backendNodeId": 300 * 10_000 + 100, "loader": "loader-2"}


def test_a_point_outside_the_last_viewport_is_not_guessed(browser: Browser, page: Page) -> None:
    read(browser, page)
    _, hit = read(browser, page, x=1300, y=200)
    assert hit is None
    assert all("DOM.getNodeForLocation" not in wait for wait in page.asked)


def test_a_failed_hit_test_is_asked_again_by_the_caller(browser: Browser, page: Page) -> None:
    read(browser, page)
    answer = page._answer

    def failing(method: str, params: dict[str, Any]) -> dict[str, Any] | CDPError:
        if method == "DOM.getNodeForLocation":
            return CDPError("DOM.getNodeForLocation: No node found at given location")
        return answer(method, params)

    page._answer = failing  # type: ignore[method-assign]
    view, hit = read(browser, page)
    assert view == page.view and hit is None
