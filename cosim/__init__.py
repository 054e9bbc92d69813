"""cosim: co-simulation of AI datacenters with the grids, cooling plants and sources around them.

Python API mirroring the CLI::

    import cosim
    result = cosim.run("scenarios/default.toml")   # -> RunResult
    result.kpis, result.timeseries()

    with cosim.Session("scenarios/default.toml") as s:   # step it yourself (direct engine)
        s.run_until(3600)
        s.set("campus", "p_cap_w", 500.0)

The face is lazy: ``import cosim`` (and ``import cosim.sdk``, which every adapter does) loads no
engine, pandas or pyarrow; ``run``, ``Session``, ``RunResult`` and ``load_scenario`` load their
modules the first time they are used (a module ``__getattr__``, as vessim's face does).
"""

from __future__ import annotations

import importlib
from typing import Any

from cosim.errors import ScenarioError

__all__ = ["RunResult", "ScenarioError", "Session", "load_scenario", "run", "validate"]
__version__ = "0.1.0"

# name -> (module, attribute); "run" is the package cosim.run itself, which is callable (see there)
_LAZY = {
    "run": ("cosim.run", None),
    "RunResult": ("cosim.run.runner", "RunResult"),
    "Session": ("cosim.run.session", "Session"),
    "load_scenario": ("cosim.run.runner", "load_scenario"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'cosim' has no attribute {name!r}")
    module_name, attr = _LAZY[name]
    module = importlib.import_module(module_name)
    return module if attr is None else getattr(module, attr)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def validate(path):
    """Validate a scenario file; returns the Scenario or raises ScenarioError listing every problem."""
    return __getattr__("load_scenario")(path)
