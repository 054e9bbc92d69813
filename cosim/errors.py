"""The exceptions a user meets: a scenario with problems, an unknown adapter, an interrupted run.

A user mistake is a :class:`ScenarioError` listing every :class:`Problem` (key path, value,
what is wrong and what is allowed); the CLI prints it without a traceback and exits 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

_MISSING = object()


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a scenario, at a key path."""

    path: str
    message: str
    value: Any = _MISSING

    def __str__(self) -> str:
        shown = "" if self.value is _MISSING else f" = {short(self.value)}"
        return f"{self.path}{shown}: {self.message}"


def short(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def few(names: list[str], limit: int = 12) -> str:
    """The first ``limit`` names, comma-separated, with the count when there are more."""
    shown = ", ".join(names[:limit])
    return shown + (f", ... ({len(names)} in all)" if len(names) > limit else "")


class ScenarioError(Exception):
    """A scenario with problems; ``str()`` lists them all, one per line."""

    def __init__(self, file: Path | str, problems: list[Problem]):
        self.file = str(file)
        self.problems = problems
        count = f"{len(problems)} problem{'s' if len(problems) != 1 else ''}"
        super().__init__(f"{self.file}: {count}:\n" + "\n".join(f" - {p}" for p in problems))


class PowerFlowNotConverged(RuntimeError):
    """A grid's power flow did not converge at a step (a grid sim with ``on_nonconvergence = "fail"``).

    A run that ends on it is ``failed`` with ``error_type = "PowerFlowNotConverged"`` in its
    ``metadata.json``: a verdict about the grid (hosting capacity counts it as a violated limit),
    not a crash. Adapters raise it through :mod:`cosim.sdk`.
    """


class UnknownAdapterError(LookupError):
    """An adapter name that the registry does not know."""


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM during a run, after its folder (series so far, metadata) was written."""

    def __init__(self, run_dir: Path):
        super().__init__(f"interrupted; what was recorded is in {run_dir}")
        self.run_dir = run_dir
