"""Stopping a run on SIGTERM or Ctrl-C without losing what it recorded.

A signal handler that raises at once lands anywhere — inside mosaik's asyncio loop, halfway
through writing a row group — and can hang the shutdown or lose ``metadata.json``. Here the
first SIGTERM or SIGINT only *requests* a stop; the recorder checks the request at each of
its steps (every engine steps it) and raises :class:`StopRequested` there, a normal
exception on a known path: the engine ends the run as ``interrupted``, the recorder closes
the Parquet file, the runner writes metadata and KPIs. A second signal raises
``KeyboardInterrupt`` at once, for a run stuck where the recorder is never reached.
"""

from __future__ import annotations

import signal
import threading


class RunStopped(Exception):
    """The run cannot go on, but what it recorded is sound: an engine ends it ``interrupted``
    with this message (a stop asked for, a federation that stopped answering)."""


class StopRequested(RunStopped):
    """A stop was asked for (SIGTERM, Ctrl-C); raised at a step boundary."""


class _Stop:
    def __init__(self) -> None:
        self.reason: str | None = None
        self._previous: dict[int, object] = {}
        self._depth = 0  # nested installs (the runner around the engine): only the outermost acts

    def install(self) -> None:
        """Catch SIGTERM and SIGINT for the duration of a run (main thread only; a Dask
        worker's task thread leaves signals to the worker). Nested calls (the runner holds it
        from the run folder's creation to its final metadata, the engine inside) keep the
        outer handlers and a stop already asked for."""
        self._depth += 1
        if self._depth > 1:
            return
        self.reason = None
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in (signal.SIGTERM, signal.SIGINT):
            self._previous[signum] = signal.signal(signum, self._handle)

    def restore(self) -> None:
        """End what :meth:`install` began; the outermost call also drops a stop asked for (it
        belonged to the run that ends: a later Session in the process must not meet it)."""
        self._depth = max(self._depth - 1, 0)
        if self._depth:
            return
        self.reason = None
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()

    def _handle(self, signum, frame) -> None:
        name = "SIGTERM" if signum == signal.SIGTERM else "Ctrl-C"
        if self.reason is not None:  # asked twice: stop now, wherever we are
            raise KeyboardInterrupt(f"interrupted ({name}, twice)")
        self.reason = f"interrupted ({name})"

    def request(self, reason: str) -> None:
        """Ask the running run to stop at its next recorded step (a Session, a test)."""
        self.reason = reason

    def check(self) -> None:
        """Raise :class:`StopRequested` when a stop was asked for."""
        if self.reason is not None:
            raise StopRequested(self.reason)


#: The process's one stop request (one run at a time per process).
STOP = _Stop()
