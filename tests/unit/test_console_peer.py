"""The console's login is bound to the local user that logged in (orchestrator/people/
peer.py, console.py): the kernel's socket table names the uid of a loopback client, and a
login's cookie from another uid is no login. The cookie itself is sent by browsers to
every port of the host: docs/security.md, "The console's cookie and other local ports"."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.home import CorralHome
from orchestrator.people.console import Logins
from orchestrator.people.operators import add_operator
from orchestrator.people.peer import TABLES, listener_uid, peer_uid, uid_of_rows

pytestmark = pytest.mark.unit


@pytest.fixture
def connection() -> Iterator[tuple[tuple[str, int], tuple[str, int]]]:
    """A real loopback TCP connection: (the client's address, the server's)."""
    with (
        socket.create_server(("127.0.0.1", 0)) as server,
        socket.create_connection(server.getsockname()) as client,
    ):
        accepted, _ = server.accept()
        with accepted:
            yield client.getsockname(), server.getsockname()


@pytest.mark.skipif(not TABLES[0].exists(), reason="needs Linux's /proc/net/tcp")
def test_the_uid_of_a_loopback_client_is_read_from_the_kernel(
    connection: tuple[tuple[str, int], tuple[str, int]],
) -> None:
    client, server = connection
    assert peer_uid({"client": client, "server": server}) == os.getuid()
    assert peer_uid({"client": server, "server": client}) == os.getuid()  # the other end
    assert peer_uid({"client": ("127.0.0.1", 1), "server": server}) is None


def test_rows_of_another_user_name_that_user(tmp_path: Path) -> None:
    header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid"
    row = "   0: 0100007F:D431 0100007F:2346 01 00000000:00000000 00:00000000 00000000  1001"
    table = tmp_path / "tcp"
    table.write_text(f"{header}\n{row}\n")
    client, server = ("127.0.0.1", 0xD431), ("127.0.0.1", 0x2346)

    assert uid_of_rows([row], client, server) == 1001
    assert peer_uid({"client": client, "server": server}, tables=[table]) == 1001
    assert peer_uid({"client": client, "server": server}, tables=[tmp_path / "none"]) is None
    assert peer_uid({"client": None, "server": server}, tables=[table]) is None


def test_a_login_is_no_login_for_another_local_user(corral_home: CorralHome) -> None:
    add_operator(corral_home, "olga")
    logins = Logins(corral_home)
    login_id, login = logins.create("olga", uid=1000)

    assert logins.get(login_id, 1001) is None  # the cookie replayed by another user
    assert logins.get(login_id, None) is None  # or from a socket the kernel cannot name
    assert logins.get(login_id, 1000) == login  # still the owner's: not ended by that
    unbound_id, unbound = logins.create("olga", uid=None)
    assert logins.get(unbound_id, 1234) == unbound  # unknown at login: not bound


@pytest.mark.skipif(not TABLES[0].exists(), reason="needs Linux's /proc/net/tcp")
def test_the_uid_of_a_listener_is_read_from_the_kernel() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        assert listener_uid("127.0.0.1", port) == os.getuid()
    assert listener_uid("127.0.0.1", port) is None  # closed: nobody listens
    assert listener_uid("localhost", port) is None  # a name: nothing to match


def test_a_listener_on_every_address_counts_for_loopback(tmp_path: Path) -> None:
    row = "   0: 00000000:2346 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1001"
    table = tmp_path / "tcp"
    table.write_text(f"header\n{row}\n")
    assert listener_uid("127.0.0.1", 0x2346, tables=[table]) == 1001
    assert listener_uid("127.0.0.1", 0x2347, tables=[table]) is None
