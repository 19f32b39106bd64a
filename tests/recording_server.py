"""A loopback HTTP/1.1 server that records every request it receives: the far side of
a test's http.request steps, honouring Idempotency-Key as a careful service would."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class RecordingServer:
    """A loopback HTTP/1.1 server that records requests and honours Idempotency-Key."""

    requests: list[dict[str, Any]] = field(default_factory=list)
    effects: dict[str, int] = field(default_factory=dict)  # idempotency key -> times applied
    delay_seconds: float = 0.0
    fail_status: int | None = None
    # set: requests are answered; clear (`hold()`): each waits after it was recorded, so
    # a test can kill the kernel while the far side has the request and has not acted
    _answering: threading.Event = field(default_factory=threading.Event, repr=False)

    def __post_init__(self) -> None:
        server = self
        self._answering.set()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode() if length else ""
                key = self.headers.get("Idempotency-Key")
                server.requests.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "body": body,
                        "key": key,
                        "headers": dict(self.headers),
                    }
                )
                if server.delay_seconds:
                    time.sleep(server.delay_seconds)
                server._answering.wait(120)  # held: until the test lets it go
                if server.fail_status:
                    self._reply(server.fail_status, {"error": "failing on purpose"})
                    return
                replay = False
                if self.command != "GET" and key:
                    replay = key in server.effects
                    server.effects[key] = server.effects.get(key, 0) + (0 if replay else 1)
                self._reply(200, {"ok": True, "path": self.path, "replay": replay})

            def _reply(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def hold(self) -> None:
        """Requests from now on are recorded and then wait, not acted on, until `release()`."""
        self._answering.clear()

    def release(self) -> None:
        self._answering.set()

    def writes(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["method"] != "GET"]

    def close(self) -> None:
        self._answering.set()  # a held request ends with the server
        self._httpd.shutdown()
        self._httpd.server_close()
