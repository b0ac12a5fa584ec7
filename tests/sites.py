"""Local HTTPS test sites for egress and kiosk tests: a throwaway CA, a server
certificate for names we map ourselves, and site containers on corral-egress.

Test targets are always containers a test started; nothing here reaches any other address.
The site containers are testcontainers `DockerContainer`s run from an image built here
(never pulled), with Ryuk off (tests/conftest.py): the fixture that started a site stops it.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Self

import docker
import docker.errors
from docker.types import EndpointConfig
from testcontainers.core.config import testcontainers_config
from testcontainers.core.container import DockerContainer
from testcontainers.core.exceptions import ContainerStartException
from testcontainers.core.wait_strategies import LogMessageWaitStrategy

from tests.helpers import control_labels
from tests.images import DEFAULT_SANDBOX_IMAGE

SANDBOX_IMAGE = DEFAULT_SANDBOX_IMAGE
EGRESS_NETWORK = "corral-egress"
SITE_START_TIMEOUT = 30  # seconds for a site to print its readiness line

Route = tuple[int, Mapping[str, str], str]  # status, headers, body


def make_certs(directory: Path, names: Sequence[str]) -> str:
    """A test CA and one server certificate for `names`, written to `directory`
    (site.pem, site.key); returns the CA certificate as PEM."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "corral test CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([x509.OID_SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    (directory / "site.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / "site.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    for path in directory.iterdir():
        path.chmod(0o644)  # read by uid 1000 in the site containers; a throwaway test key
    directory.chmod(0o755)
    return ca_cert.public_bytes(serialization.Encoding.PEM).decode()


SITE_SERVER = r"""
import http.server, json, ssl, sys, threading
routes, port = json.loads(sys.argv[1]), int(sys.argv[2])
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain("/certs/site.pem", "/certs/site.key")
events = {}  # /hold/NAME answers once /release/NAME was asked for (a page's long poll)
def event(name):
    return events.setdefault(name, threading.Event())
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        print("GET " + self.path, flush=True)  # the site's own request log
        path = self.path.split("?")[0]
        if path.startswith("/release/"):
            event(path[len("/release/"):]).set()
        if path.startswith("/hold/"):
            event(path[len("/hold/"):]).wait(120)
        status, headers, body = routes.get(path, routes.get("*", [404, {}, ""]))
        body = body.encode()
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    def finish_request(self, request, client_address):
        request.settimeout(10)
        super().finish_request(ctx.wrap_socket(request, server_side=True), client_address)
    def handle_error(self, request, client_address):
        pass
server = Server(("0.0.0.0", port), Handler)
print("ready", flush=True)
server.serve_forever()
"""


class LocalImageContainer(DockerContainer):
    """A testcontainers container that only runs an image already built on this machine.

    testcontainers pulls an image when the engine does not have it (its DockerClient.create
    pulls on ImageNotFound); we check first and fail instead: nothing is pulled here. Ryuk,
    its reaper, would be pulled too, so it must be off (tests/conftest.py)."""

    def start(self) -> Self:
        if not testcontainers_config.ryuk_disabled:
            raise RuntimeError(
                "testcontainers' Ryuk is on; its image cannot be pulled here "
                "(tests/conftest.py switches it off)"
            )
        try:
            self.get_docker_client().client.images.get(self.image)
        except docker.errors.ImageNotFound:
            raise RuntimeError(
                f"{self.image} is not built on this machine; build it first (nothing is pulled)"
            ) from None
        return super().start()


def requests_seen(client: docker.DockerClient, address: str) -> list[str]:
    """The paths the test site at `address` was asked for, in order (its own log)."""
    for container in client.containers.list(
        ignore_removed=True, filters={"label": "corral.kind=test-site"}
    ):
        networks = container.attrs["NetworkSettings"]["Networks"]
        if networks.get(EGRESS_NETWORK, {}).get("IPAddress") == address:
            lines = container.logs(stdout=True, stderr=False).decode().splitlines()
            return [line[4:] for line in lines if line.startswith("GET ")]
    raise AssertionError(f"no test site at {address}")


def release(client: docker.DockerClient, address: str, name: str) -> None:
    """Answer the test site's held `/hold/NAME` requests (a page's long poll): the site is
    asked for `/release/NAME` from inside its own container, so nothing else is reached."""
    ask = (
        "import http.client, ssl; c = ssl.create_default_context(); "
        "c.check_hostname = False; c.verify_mode = ssl.CERT_NONE; "
        "h = http.client.HTTPSConnection('127.0.0.1', 443, context=c, timeout=10); "
        f"h.request('GET', '/release/{name}'); h.getresponse().read()"
    )  # any status: the site logs the request and sets the event before it answers
    for container in client.containers.list(
        ignore_removed=True, filters={"label": "corral.kind=test-site"}
    ):
        networks = container.attrs["NetworkSettings"]["Networks"]
        if networks.get(EGRESS_NETWORK, {}).get("IPAddress") == address:
            code, output = container.exec_run(["python3", "-c", ask], user="1000:1000")
            assert code == 0, output
            return
    raise AssertionError(f"no test site at {address}")


def _logs(container: DockerContainer) -> str:
    try:
        stdout, stderr = container.get_logs()
    except ContainerStartException:
        return "(the container was not created)"
    return f"stdout:\n{stdout.decode(errors='replace')}\nstderr:\n{stderr.decode(errors='replace')}"


def start_site(
    client: docker.DockerClient,
    certs: Path,
    routes: Mapping[str, Route],
    port: int,
    aliases: Sequence[str],
    started: list[DockerContainer],
) -> str:
    """An HTTPS server (uid 1000, no capabilities) on corral-egress serving `routes`
    (path -> (status, headers, body); "*" for every other path); returns its address.

    The container is appended to `started` before it starts: the caller stops every one
    (`DockerContainer.stop()` removes it), also when this fails."""
    container = (
        LocalImageContainer(
            SANDBOX_IMAGE,
            # The same engine API version as the session's client.
            docker_client_kw={"version": client.api.api_version},
        )
        .with_command(["python3", "-c", SITE_SERVER, json.dumps(routes), str(port)])
        .with_volume_mapping(certs, "/certs", "ro")
        # Passed as they are to the engine's create (with_kwargs replaces, so all at once).
        .with_kwargs(
            labels=control_labels("test-site"),  # testcontainers adds its own beside them
            user="1000:1000",
            read_only=True,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            # uid 1000 may bind 443 in this container's own network namespace only.
            sysctls={"net.ipv4.ip_unprivileged_port_start": "0"},
            # corral-egress exists already (the fixtures ensure it, never remove it);
            # testcontainers' with_network() takes only a network it creates itself.
            network=EGRESS_NETWORK,
            networking_config={EGRESS_NETWORK: EndpointConfig("1.41", aliases=list(aliases))},
            mem_limit=128 * 1024**2,
            pids_limit=64,
        )
        # The server prints "ready" once it listens; the strategy also fails fast if it exits.
        .waiting_for(
            LogMessageWaitStrategy("^ready$")
            .with_startup_timeout(SITE_START_TIMEOUT)
            .with_poll_interval(0.05)
        )
    )
    started.append(container)
    try:
        container.start()
    except Exception as exc:
        raise AssertionError(
            f"the test site on port {port} did not come up: {exc}\n{_logs(container)}"
        ) from exc
    wrapped = container.get_wrapped_container()
    wrapped.reload()
    return str(wrapped.attrs["NetworkSettings"]["Networks"][EGRESS_NETWORK]["IPAddress"])


@contextlib.contextmanager
def one_page_site(
    client: docker.DockerClient, host: str, html: str, prefix: str
) -> Iterator[tuple[str, str, str]]:
    """A local HTTPS site serving `html` at / as `host` (a throwaway CA): (the CA file,
    its address, its address again: the `kiosk_config` shape); removed on the way out."""
    from orchestrator.backends.docker.networks import _ensure_egress_network_sync

    _ensure_egress_network_sync(client)
    certs = Path(tempfile.mkdtemp(prefix=prefix))
    started: list[DockerContainer] = []
    try:
        ca_pem = make_certs(certs, (host,))
        routes = {"/": (200, {"Content-Type": "text/html"}, html)}
        site_ip = start_site(client, certs, routes, 443, [], started)
        (certs / "ca.pem").write_text(ca_pem)
        yield str(certs / "ca.pem"), site_ip, site_ip
    finally:
        for container in started:
            container.stop()
        shutil.rmtree(certs, ignore_errors=True)
