"""An HTTP proxy in front of the tests' moto S3 server that injects throttling and resets.

``FlakyProxy(upstream, every=3, reset_every=7)`` answers every ``every``-th request with
``503 SlowDown`` (as S3 does when throttling) and drops the connection without an answer
on every ``reset_every``-th, forwarding the rest unchanged; ``every=1`` throttles all.
"""

from __future__ import annotations

import http.client
import itertools
import socket
import struct
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)


class FlakyProxy:
    """Start with :meth:`start` (returns the endpoint URL); counts what it injected."""

    def __init__(self, upstream: str, every: int = 3, reset_every: int = 0) -> None:
        self.upstream = urlsplit(upstream)
        self.every = every
        self.reset_every = reset_every
        self.counter = itertools.count(1)
        self.lock = threading.Lock()
        self.injected = {"slowdown": 0, "reset": 0, "forwarded": 0}
        self.server: ThreadingHTTPServer | None = None

    def _fault(self) -> str | None:
        with self.lock:
            n = next(self.counter)
            if self.reset_every and n % self.reset_every == 0:
                self.injected["reset"] += 1
                return "reset"
            if self.every and n % self.every == 0:
                self.injected["slowdown"] += 1
                return "slowdown"
            self.injected["forwarded"] += 1
            return None

    def start(self) -> str:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                fault = proxy._fault()
                if fault == "reset":  # a connection reset: RST, no answer
                    self.connection.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                    )
                    self.close_connection = True
                    self.connection.close()
                    return
                if fault == "slowdown":
                    self.send_response(503, "Slow Down")
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(SLOW_DOWN)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(SLOW_DOWN)
                    return
                up = http.client.HTTPConnection(
                    proxy.upstream.hostname, proxy.upstream.port, timeout=60
                )
                headers = {k: v for k, v in self.headers.items() if k.lower() != "expect"}
                up.request(self.command, self.path, body=body, headers=headers)
                resp = up.getresponse()
                data = resp.read()
                self.send_response(resp.status, resp.reason)
                for k, v in resp.getheaders():
                    if k.lower() not in ("transfer-encoding", "content-length", "connection"):
                        self.send_header(k, v)
                # a HEAD answer has no body but says the object's length
                length = resp.getheader("Content-Length") if self.command == "HEAD" else None
                self.send_header("Content-Length", length or str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                up.close()

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
