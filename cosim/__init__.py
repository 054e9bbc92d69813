"""cosim: co-simulation of AI datacenters with the grids, cooling plants and sources around them.

Python API mirroring the CLI::

    import cosim
    result = cosim.run("scenarios/default.toml")   # -> RunResult
    result.kpis, result.timeseries()

    with cosim.Session("scenarios/default.toml") as s:   # step it yourself (direct engine)
        s.run_until(3600)
        s.set("campus", "p_cap_w", 500.0)
"""

from cosim.errors import ScenarioError
from cosim.run import RunResult, run
from cosim.run.session import Session
from cosim.scenario import load_scenario

__all__ = ["RunResult", "ScenarioError", "Session", "load_scenario", "run", "validate"]
__version__ = "0.1.0"


def validate(path):
    """Validate a scenario file; returns the Scenario or raises ScenarioError listing every problem."""
    return load_scenario(path)
