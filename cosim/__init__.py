"""cosim: co-simulation of AI datacenters with the grids, cooling plants and sources around them.

Python API mirroring the CLI::

    import cosim
    result = cosim.run("scenarios/default.toml")   # -> RunResult
    result.kpis, result.timeseries()
"""

from cosim.errors import ScenarioError
from cosim.run import RunResult, run
from cosim.scenario import load_scenario

__all__ = ["RunResult", "ScenarioError", "load_scenario", "run", "validate"]
__version__ = "0.1.0"


def validate(path):
    """Validate a scenario file; returns the Scenario or raises ScenarioError listing every problem."""
    return load_scenario(path)
