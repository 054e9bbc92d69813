"""Serving a live run: uvicorn in the main thread, the run stepping on its own thread.

Ctrl-C or SIGTERM ends the server; the run is then stopped at a step boundary and its folder
written (``status = "stopped"`` before the scenario's end), so nothing recorded is lost. Once
the scenario ends the run folder is written at once (``status = "ok"``) and the server keeps
answering with the final state until Ctrl-C, or stops by itself with ``exit_at_end``.
"""

from __future__ import annotations

import importlib.util
import signal
import socket
import sys
import threading
from typing import Callable

from cosim.live.app import MAX_BODY_BYTES, build_app
from cosim.live.run import LiveRun

#: The packages ``cosim serve`` needs (pyproject's ``live`` extra).
LIVE_EXTRA = ("fastapi", "uvicorn", "prometheus_client")


class LiveExtraMissing(ImportError):
    """fastapi, uvicorn or prometheus-client is not installed."""


def check_extra() -> None:
    """Raise :class:`LiveExtraMissing` naming what to install when the live extra is absent."""
    missing = [name for name in LIVE_EXTRA if importlib.util.find_spec(name) is None]
    if missing:
        raise LiveExtraMissing(f"cosim serve needs {', '.join(missing)}: install the live extra, "
                               "pip install 'cosim[live]'")


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: a free one).

    Raises:
        OSError: the address cannot be bound; the message says what to change.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot listen on {host}:{port} ({exc.strerror or exc}); give another --port "
                      "(--port 0 picks a free one) or --host") from None
    sock.listen(128)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class LiveServer:
    """``run`` served on ``sock``: :meth:`serve` steps it and answers requests until Ctrl-C / SIGTERM
    (or its end, with ``exit_at_end``), or until :meth:`shutdown` is called from another thread.

    Served outside the main thread (a test, a notebook) it catches no signals: stop it with
    :meth:`shutdown` or ``exit_at_end``.
    """

    def __init__(self, run: LiveRun, sock: socket.socket, exit_at_end: bool = False,
                 say: Callable[[str], None] = print, max_body_bytes: int = MAX_BODY_BYTES, ven=None):
        import uvicorn  # the live extra: imported only when a run is served

        self.run, self.sock, self.exit_at_end, self.say = run, sock, exit_at_end, say
        self.url = url_of(sock)
        self.server = uvicorn.Server(uvicorn.Config(build_app(run, max_body_bytes), log_level="warning", access_log=False,
                                                    lifespan="off", timeout_graceful_shutdown=2))
        self.caught: list[int] = []
        self.ven = ven  # a cosim.live.ven.LiveVen: closed (telemetry flushed) after the run is

    def shutdown(self) -> None:
        """Ask :meth:`serve` to return (the run is stopped and its folder written there)."""
        self.server.should_exit = True

    def serve(self) -> int:
        """Serve until asked to stop; the exit code: 0 for a run that reached its end, 1 for a failed
        one, 128 + the signal's number for one stopped by a signal before its end (1 otherwise)."""
        in_main = threading.current_thread() is threading.main_thread()  # signals reach the main thread only
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)} \
            if in_main else {}
        self.run.on_end = self._on_end
        try:
            self.run.start()
            self.server.run(sockets=[self.sock])
        finally:
            name = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}.get(self.caught[0], "a signal") \
                if self.caught else None
            self.run.stop(f"interrupted ({name})" if name else "server stopped")
            if self.ven is not None:
                self.ven.close()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self.sock.close()
        if self.run.status == "failed":
            print(f"run failed: {self.run.reason}", file=sys.stderr)
            return 1
        if self.run.status == "stopped":
            return 128 + self.caught[0] if self.caught else 1
        if self.run.status == "degraded":  # finished, partly unknown: cosim run's exit code for it
            return 3
        return 0

    def _on_signal(self, signum, frame) -> None:  # ours outside uvicorn's own handlers (before and after it serves)
        self.caught.append(signum)
        self.shutdown()

    def _on_end(self, finished: LiveRun) -> None:
        still = not (self.exit_at_end or self.server.should_exit)
        self.say(f"run {finished.status}{f': {finished.reason}' if finished.reason else ''}; run folder: "
                 f"{finished.run_dir}" + (" (still serving the final state; Ctrl-C ends)" if still else ""))
        if self.exit_at_end:
            self.shutdown()
