"""The seat at the moment of input (orchestrator/surfaces/pipeline.py, issue 22 item 4),
through the real SessionManager and KioskChannel on the in-memory backend, with the fake
kiosk holding an input's answer (the input in flight): a take over waits it out, a long
type stops within a chunk and says how much was typed, and input queued behind the lock
is refused. The same on Docker and a real kiosk and desktop: tests/e2e/test_seat.py."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from orchestrator.home import CorralHome
from orchestrator.surfaces.answers import Answer
from orchestrator.surfaces.inputs import TYPE_CHUNK
from orchestrator.surfaces.kiosk.sessions import SessionManager
from tests.fakes import InMemoryBackend
from tests.unit.test_oversight import started
from tests.unit.test_session_rules import call, events, text_of, write_agent

pytestmark = [pytest.mark.unit, pytest.mark.anyio]


async def taken_during(
    manager: SessionManager, kiosk: Any, first: tuple[str, dict[str, Any]], *queued: str
) -> list[Answer]:
    """Run `first` until its input is in flight, queue `queued` inputs behind it, take the
    seat, and check the take over returns only once the input in flight has ended."""
    answers: list[Answer] = []
    took = anyio.Event()

    async def run(tool: str, args: dict[str, Any]) -> None:
        answers.append(await call(manager, tool, **args))

    async def take() -> None:
        await manager.oversight.take_over("alice", "olga", viewer=None, how="cli")
        took.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, *first)
        with anyio.fail_after(5):
            await kiosk.arrived.wait()
        for tool in queued:
            tg.start_soon(run, tool, {"x": 5, "y": 5})
        await anyio.wait_all_tasks_blocked()
        tg.start_soon(take)
        await anyio.wait_all_tasks_blocked()
        assert not took.is_set(), "the take over returned with the AI's input in flight"
        kiosk.release()
        with anyio.fail_after(5):
            await took.wait()
    return answers


async def test_a_take_over_mid_type_stops_it_within_a_chunk_and_says_how_much_was_typed(
    corral_home: CorralHome, manager: SessionManager, backend: InMemoryBackend
) -> None:
    write_agent(corral_home, confirm_words=[])
    kiosk = await started(manager, backend)
    kiosk.held_ops = {"type"}
    text = "a" * (TYPE_CHUNK * 3 + 4)

    [answer] = await taken_during(manager, kiosk, ("computer_type", {"text": text}))

    typed = [r["text"] for r in kiosk.requests if r["op"] == "type"]
    assert typed == ["a" * TYPE_CHUNK]  # the chunk in flight, and nothing after it
    assert answer.is_error
    assert f"after {TYPE_CHUNK} of {len(text)} characters" in text_of(answer)
    refused = events(corral_home, "computer_action_refused")[-1]["details"]
    assert refused["typed"] == TYPE_CHUNK and "mid-input" in refused["why"]
    assert not events(corral_home, "computer_action")  # never audited as done


async def test_input_queued_behind_the_lock_at_a_take_over_is_refused_not_sent(
    corral_home: CorralHome, manager: SessionManager, backend: InMemoryBackend
) -> None:
    write_agent(corral_home, confirm_words=[])
    kiosk = await started(manager, backend)
    kiosk.held_ops = {"click"}

    answers = await taken_during(
        manager, kiosk, ("computer_click", {"x": 5, "y": 5}), "computer_click", "computer_scroll"
    )

    clicks = [r for r in kiosk.requests if r["op"] in ("click", "scroll")]
    assert len(clicks) == 1  # only the one in flight at the take over
    refused = [a for a in answers if a.is_error]
    assert len(refused) == 2
    assert all("A person has the desktop" in text_of(a) for a in refused)


async def test_every_surfaces_long_type_is_cut_into_chunks_checked_for_the_seat() -> None:
    """`in_chunks` is what the kiosk's and desktop's `type` (above, through the real
    pipeline), Android's `input text` and WebDriverAgent's keys send through: a seat
    taken after the first chunk stops the rest, and the refusal says what landed."""
    from orchestrator.errors import InputInterrupted
    from orchestrator.surfaces.inputs import in_chunks

    sent: list[str] = []
    text = "a" * (TYPE_CHUNK * 3)

    async def send(part: str) -> None:
        sent.append(part)

    await in_chunks(text, send, lambda: True)
    assert "".join(sent) == text and len(sent) == 3
    sent.clear()
    with pytest.raises(InputInterrupted) as stopped:
        await in_chunks(text, send, lambda: not sent)  # a person takes it after one chunk
    assert sent == ["a" * TYPE_CHUNK] and stopped.value.typed == TYPE_CHUNK
