"""Transmission dynamics: an ANDES time-domain (transient stability) simulation stepped by cosim.

The adapter ``andes_grid`` as a package (docs/development.md, "A simulator with several modules"):

* ``params.py``: the ``[sims.<id>]`` keys (case, DYR, faults, machine trips, integration step) and a
  ``Load``'s (bus, power, PERC1 inside ANDES);
* ``sim.py``: :class:`AndesGridSim`, the adapter (its docstring has the model, its inputs and outputs);
* ``cases.py``: reading a case and its dynamic data, what the run cannot use of them, its buses and machines;
* ``perc1.py``: PERC1 as a native ANDES model, registered in a case at run time (imports ANDES: loaded
  only when a Load has a native PERC1);
* ``perc1_record.py``: PERC1's parameters as a PSS/E DYR-style record and a table, and back
  (``cosim model-record``).
"""

from cosim.adapters.andes_grid.cases import CASES, case_info, case_path, find_bus, load_case
from cosim.adapters.andes_grid.params import LoadParams, SimParams, perc1_of
from cosim.adapters.andes_grid.sim import AndesGridSim

__all__ = ["CASES", "AndesGridSim", "LoadParams", "SimParams", "case_info", "case_path", "find_bus", "load_case",
           "perc1_of"]
