"""Local sources for live-operation tests: an HTTP JSON endpoint and a fake Prometheus query API,
each an ``http.server`` on 127.0.0.1 at a free port, started and stopped by the test."""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytest.importorskip("fastapi")  # the live extra (pyproject's test extra includes it)
pytest.importorskip("uvicorn")
pytest.importorskip("httpx")
pytest.importorskip("prometheus_client")


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address):  # a client that gave up (a timeout test): not news
        pass


class Source:
    """A local HTTP server answering ``answer(path, query) -> (status, body)``; records the requests."""

    def __init__(self, answer):
        self.answer = answer
        self.requests: list[tuple[str, dict[str, list[str]]]] = []
        source = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 — http.server's name
                parts = urllib.parse.urlsplit(self.path)
                query = urllib.parse.parse_qs(parts.query)
                source.requests.append((parts.path, query))
                status, body = source.answer(parts.path, query)
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):  # quiet
                pass

        self.httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.stopped = False

    def stop(self) -> None:
        """Stop answering: the port is closed (connections are refused from now on)."""
        if not self.stopped:
            self.stopped = True
            self.httpd.shutdown()
            self.httpd.server_close()
            self.thread.join(timeout=5)


@pytest.fixture
def make_source():
    started: list[Source] = []

    def make(answer) -> Source:
        source = Source(answer)
        started.append(source)
        return source

    yield make
    for source in started:
        source.stop()


def poll_until(check, what: str, timeout_s: float = 20.0, every_s: float = 0.05):
    """``check()``'s first truthy result; fails the test naming ``what`` when none comes within ``timeout_s``
    (a bound so the test stops by itself, not a timing assertion)."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what} after {timeout_s:g} s (last: {result!r})")
        time.sleep(every_s)


@pytest.fixture
def until():
    return poll_until
