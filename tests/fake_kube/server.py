"""A fake Kubernetes API server (Starlette), served on loopback for the backend's tests.

What it implements, as the real one does: create, get, list, watch (`?watch=true`,
newline-delimited events from a resourceVersion), delete and delete-collection by
label selector for pods, configmaps and networkpolicies; `/version`; namespaces (one,
`corral-test`, enforcing Pod Security "restricted"); and pods' `attach` and `exec` over
the WebSocket channel protocols `v5.channel.k8s.io` and `v4.channel.k8s.io` (one byte
of channel, then data: 0 stdin, 1 stdout, 2 stderr, 3 error/status; v5 adds 255 to
close a channel). Objects are validated in `store`; pods run in `kubelet`.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import threading
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from tests.fake_kube.docker_node import InDocker
from tests.fake_kube.kubelet import Kubelet, PodRun
from tests.fake_kube.store import K8S_VERSION, KINDS, ApiRefusal, Store

NAMESPACE = "corral-test"
PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
STDIN, ERROR, CLOSE = 0, 3, 255


def _refused(exc: ApiRefusal) -> JSONResponse:
    return JSONResponse(exc.status(), status_code=exc.code)


class FakeApi:
    def __init__(self, root: Path, images: Mapping[str, Sequence[str] | InDocker | None]) -> None:
        self.store = Store(namespaces={"default", NAMESPACE})
        self.kubelet = Kubelet(self.store, root, images)
        self.requests: list[tuple[str, str]] = []  # (method, path), for tests to read
        self.protocols: tuple[str, ...] = PROTOCOLS  # a test may take v5 away
        # A test may break every attach stream once it has sent this many bytes of output:
        # the server closes it with 1011 (internal error), as an API server that fails does.
        self.break_attach_after: int | None = None
        self.refuse_logs = False  # a test may refuse `pods/log` (403), as a Role without it
        api = "/api/v1/namespaces/{ns}/{plural}"
        net = "/apis/networking.k8s.io/v1/namespaces/{ns}/{plural}"
        self.app = Starlette(
            routes=[
                Route("/version", self.version),
                Route("/api/v1/namespaces/{ns}", self.namespace),
                WebSocketRoute("/api/v1/namespaces/{ns}/pods/{name}/attach", self.attach),
                WebSocketRoute("/api/v1/namespaces/{ns}/pods/{name}/exec", self.exec),
                Route("/api/v1/namespaces/{ns}/pods/{name}/log", self.log),
                *(
                    r
                    for base in (api, net)
                    for r in (
                        Route(base, self.collection, methods=["GET", "POST", "DELETE"]),
                        Route(base + "/{name}", self.item, methods=["GET", "DELETE"]),
                    )
                ),
            ],
            lifespan=self.lifespan,
        )

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        async with anyio.create_task_group() as tasks:
            self.kubelet.tasks = tasks
            yield
            for namespace, name in list(self.kubelet.runs):
                await self.kubelet.pod_deleted(namespace, name)
            tasks.cancel_scope.cancel()

    async def version(self, request: Request) -> Response:
        major, minor, _ = K8S_VERSION.split(".")
        return JSONResponse({"major": major, "minor": minor, "gitVersion": f"v{K8S_VERSION}"})

    async def namespace(self, request: Request) -> Response:
        ns = request.path_params["ns"]
        self.requests.append(("GET", request.url.path))
        if ns not in self.store.namespaces:
            return _refused(ApiRefusal(404, "NotFound", f'namespaces "{ns}" not found'))
        labels = {"pod-security.kubernetes.io/enforce": "restricted"}
        return JSONResponse(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}}
        )

    def _plural(self, request: Request) -> tuple[str, str]:
        plural = request.path_params["plural"]
        if plural not in KINDS:
            raise ApiRefusal(404, "NotFound", f"the server could not find {plural}")
        return plural, request.path_params["ns"]

    async def collection(self, request: Request) -> Response:
        self.requests.append((request.method, request.url.path))
        try:
            plural, ns = self._plural(request)
            query = request.query_params
            selector = query.get("labelSelector", "")
            fields = query.get("fieldSelector", "")
            if request.method == "POST":
                obj = await request.json()
                created = self.store.create(plural, ns, obj)
                if plural == "pods":
                    self.kubelet.pod_created(ns, created["metadata"]["name"])
                return JSONResponse(created, status_code=201)
            if request.method == "DELETE":
                gone = []
                for obj in self.store.list(plural, ns, selector, fields):
                    gone.append(await self._delete(plural, ns, obj["metadata"]["name"]))
                return JSONResponse(self._list(plural, gone))
            if query.get("watch") in ("true", "1"):
                return StreamingResponse(
                    self._watch(plural, ns, selector, fields, query),
                    media_type="application/json",
                )
            return JSONResponse(self._list(plural, self.store.list(plural, ns, selector, fields)))
        except ApiRefusal as exc:
            return _refused(exc)

    def _list(self, plural: str, items: list[dict[str, Any]]) -> dict[str, Any]:
        api_version, kind = KINDS[plural]
        return {
            "apiVersion": api_version,
            "kind": f"{kind}List",
            "metadata": {"resourceVersion": str(self.store.version)},
            "items": items,
        }

    async def _watch(
        self, plural: str, ns: str, selector: str, fields: str, query: Any
    ) -> AsyncIterator[bytes]:
        from tests.fake_kube.store import matches

        since = int(query.get("resourceVersion") or 0)
        timeout = float(query.get("timeoutSeconds") or 300)
        if since == 0:  # no version: every current object first, as ADDED
            for obj in self.store.list(plural, ns, selector, fields):
                yield json.dumps({"type": "ADDED", "object": obj}).encode() + b"\n"
            since = self.store.version
        with anyio.move_on_after(timeout):
            while True:
                if self.store.changed is None:
                    self.store.changed = anyio.Event()
                changed = self.store.changed
                for version, kind, event, obj in list(self.store.events):
                    if version <= since:
                        continue
                    since = version
                    mine = kind == plural and obj["metadata"].get("namespace") == ns
                    if mine and matches(obj, selector, fields):
                        yield json.dumps({"type": event, "object": obj}).encode() + b"\n"
                await changed.wait()

    async def item(self, request: Request) -> Response:
        self.requests.append((request.method, request.url.path))
        try:
            plural, ns = self._plural(request)
            name = request.path_params["name"]
            if request.method == "DELETE":
                return JSONResponse(await self._delete(plural, ns, name))
            return JSONResponse(self.store.get(plural, ns, name))
        except ApiRefusal as exc:
            return _refused(exc)

    async def _delete(self, plural: str, ns: str, name: str) -> dict[str, Any]:
        # Every deletion here is immediate (grace period 0: corral's pods ask for it). A
        # pod is stopped first: as on a real cluster, DELETED comes once the kubelet has
        # confirmed it stopped (a container of the Docker node is gone by then).
        if plural == "pods":
            self.store.get(plural, ns, name)  # 404 first, as the API answers
            await self.kubelet.pod_deleted(ns, name)
        return self.store.delete(plural, ns, name)

    async def log(self, request: Request) -> Response:
        """A pod's log: everything its container wrote, while the pod exists."""
        self.requests.append((request.method, request.url.path))
        ns, name = request.path_params["ns"], request.path_params["name"]
        if self.refuse_logs:
            refused = {"kind": "Status", "status": "Failure", "reason": "Forbidden", "code": 403}
            return JSONResponse({**refused, "message": "pods/log is forbidden"}, status_code=403)
        try:
            self.store.get("pods", ns, name)
        except ApiRefusal as exc:
            return _refused(exc)
        return Response(bytes(self.kubelet.logs.get((ns, name), b"")), media_type="text/plain")

    # ---------------------------------------------------------------- streams
    async def _accept(self, websocket: WebSocket) -> tuple[str, PodRun] | None:
        ns, name = websocket.path_params["ns"], websocket.path_params["name"]
        self.requests.append(("WS", websocket.url.path))
        offered = websocket.scope.get("subprotocols", [])
        chosen = next((p for p in offered if p in self.protocols), None)
        run = self.kubelet.runs.get((ns, name))
        if chosen is None or run is None or run.process is None:
            await websocket.close(code=1008)  # refused before the upgrade: HTTP 403
            return None
        await websocket.accept(subprotocol=chosen)
        return chosen, run

    async def attach(self, websocket: WebSocket) -> None:
        accepted = await self._accept(websocket)
        if accepted is None:
            return
        _, run = accepted
        process = run.process
        assert process is not None
        send, receive = anyio.create_memory_object_stream[tuple[int, bytes]](100)
        run.listeners.append(send)
        wants_stdin = websocket.query_params.get("stdin") == "true"
        stdin = process.stdin if wants_stdin and not run.attached_stdin else None
        run.attached_stdin = run.attached_stdin or stdin is not None
        async with anyio.create_task_group() as tasks:
            if stdin is not None:
                tasks.start_soon(self._stdin, websocket, stdin, tasks.cancel_scope)
            sent, broken = 0, False
            async with receive:
                async for channel, data in receive:
                    await websocket.send_bytes(bytes([channel]) + data)
                    sent += len(data)
                    limit = self.break_attach_after
                    if broken := limit is not None and sent >= limit:
                        break
            tasks.cancel_scope.cancel()
        with contextlib.suppress(Exception):
            await websocket.close(*((1011, "the test broke it") if broken else (1000,)))

    async def _stdin(self, websocket: WebSocket, stdin: Any, scope: anyio.CancelScope) -> None:
        """Client frames to the process's stdin; stdin closes on [255, 0] (v5) or when the
        client goes (stdinOnce)."""
        try:
            while True:
                message = await websocket.receive_bytes()
                if not message:
                    continue
                if message[0] == STDIN and len(message) > 1:
                    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                        await stdin.send(message[1:])
                elif message[0] == CLOSE and message[1:2] == bytes([STDIN]):
                    await stdin.aclose()
        except (WebSocketDisconnect, RuntimeError):
            with contextlib.suppress(Exception):
                await stdin.aclose()

    async def exec(self, websocket: WebSocket) -> None:
        accepted = await self._accept(websocket)
        if accepted is None:
            return
        _, run = accepted
        wants_stdin = websocket.query_params.get("stdin") == "true"
        argv, cwd, env = self.kubelet.exec_command(
            run, websocket.query_params.getlist("command"), stdin=wants_stdin
        )
        process = await anyio.open_process(
            argv,
            stdin=subprocess.PIPE if wants_stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
        )
        async with process, anyio.create_task_group() as tasks:
            if process.stdin is not None:
                tasks.start_soon(self._stdin, websocket, process.stdin, tasks.cancel_scope)

            async def pump(stream: Any, channel: int) -> None:
                async for chunk in stream:
                    await websocket.send_bytes(bytes([channel]) + chunk)

            async with anyio.create_task_group() as pumps:
                pumps.start_soon(pump, process.stdout, 1)
                pumps.start_soon(pump, process.stderr, 2)
            code = await process.wait()
            tasks.cancel_scope.cancel()
        status: dict[str, Any] = {"metadata": {}, "status": "Success"}
        if code != 0:
            status = {
                "metadata": {},
                "status": "Failure",
                "message": f"command terminated with non-zero exit code: {code}",
                "reason": "NonZeroExitCode",
                "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
            }
        await websocket.send_bytes(bytes([ERROR]) + json.dumps(status).encode())
        with contextlib.suppress(Exception):
            await websocket.close(code=1000)


@dataclass
class Served:
    api: FakeApi
    url: str
    kubeconfig: Path


def write_kubeconfig(path: Path, url: str, namespace: str = NAMESPACE) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": {"server": url}}],
        "users": [{"name": "fake", "user": {"token": "fake-token"}}],
        "contexts": [
            {"name": "fake", "context": {"cluster": "fake", "user": "fake", "namespace": namespace}}
        ],
        "current-context": "fake",
    }
    path.write_text(json.dumps(config))
    return path


@contextlib.contextmanager
def serve(root: Path, images: Mapping[str, Sequence[str] | InDocker | None]) -> Iterator[Served]:
    """The fake on 127.0.0.1 (a free port), in a thread with its own event loop. The
    socket is bound and listening before this returns, so no wait is needed. `images`:
    what its node has, each with its CMD (used when a pod gives no command)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    api = FakeApi(root / "pods", images)
    config = uvicorn.Config(api.app, log_level="warning", ws="websockets-sansio", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield Served(api, url, write_kubeconfig(root / "kubeconfig", url))
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
