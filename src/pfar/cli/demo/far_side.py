"""The demo's far side: a loopback HTTP server that records every request and applies
each Idempotency-Key once, so that a write sent twice shows."""

from __future__ import annotations

import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FarSide:
    """The outside world: records requests, applies each Idempotency-Key once."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, str | None]] = []
        self.applied: Counter[str] = Counter()
        self.replays: Counter[str] = Counter()
        side = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _any(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                key = self.headers.get("Idempotency-Key")
                side.requests.append((self.command, self.path, key))
                if self.path.endswith("/slow"):
                    time.sleep(3)
                if self.command != "GET" and key:
                    if key in side.applied:
                        side.replays[key] += 1
                    else:
                        side.applied[key] += 1
                body = b"notes of the week" if self.command == "GET" else b'{"ok": true}'
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = _any

            def log_message(self, format: str, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # the kernel was killed mid-request: that is the point of the demo

        self.httpd = Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"
