"""Simulators in processes of their own: started by cosim, watched, and never left hanging a run.

For ``process = "subprocess"`` cosim starts ``python -m cosim.run.remote ADAPTER 127.0.0.1:PORT
--remote`` itself (mosaik then *connects* to it), so it owns the process: its output goes to
``simulators.log`` in the run folder (a ``--quiet`` run prints nothing of it), the wait for it
to listen is bounded by a start timeout that grows with the machine's load, and a
:class:`Watchdog` thread ends the run as ``failed`` within a second when the process dies —
mosaik's channel never fails a pending request when the socket closes, so a killed simulator
used to hang the run forever. The watchdog also ends a run that makes no progress for
``stall_timeout_s`` (a simulator that stopped answering, here or on a remote host).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS tells it, else all)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


#: Seconds a started simulator gets to listen, on an idle machine (scaled up by the load).
START_TIMEOUT_S = 30.0


def default_start_timeout_s() -> float:
    """:data:`START_TIMEOUT_S` times the load per core, when the machine is busier than its cores. [s]"""
    try:
        load = os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:
        load = 1.0
    return START_TIMEOUT_S * max(1.0, load)


class SimulatorProcessError(RuntimeError):
    """A simulator process that could not start, or died."""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _listening(port: int, log_path: Path) -> bool:
    """Whether something listens on ``port``, without connecting: the simulator server accepts
    exactly one connection, mosaik's. On Linux from ``/proc/net/tcp``; elsewhere from the
    simulator's own log line ("awaits connection")."""
    tables = [Path("/proc/net/tcp"), Path("/proc/net/tcp6")]
    if tables[0].exists():
        wanted = f":{port:04X}"
        for table in tables:
            try:
                rows = table.read_text().splitlines()[1:]
            except OSError:
                continue
            if any(r.split()[1].endswith(wanted) and r.split()[3] == "0A" for r in rows if len(r.split()) > 3):
                return True  # state 0A: LISTEN
        return False
    try:
        return "awaits connection" in log_path.read_text(errors="replace").rsplit("== simulator", 1)[-1]
    except OSError:
        return False


class SimProcesses:
    """The simulator processes of one run.

    Args:
        log_path: where their output goes (appended, a header per process).
        start_timeout_s: how long each may take to listen. [s]
    """

    def __init__(self, log_path: Path, start_timeout_s: float | None = None):
        self.log_path = log_path
        self.start_timeout_s = start_timeout_s or default_start_timeout_s()
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, sid: str, target: str) -> str:
        """Start simulator ``sid`` (``module:Class``) and return the address mosaik connects to.

        Raises:
            SimulatorProcessError: it exited, or did not listen within the start timeout.
        """
        port = _free_port()
        with self.log_path.open("a") as log:
            log.write(f"== simulator {sid}: {target}, port {port}\n")
        log = self.log_path.open("a")
        # the child waits for mosaik's connection as long as cosim waited for it to listen, and more
        timeout = str(int(self.start_timeout_s) + 30)
        proc = subprocess.Popen([sys.executable, "-m", "cosim.run.remote", target, f"127.0.0.1:{port}", "--remote",
                                 "--timeout", timeout], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        self.procs[sid] = proc
        deadline = time.monotonic() + self.start_timeout_s
        while not _listening(port, self.log_path):
            if proc.poll() is not None:
                raise SimulatorProcessError(f"simulator {sid!r} exited while starting (exit code {proc.returncode}): "
                                            f"{self.log_tail()}")
            if time.monotonic() > deadline:
                raise SimulatorProcessError(f"simulator {sid!r} did not start listening within "
                                            f"{self.start_timeout_s:.0f} s (a busy machine? raise "
                                            f"scenario.start_timeout_s): {self.log_tail()}")
            time.sleep(0.05)
        return f"127.0.0.1:{port}"

    def dead(self) -> tuple[str, int] | None:
        """``(sid, exit code)`` of a process that has exited, or None."""
        for sid, proc in self.procs.items():
            if proc.poll() is not None:
                return sid, proc.returncode
        return None

    def log_tail(self, n_lines: int = 3) -> str:
        """The last lines of ``simulators.log`` (what a dying simulator said), one line."""
        try:
            lines = [line.strip() for line in self.log_path.read_text(errors="replace").splitlines()
                     if line.strip() and not line.startswith("== simulator") and "awaits connection" not in line]
        except OSError:
            return "(no log)"
        return " | ".join(lines[-n_lines:])[-400:] or "(no output)"

    def stop(self) -> None:
        """Terminate what still runs (mosaik asked them to stop already at a clean end)."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(2.0)
            except subprocess.TimeoutExpired:
                proc.kill()


class Watchdog(threading.Thread):
    """Ends a run whose simulator process died, or that made no progress for ``stall_timeout_s``.

    Args:
        processes: the run's simulator processes.
        last_progress: returns the monotonic time of the last finished step.
        stall_timeout_s: how long without a step counts as a stalled run (None: no limit). [s]
        on_failure: called once, from this thread, with the reason.
    """

    def __init__(self, processes: SimProcesses, last_progress: Callable[[], float], stall_timeout_s: float | None,
                 on_failure: Callable[[str], None]):
        super().__init__(name="cosim-watchdog", daemon=True)
        self.processes = processes
        self.last_progress = last_progress
        self.stall_timeout_s = stall_timeout_s
        self.on_failure = on_failure
        self.reason: str | None = None
        self._stop = threading.Event()

    def run(self) -> None:
        while not self._stop.wait(0.25):
            dead = self.processes.dead()
            if dead:
                self._fail(self.death_reason(self.processes, *dead))
                return
            if self.stall_timeout_s and time.monotonic() - self.last_progress() > self.stall_timeout_s:
                self._fail(f"no step finished for {self.stall_timeout_s:g} s: a simulator stopped answering "
                           "(raise scenario.stall_timeout_s if a step really takes that long)")
                return

    @staticmethod
    def death_reason(processes: SimProcesses, sid: str, code: int) -> str:
        how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
        return f"simulator {sid!r} died ({how}): {processes.log_tail()}"

    def _fail(self, reason: str) -> None:
        self.reason = reason
        self.on_failure(reason)

    def stop(self) -> None:
        self._stop.set()
