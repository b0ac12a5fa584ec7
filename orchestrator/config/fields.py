"""The pieces every config model is built from: how corral names its images, the checked string
types (host names, deny entries, confirm words, tool patterns), and the strict base model."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from typing import Annotated

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
)

from orchestrator.home import DEFAULT_IMAGE_TAG
from sandboxes.approval_rules import word_problem
from sandboxes.hostnames import deny_entry_problem, host_entry_problem
from sandboxes.tool_patterns import pattern_problem


def image_name(kind: str, tag: str = DEFAULT_IMAGE_TAG) -> str:
    """The image corral builds and runs for `kind` under `tag` (`CorralHome.env.image_tag`:
    `latest`, or $CORRAL_IMAGE_TAG as the CLI read it)."""
    return f"corral-{kind}:{tag}"


# A Docker image reference: [registry/]name[:tag][@digest], lower-case repository.
_IMAGE_RE = re.compile(
    r"^(?:[a-zA-Z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:[._-]+[a-z0-9]+)*"
    r"(?:/[a-z0-9]+(?:[._-]+[a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
    r"(?:@sha256:[a-f0-9]{64})?$"
)
AGENT_NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")


def _checked(problem_of: Callable[[str], str | None], say: Callable[[str], str]) -> AfterValidator:
    """A validator: the value as given, or a ValueError saying `say(problem)`."""

    def check(value: str) -> str:
        problem = problem_of(value)
        if problem is not None:
            raise ValueError(say(problem))
        return value

    return AfterValidator(check)


def _named(what: str) -> Callable[[str], str]:
    """`what` before a problem that reads as a predicate ("must ...", "is ...")."""
    return lambda problem: f"{what} {problem}" if problem.startswith(("must", "is ")) else problem


def _ipv4(value: str) -> str:
    try:
        address = ipaddress.IPv4Address(value)
    except ValueError:
        raise ValueError("must be an IPv4 address such as '172.18.0.5'") from None
    if str(address) != value:
        raise ValueError(f"write the address as {str(address)!r}")
    return value


HostEntry = Annotated[str, _checked(host_entry_problem, _named("the host name"))]
ToolPattern = Annotated[
    str, _checked(pattern_problem, "the pattern can never match a corral tool: {}".format)
]
DenyEntry = Annotated[str, _checked(deny_entry_problem, _named("the entry"))]
IPv4Text = Annotated[str, AfterValidator(_ipv4)]
ConfirmWord = Annotated[str, _checked(word_problem, "the confirm word {}".format)]


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def check_image(value: str) -> str:
    if not _IMAGE_RE.fullmatch(value):
        raise ValueError(
            "must be a Docker image reference such as 'corral-sandbox:latest' "
            "(lower-case name, optional :tag)"
        )
    return value
