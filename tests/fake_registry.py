"""A minimal OCI distribution (Docker Registry v2) server on loopback, enough for
`docker push` (issue 15's `corral images push`): blob uploads (POST, PATCH, PUT with
the digest checked), HEAD of a blob, and PUT/GET of a manifest. Plain HTTP on
127.0.0.1, which the Docker engine treats as an insecure registry by default.
"""

from __future__ import annotations

import contextlib
import hashlib
import socket
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

API = {"Docker-Distribution-API-Version": "registry/2.0"}


@dataclass
class Registry:
    blobs: dict[str, bytes] = field(default_factory=dict)
    uploads: dict[str, bytearray] = field(default_factory=dict)
    manifests: dict[tuple[str, str], bytes] = field(default_factory=dict)  # (repo, tag)

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v2/", self.base),
                Route(
                    "/v2/{rest:path}", self.route, methods=["GET", "HEAD", "POST", "PATCH", "PUT"]
                ),
            ]
        )

    async def base(self, request: Request) -> Response:
        return Response(status_code=200, headers=API)

    async def route(self, request: Request) -> Response:
        rest = request.path_params["rest"]
        if "/blobs/uploads/" in rest + "/":
            name, _, upload = rest.partition("/blobs/uploads")
            return await self._upload(request, name, upload.strip("/"))
        if "/blobs/" in rest:
            digest = rest.rsplit("/blobs/", 1)[1]
            if digest not in self.blobs:
                return Response(status_code=404, headers=API)
            body = b"" if request.method == "HEAD" else self.blobs[digest]
            headers = {
                **API,
                "Docker-Content-Digest": digest,
                "Content-Length": str(len(self.blobs[digest])),
            }
            return Response(body, headers=headers)
        if "/manifests/" in rest:
            name, reference = rest.rsplit("/manifests/", 1)
            if request.method == "PUT":
                body = await request.body()
                digest = "sha256:" + hashlib.sha256(body).hexdigest()
                self.manifests[(name, reference)] = body
                self.manifests[(name, digest)] = body
                headers = {
                    **API,
                    "Docker-Content-Digest": digest,
                    "Location": f"/v2/{name}/manifests/{digest}",
                }
                return Response(status_code=201, headers=headers)
            found = self.manifests.get((name, reference))
            if found is None:
                return Response(status_code=404, headers=API)
            return Response(found, headers=API)
        return Response(status_code=404, headers=API)

    async def _upload(self, request: Request, name: str, upload: str) -> Response:
        if request.method == "POST":
            upload = uuid.uuid4().hex
            self.uploads[upload] = bytearray()
            return Response(status_code=202, headers=self._where(name, upload))
        if upload not in self.uploads:
            return Response(status_code=404, headers=API)
        self.uploads[upload] += await request.body()
        if request.method == "PATCH":
            return Response(status_code=202, headers=self._where(name, upload))
        digest = request.query_params.get("digest", "")
        data = bytes(self.uploads.pop(upload))
        if digest != "sha256:" + hashlib.sha256(data).hexdigest():
            return Response(status_code=400, headers=API)
        self.blobs[digest] = data
        headers = {**API, "Docker-Content-Digest": digest, "Location": f"/v2/{name}/blobs/{digest}"}
        return Response(status_code=201, headers=headers)

    def _where(self, name: str, upload: str) -> dict[str, str]:
        size = len(self.uploads[upload])
        return {
            **API,
            "Location": f"/v2/{name}/blobs/uploads/{upload}",
            "Docker-Upload-UUID": upload,
            "Range": f"0-{max(size - 1, 0)}",
        }


@contextlib.contextmanager
def serve_registry() -> Iterator[tuple[Registry, int]]:
    """The registry on 127.0.0.1:PORT (bound before this returns), in a thread."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    registry = Registry()
    server = uvicorn.Server(uvicorn.Config(registry.app(), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield registry, int(sock.getsockname()[1])
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
