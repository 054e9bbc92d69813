"""What an engine reports of a run: status, reason, speed, rows on disk, real-time lag."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Outcome:
    """How a run went (the runner turns it into ``metadata.json``).

    Attributes:
        status: ``ok``, ``failed`` or ``interrupted``.
        reason: why it is not ``ok``, or why an ``ok`` run ended early (else None).
        wall_s: wall time of the engine. [s]
        n_steps: recorded steps. [-]
        rows_recorded: rows in ``timeseries.parquet``. [-]
        rt_behind_max_s: with a real-time factor, how far behind the wall clock the run fell at
            worst (0 when it kept up; None without one). [s]
        ahead: see the attribute.
        error_type: the class name of the exception that failed the run (``"PowerFlowNotConverged"``
            for a grid that did not converge with ``on_nonconvergence = "fail"``), None otherwise:
            what a study reacts to, rather than the wording of ``reason``.
    """

    status: str
    reason: str | None
    wall_s: float
    n_steps: int
    rows_recorded: int
    rt_behind_max_s: float | None = None
    #: the direct engine's worker process for the simulators that take no inputs (which, its
    #: memory), when one ran (:mod:`cosim.run.ahead`)
    ahead: dict | None = None
    error_type: str | None = None
    #: the faster paths the run's own simulators say they took (:func:`cosim.sdk.run_accelerations`), by name
    accelerations: dict | None = None

    @property
    def steps_per_s(self) -> float:
        return self.n_steps / self.wall_s if self.wall_s > 0 else float("nan")


def check_complete(status: str, reason: str | None, rows: int, n_steps: int) -> tuple[str, str | None]:
    """A run that says ``ok`` but recorded fewer rows than steps stopped early (a remote simulator
    that quit without an exception): it is ``failed``. One that says ``ok`` with a reason was
    ended on purpose by a simulator (:class:`cosim.sdk.EndRun`) and stays ``ok``."""
    if status == "ok" and reason is None and rows < n_steps:
        return "failed", f"the run stopped after {rows} of {n_steps} steps"
    return status, reason
