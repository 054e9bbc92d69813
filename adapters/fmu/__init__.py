"""FMU: runs any FMU (FMI 2.0 or 3.0; co-simulation, or model exchange through fmpy's solvers).

The adapter ``fmu`` as a package (docs/development.md, "A simulator with several modules"):

* ``params.py``: the ``[sims.<id>]`` keys and an instance's start values;
* ``sim.py``: :class:`FmuSim`, the adapter (its docstring has the naming, timing and ending rules);
* ``description.py``: an FMU found and described: its variables, their scenario names and units;
* ``instance.py``: one running FMU instance (fmpy): inputs set, steps taken, outputs read;
* ``archive.py``: the FMU's zip archive checked and extracted within bounds.
"""

from cosim.adapters.fmu.description import FmuError, describe
from cosim.adapters.fmu.instance import FmuInstance
from cosim.adapters.fmu.params import EntityParams, SimParams
from cosim.adapters.fmu.sim import FmuSim

__all__ = ["EntityParams", "FmuError", "FmuInstance", "FmuSim", "SimParams", "describe"]
