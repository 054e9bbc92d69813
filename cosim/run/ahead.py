"""Running the simulators that take no inputs ahead, in a worker process on another core.

A scenario's *head* is every simulator none of whose inputs comes from outside the head: the
weather and carbon series, the datacenter, PV fed by the weather. What it computes does not
depend on anything the rest of the run does, so the direct engine can fork after start-up and
let the child step the head through the whole run while the parent steps the rest (the grid,
the FMUs, the battery, controllers, the recorder). The child sends every head step's record —
its time, its next time and the ``get_data`` result the parent would have read — through a pipe
in batches; the parent's engine takes them in its own stepping order in place of stepping those
simulators itself (:meth:`cosim.run.direct.DirectEngine._step_sim`). The results are the same
bit for bit: the same adapter objects (forked copies, created before the fork) take the same
calls in the same order, and the parent reads the same values (pickled floats are exact).

What the child does that the parent would have seen happens in the parent at the same point:

* a warning a head simulator gives during a step is given again in the parent just before the
  parent takes that step (same message, category, file and line);
* a head simulator that raises (an error, or :class:`cosim.sdk.EndRun`) raises the same
  exception in the parent when the parent reaches that step, so the run ends at the same step
  with the same rows recorded and the same reason;
* ``finalize`` of the head runs in the child; its errors are raised in the parent's finalize.

* a warning given in the head's ``finalize`` is given in the parent's finalize;
* what the head's simulators say of their faster paths (``accelerations()``) at the end reaches the
  run's ``metadata.json``.

The child sends a batch when it holds ~128 KiB of records or :data:`FLUSH_S` after its last one,
whichever comes first. A step's outputs are sent as they are at that step: outputs of
:class:`cosim.sdk.CosimSim`'s ``get_data`` of plain values (numbers, strings, None) as they are,
anything else (an adapter's own ``get_data``, lists, arrays) as a deep copy made then — what a
reader at that step reads. (An adapter that changes an output object in place after its step
would, in one process, show a later reader the changed object; through the worker it shows the
value of the step.)

After a failure or stop in the parent's part, the head has stepped further than the parent:
the parent closes the pipe, and the child, at its next send (within about :data:`FLUSH_S` plus
one step), finalizes the head and exits; one that has not ended after :data:`STOP_WAIT_S` is
killed. No adapter records or writes anything at finalize, so nothing of that shows.

Which simulators: the *head* is closed under "every input comes from inside"; its last stage (a
simulator with inputs that only the recorder reads, like the grid fed by the datacenter) stays in
the parent so that each process has work (:func:`head_sims`).

``[scenario] ahead`` chooses: ``"auto"`` (default) forks when it can pay off — Linux, two or
more usable cores, the main thread (not a Dask worker's task thread), no real-time factor, a
simulator besides the recorder left in the parent, and at least :data:`AUTO_MIN_STEPS` head
steps; ``"on"`` forks whenever the scenario has a head (tests, measurements); ``"off"`` never.
A :class:`cosim.Session` never forks (``set`` may change any simulator's inputs between steps).
"""

from __future__ import annotations

import gc
import os
import pickle
import signal
import sys
import threading
import time
import traceback
import warnings
from multiprocessing.connection import Connection

from cosim.run import blas
from cosim.run.processes import usable_cores
from cosim.sdk import PLAIN_TYPES, CosimSim, EndRun, said_accelerations
from typing import Any

try:
    import fcntl
except ImportError:  # not on Windows: the pipe keeps its default size
    fcntl = None

#: "auto" forks only for runs with at least this many head steps (a fork and its first
#: batch cost a few tens of ms; a short run gains less than that).
AUTO_MIN_STEPS = 1_000
#: Record kinds besides a head simulator's index (>= 0).
WARN, RAISE, END = -1, -2, -3
#: The child sends a batch when it holds this many bytes' worth of records (estimated from the
#: first batch); the pipe is widened to hold several (Linux allows 1 MiB without privileges).
BATCH_BYTES = 128 * 1024
PIPE_BYTES = 1024 * 1024
FIRST_BATCH = 16
#: ... and at the latest this long after the last batch, so that a slow head keeps the parent fed,
#: the stall clock (``stall_timeout_s``) runs per step rather than per batch, and a stop in the
#: parent reaches the worker (through its next send) within about this long. [s]
FLUSH_S = 0.05
#: How long the parent waits for a child it told to stop before killing it. [s]
STOP_WAIT_S = 10.0


class WorkerDied(RuntimeError):
    """The worker process stepping the head ended without saying why (killed, out of memory, a crash)."""


def head_sims(engine: Any) -> list[Any]:
    """The simulators a worker process steps ahead, in start order: those none of whose inputs
    comes from outside the set (none held), less its last stage — a simulator with inputs whose
    outputs only the recorder reads (the grid of a datacenter-and-feeder scenario) stays in the
    run's process, which would otherwise have only the recorder to do while the worker does all."""
    head = closed_head(engine)
    readers: dict[int, set[str]] = {}
    for sim in engine.sims:
        for pull in sim.pulls:
            readers.setdefault(id(pull.src), set()).add(sim.sid)
    return [s for s in head if not (s.pulls and readers.get(id(s), set()) <= {engine.RECORDER_SID})]


def closed_head(engine: Any) -> list[Any]:
    """The simulators none of whose inputs come from outside the set, in start order (none held)."""
    head: set[int] = set()
    grown = True
    while grown:  # add every simulator whose sources are all in the set (none at first), until none is left
        grown = False
        for sim in engine.sims:
            if id(sim) not in head and sim.sid != engine.RECORDER_SID and not sim.held and \
                    all(id(pull.src) in head for pull in sim.pulls):
                head.add(id(sim))
                grown = True
    return [s for s in engine.sims if id(s) in head]


def wanted(engine: Any, head: list[Any]) -> bool:
    """Whether ``[scenario] ahead`` and this machine say to fork for this head."""
    mode = getattr(engine.scn.scenario, "ahead", "auto")
    if mode == "off" or not head or len(head) == len(engine.sims) or not hasattr(os, "fork"):
        return False
    if threading.current_thread() is not threading.main_thread():
        return False  # a Dask worker's task thread, a notebook's background thread: never fork there
    if mode == "on":
        return True
    if not sys.platform.startswith("linux") or engine.scn.scenario.rt_factor:
        return False
    if usable_cores() < 2:
        return False
    ahead_ids = {id(s) for s in head}
    if all(id(s) in ahead_ids or s.sid == engine.RECORDER_SID for s in engine.sims):
        return False  # only the recorder left here: the pipe would cost what it saves
    return _head_steps(engine, head) >= AUTO_MIN_STEPS


def _head_steps(engine: Any, head: list[Any]) -> int:
    """Steps the head takes over the run (each at its own step size)."""
    scn = engine.scn
    return sum(-(-engine.until // max(1, scn.ticks(scn.sim_step_s(s.sid)))) for s in head)


class Ahead:
    """The parent's end: the child's process and the records it sent, taken in stepping order."""

    def __init__(self, engine: Any, head: list[Any]):
        self.sids = [s.sid for s in head]
        sys.stdout.flush()
        sys.stderr.flush()
        read_fd, write_fd = os.pipe()
        _widen(write_fd)
        try:
            pid = os.fork()
        except OSError:
            os.close(read_fd)
            os.close(write_fd)
            raise
        if pid == 0:  # the child: never returns
            os.close(read_fd)
            _child(engine, head, write_fd)
        os.close(write_fd)
        self.pid = pid
        self._conn = Connection(read_fd, readable=True, writable=False)
        self._records: list[tuple] = []
        self._pos = 0
        self._ended: dict[int, BaseException] | None = None  # finalize errors by head index, once ended
        self._closed = False
        self._hung = False
        self._raised = False
        self.ended_how: str | None = None  # how the worker process ended ("exit code 0", ...), once it did
        #: the worker's memory at its end (``_memory``), once it said so
        self.memory: dict[str, float] | None = None
        #: what the head's simulators said of their faster paths at the end (:func:`cosim.sdk.said_accelerations`)
        self.accelerations: list[tuple[str, dict]] = []
        self.index = {s.sid: k for k, s in enumerate(head)}
        #: a worker that sends nothing for this long has hung (scenario.stall_timeout_s) [s]
        self.stall_s = engine.scn.scenario.stall_timeout_s
        for sim in head:
            sim.feed = self

    # -- during the run ---------------------------------------------------------------------
    def take(self, sim: Any, t: int) -> tuple[int | None, int | None, dict | None]:
        """``(next time, output time, outputs)`` of ``sim``'s step at ``t`` as the child took it
        (its warnings given here first; its exception raised here)."""
        while True:
            if self._pos == len(self._records):
                self._receive()
            record = self._records[self._pos]
            self._pos += 1
            kind = record[0]
            if kind >= 0:
                if record[1] != t or kind != self.index[sim.sid]:
                    raise RuntimeError(f"the worker process stepped {self.sids[kind]!r} at {record[1]} where this "
                                       f"process expected {sim.sid!r} at {t} (a bug: please report it)")
                return record[2], record[3], record[4]
            if kind == WARN:
                _, message, category, filename, lineno = record
                warnings.warn_explicit(message, category, filename, lineno)
            elif kind == RAISE:
                self._raised = True  # its END (finalize errors, memory) follows
                raise _exception(record[2])
            else:  # END before this step: the child stopped stepping without an error
                self._ended = record[1]
                self.memory, self.accelerations = record[2], record[3]
                raise RuntimeError(f"the worker process stopped before stepping {sim.sid!r} at {t} "
                                   "(a bug: please report it)")

    def _receive(self) -> None:
        if self.stall_s and not self._conn.poll(self.stall_s):
            self._hung = True  # killed at finish, not waited for
            raise WorkerDied(f"the worker process stepping {', '.join(self.sids)} sent nothing for "
                             f"{self.stall_s:g} s (scenario.stall_timeout_s: raise it for simulators whose step "
                             "takes longer); what was recorded up to here is kept")
        try:
            payload = self._conn.recv_bytes()
        except (EOFError, OSError):
            raise WorkerDied(f"the worker process stepping {', '.join(self.sids)} ended unexpectedly "
                             f"({self._reap(wait_s=STOP_WAIT_S)}); what was recorded up to here is kept") from None
        self._records = pickle.loads(payload)
        self._pos = 0

    def describe(self) -> dict[str, Any]:
        """What ``metadata.json`` says of the worker: which simulators it stepped, its memory."""
        return {"sims": list(self.sids), **(self.memory or {})}

    # -- at the end -------------------------------------------------------------------------
    def finish(self, complete: bool) -> dict[str, BaseException]:
        """End the child: after a complete run read its last records (its finalize errors, by
        sid); otherwise tell it to stop (close the pipe) and wait. Idempotent."""
        if self._closed:
            return {}
        self._closed = True
        errors: dict[str, BaseException] = {}
        try:
            if complete or self._at_end():
                errors = {self.sids[k]: exc for k, exc in self._drain(complete).items()}
        except WorkerDied as exc:  # it died (or hung) finalizing the head: the run is not ok
            if complete:
                errors = {self.sids[0]: exc}
        self._conn.close()
        self.ended_how = self._reap(wait_s=0.0 if self._hung else STOP_WAIT_S)
        return errors

    def _at_end(self) -> bool:
        """The child stopped stepping (it raised): its END follows, or was read."""
        return self._raised or any(r[0] in (RAISE, END) for r in self._records[self._pos:])

    def _drain(self, complete: bool) -> dict[int, BaseException]:
        """Records up to END (steps nobody takes: the child ran past a failure's point); after a
        complete run the warnings among them (the head's ``finalize``) are given here."""
        if self._ended is not None:
            return {k: _exception(e) for k, e in self._ended.items()}
        while True:
            for record in self._records[self._pos:]:
                if record[0] == WARN and complete:
                    warnings.warn_explicit(*record[1:])
                elif record[0] == END:
                    self.memory, self.accelerations = record[2], record[3]
                    return {k: _exception(e) for k, e in record[1].items()}
            self._pos = len(self._records)
            self._receive()

    def _reap(self, wait_s: float = 0.0) -> str:
        """Wait for the child (kill it after ``wait_s``); how it ended."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                return "already reaped"
            if pid:
                if os.WIFSIGNALED(status):
                    return f"killed by signal {os.WTERMSIG(status)}"
                return f"exit code {os.WEXITSTATUS(status)}"
            if time.monotonic() >= deadline:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
                return "killed after not stopping"
            time.sleep(0.01)


# -- the child ---------------------------------------------------------------------------------
def _child(engine: Any, head: list[Any], fd: int) -> None:
    """Step the head to the end, sending records in batches; finalize it; exit (never returns)."""
    code = 0
    try:
        # the parent handles Ctrl-C and SIGTERM and stops us; a handler (not SIG_IGN) is not
        # inherited by programs a simulator starts
        signal.signal(signal.SIGINT, _ignore)
        signal.signal(signal.SIGTERM, _ignore)
        gc.freeze()  # what the fork shared stays shared: the collector no longer touches it
        blas.one_thread().__enter__()  # as the parent's run (cosim.run.blas); held until the process exits
        conn = Connection(fd, readable=False, writable=True)
        sub = engine.subset(head)
        index = {s.sid: k for k, s in enumerate(head)}
        records: list[tuple] = []

        # CosimSim.get_data hands out fresh dicts; another adapter's may be its own, changed later
        fresh = [type(s.obj).get_data is CosimSim.get_data for s in head]

        def tap(sim, t, nxt, out_t, data):
            k = index[sim.sid]
            if data is not None and not (fresh[k] and all(PLAIN_TYPES.issuperset(map(type, d.values()))
                                                          for d in data.values())):
                data = _deep_copy(data)  # what a reader at this step would read, kept as it is now
            records.append((k, t, nxt, out_t, data))

        def show(message, category, filename, lineno, file=None, line=None):
            records.append((WARN, str(message), category, filename, lineno))

        for sim in head:
            sim.tap = tap
        warnings.showwarning = show
        batch, t, errors = FIRST_BATCH, None, None
        sids = [s.sid for s in head]
        clock = time.monotonic
        last = clock()

        def send(payload: bytes) -> None:
            try:
                conn.send_bytes(payload)
            except BrokenPipeError:  # the parent stopped (not a simulator's own BrokenPipeError)
                raise _ParentGone from None

        try:
            try:
                while (t := sub.next_time) is not None:
                    sub.step(t)
                    if len(records) >= batch or (records and clock() - last >= FLUSH_S):
                        payload, records[:] = _pack(records, sids)
                        if payload is None:
                            break  # an output that cannot be sent: the parent raises at its step
                        send(payload)
                        last = clock()
                        batch = max(FIRST_BATCH, min(4096, BATCH_BYTES * len(records) // max(1, len(payload))))
                        records.clear()
            except _ParentGone:
                raise
            except BaseException as exc:  # noqa: BLE001 — the parent raises it at this step
                records.append((RAISE, t, _portable(exc)))
            # what was stepped goes out before finalize: a finalize that crashes loses no step
            payload, records[:] = _pack(records, sids)
            send(payload if payload is not None else pickle.dumps(records, pickle.HIGHEST_PROTOCOL))
            records.clear()
            errors = _finalize(sub.sims, index)  # its warnings land in records, before END
            said = said_accelerations((sim.sid, sim.obj) for sim in sub.sims)  # (for the run's metadata.json)
            records.append((END, errors, _memory(), said))
            send(pickle.dumps(records, pickle.HIGHEST_PROTOCOL))
        except _ParentGone:  # the parent stopped (a failure or stop there): finalize and go
            if errors is None:
                _finalize(sub.sims, index)
    except BaseException:  # noqa: BLE001 — nothing may escape into the parent's code path
        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


class _ParentGone(Exception):
    """The parent closed its end of the pipe (it stopped)."""


def _ignore(signum, frame) -> None:
    """The worker's SIGINT/SIGTERM handler: the parent decides when the worker stops."""


def _deep_copy(data: dict) -> dict:
    """A deep copy of a step's outputs as they are now (for outputs the adapter may change later)."""
    try:
        return pickle.loads(pickle.dumps(data, pickle.HIGHEST_PROTOCOL))
    except Exception:  # noqa: BLE001 — not picklable: _pack names it at its batch
        return data


def _pack(records: list[tuple], sids: list[str]) -> tuple[bytes | None, list[tuple]]:
    """``(pickled batch, records)``; or, when a record cannot be pickled (an adapter's output
    that is not plain data), ``(None, the records before it + a RAISE at its step naming it)``."""
    try:
        return pickle.dumps(records, pickle.HIGHEST_PROTOCOL), records
    except Exception as exc:  # noqa: BLE001 — found and named below
        for n, record in enumerate(records):
            try:
                pickle.dumps(record, pickle.HIGHEST_PROTOCOL)
            except Exception:  # noqa: BLE001
                who = f"simulator {sids[record[0]]!r} gave a value at time {record[1]}" if record[0] >= 0 else \
                    f"a warning ({str(record[1])[:80]!r}) has a part"
                error = TypeError(f"{who} that cannot be sent from the worker process "
                                  f"stepping it ahead ({type(exc).__name__}: {exc}); give plain values (numbers, "
                                  "strings, lists of them), or run in one process: --set scenario.ahead=off")
                return None, [*records[:n], (RAISE, record[1], _portable(error))]
        raise


def _finalize(sims: list[Any], index: dict[str, int]) -> dict[int, Any]:
    """``finalize`` each simulator (all of them, whatever raises); the errors by head index."""
    errors = {}
    for sim in sims:
        try:
            sim.obj.finalize()
        except BaseException as exc:  # noqa: BLE001
            errors[index[sim.sid]] = _portable(exc)
    return errors


def _memory() -> dict[str, float]:
    """This process's peak resident memory and what of it is its own (not shared with the
    parent by the fork), from /proc (Linux; empty elsewhere). [MiB]"""
    out: dict[str, float] = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    out["peak_rss_mib"] = round(int(line.split()[1]) / 1024, 1)
        private = 0
        with open("/proc/self/smaps_rollup") as f:
            for line in f:
                if line.startswith(("Private_Clean:", "Private_Dirty:")):
                    private += int(line.split()[1])
        out["private_mib"] = round(private / 1024, 1)
    except (OSError, ValueError, IndexError):
        pass
    return out


def _widen(fd: int) -> None:
    try:
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except (AttributeError, OSError):
        pass  # the default pipe (64 KiB) works too, with the child waiting more often


def _portable(exc: BaseException) -> Any:
    """The exception itself when it survives pickling, else ``(class name, message, traceback)``."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001
        return (type(exc).__name__, str(exc), "".join(traceback.format_exception(exc)), isinstance(exc, EndRun))


def _exception(portable: Any) -> BaseException:
    if isinstance(portable, BaseException):
        return portable
    name, message, text, ended = portable
    exc = type(name, (EndRun if ended else RuntimeError,), {"__module__": "cosim.run.ahead"})(message)
    exc.add_note(f"raised in the worker process stepping the head:\n{text}")
    return exc
