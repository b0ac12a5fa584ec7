"""Operators (orchestrator/people/operators.py): a token shown once, only its hash kept."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from orchestrator.errors import OperatorError
from orchestrator.home import CorralHome
from orchestrator.people.operators import (
    add_operator,
    list_operators,
    operator_for_token,
    remove_operator,
)

pytestmark = pytest.mark.unit


def test_a_token_works_until_its_operator_is_removed_and_is_never_stored(tmp_path: Path) -> None:
    home = CorralHome(tmp_path)
    token = add_operator(home, "olga")

    assert operator_for_token(home, token) == "olga"
    assert operator_for_token(home, token + "x") is None
    assert operator_for_token(home, "") is None
    text = home.operators_file.read_text()
    assert token not in text and token[7:] not in text
    assert stat.S_IMODE(home.operators_file.stat().st_mode) == 0o600
    assert [op.name for op in list_operators(home)] == ["olga"]

    remove_operator(home, "olga")
    assert operator_for_token(home, token) is None


def test_names_are_checked_and_unique(tmp_path: Path) -> None:
    home = CorralHome(tmp_path)
    add_operator(home, "olga")
    with pytest.raises(OperatorError, match="exists"):
        add_operator(home, "olga")
    with pytest.raises(OperatorError, match="operator name"):
        add_operator(home, "Bad Name")
    with pytest.raises(OperatorError, match="no operator"):
        remove_operator(home, "pete")


def test_two_operators_have_different_tokens(tmp_path: Path) -> None:
    home = CorralHome(tmp_path)
    a, b = add_operator(home, "olga"), add_operator(home, "pete")
    assert a != b
    assert (operator_for_token(home, a), operator_for_token(home, b)) == ("olga", "pete")
