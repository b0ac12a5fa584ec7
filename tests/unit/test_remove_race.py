"""A forced remove whose kill meets the container's own exit (dockerd answers "Could not
kill running container X, cannot remove - Container X is not running", seen once in a
`make test` run: a cold script's container ending as its call removed it) removes it
again instead of failing the call. Below the real removals of every integration test."""

from __future__ import annotations

from typing import Any

import docker
import pytest

from orchestrator.backends.docker.backend import remove_and_wait
from orchestrator.errors import EngineError

RACE = "Could not kill running container abc, cannot remove - Container abc is not running"


class Api:
    def __init__(self, answers: list[Exception | None]) -> None:
        self.answers = answers
        self.removes = 0

    def remove_container(self, container_id: str, **_: Any) -> None:
        self.removes += 1
        answer = self.answers.pop(0)
        if answer is not None:
            raise answer


class Client:
    def __init__(self, api: Api) -> None:
        self.api = api


def server_error(text: str) -> docker.errors.APIError:
    response = type("Response", (), {"status_code": 500, "reason": "Server Error"})()
    return docker.errors.APIError("500 Server Error", response, explanation=text)


def test_a_container_that_exited_during_the_kill_is_removed_again() -> None:
    api = Api([server_error(RACE), None])
    remove_and_wait(Client(api), "unix://x", "abc")  # type: ignore[arg-type]
    assert api.removes == 2


def test_another_engine_error_is_raised_and_the_race_only_retried_so_often() -> None:
    with pytest.raises(EngineError, match="disk"):
        remove_and_wait(Client(Api([server_error("no space left on disk")])), "u", "abc")  # type: ignore[arg-type]
    api = Api([server_error(RACE)] * 3)
    with pytest.raises(EngineError, match="is not running"):
        remove_and_wait(Client(api), "u", "abc")  # type: ignore[arg-type]
    assert api.removes == 3
