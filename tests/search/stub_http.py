"""A tiny threaded HTTP server on 127.0.0.1 that plays an Ollama or OpenAI-compatible embedding
server, with switchable failure modes. Vectors come from a `HashingEmbedder`, so answers are
deterministic and semantically consistent with the rest of the tests."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from robot_mcp_memory.search.embedders import HashingEmbedder

Mode = Literal["ok", "500", "malformed", "hang", "hold", "wrong-shape"]


class StubEmbedServer:
    def __init__(self, flavour: Literal["ollama", "openai"], dim: int = 64) -> None:
        self.flavour = flavour
        self.mode: Mode = "ok"
        self.embedder = HashingEmbedder(dim)
        self.requests: list[tuple[str, dict[str, str], Any]] = []
        self.release = threading.Event()  # a hanging handler waits on this, never on a clock
        self.hold_s = 30.0  # the longest a "hold" waits for `release`
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"null")
                stub.requests.append((self.path, dict(self.headers), body))
                if stub.mode == "hang":
                    stub.release.wait(30)
                    return
                if stub.mode == "hold":  # answers, once released
                    stub.release.wait(stub.hold_s)
                if stub.mode == "500":
                    self._send(500, b'{"error": "boom"}')
                    return
                if stub.mode == "malformed":
                    self._send(200, b'{"embeddings": [[0.1, 0.2')
                    return
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                rows = stub.embedder.embed(texts).tolist()
                if stub.mode == "wrong-shape":
                    rows = rows[:-1] or [[]]
                if stub.flavour == "ollama" and self.path == "/api/embed":
                    payload: Any = {"model": body["model"], "embeddings": rows}
                elif stub.flavour == "openai" and self.path == "/v1/embeddings":
                    payload = {"data": [{"index": i, "embedding": r} for i, r in reversed(list(enumerate(rows)))]}
                else:
                    self._send(404, b"{}")
                    return
                self._send(200, json.dumps(payload).encode())

            def _send(self, status: int, data: bytes) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the caller gave up (stopped, timed out)
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(5)


@contextmanager
def stub_server(flavour: Literal["ollama", "openai"], dim: int = 64) -> Iterator[StubEmbedServer]:
    stub = StubEmbedServer(flavour, dim)
    stub.start()
    try:
        yield stub
    finally:
        stub.stop()
