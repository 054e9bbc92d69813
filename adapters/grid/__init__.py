"""Grid adapter: a network solved each step, by pandapower/lightsim2grid or by OpenDSS.

The adapter ``grid`` as a package (docs/development.md, "A simulator with several modules"):

* ``params.py``: the ``[sims.<id>]`` keys (network, engine, band, trips, faults) and an element's;
* ``sim.py``: :class:`GridSim`, the adapter (its docstring has both engines' models, inputs and outputs);
* ``checks.py``: what the network makes impossible or worth a warning, found before a run starts;
* ``backend.py``: what the adapter asks of an engine (:class:`~.backend.GridBackend`);
* ``pandapower_flow.py``: the pandapower engine (:class:`~.pandapower_flow.PowerFlow`, lightsim2grid's
  solver), with its per-step arithmetic in C in ``_kernels.c`` (``make build``), imported only when a
  pandapower network is set up;
* ``pandapower_tables.py``: what the adapter reads of a pandapower net's tables, and its element and
  output names, without importing pandapower;
* ``opendss_flow.py``: the OpenDSS engine (:class:`~.opendss_flow.OpenDssFlow`); ``opendss_faults.py``
  its faults; ``opendss_guard.py`` what a user's ``.dss`` file may do (describe and solve a circuit);
  ``opendss_reads.py`` loadings and losses from one bulk read of the currents;
* ``voltage_band.py``: voltages against a band (the all-bus and per-element outputs).
"""

from cosim.adapters.grid.checks import default_rating_warnings, placeholder_rating_warnings
from cosim.adapters.grid.params import ElementParams, SimParams, read_line_trips
from cosim.adapters.grid.pandapower_tables import (
    ELEMENT_ATTRS,
    ELEMENT_VOLTAGE_OUTPUTS,
    GRID_OUTPUTS,
    KINDS,
    MAX_ITERATION,
    MODEL_KIND,
    SERVED_ATTR,
    TOLERANCE_MVA,
    element_ids,
    sanitise,
)
from cosim.adapters.grid.sim import GridSim

__all__ = ["ELEMENT_ATTRS", "ELEMENT_VOLTAGE_OUTPUTS", "GRID_OUTPUTS", "KINDS", "MAX_ITERATION", "MODEL_KIND",
           "SERVED_ATTR", "TOLERANCE_MVA", "ElementParams", "GridSim", "SimParams",
           "default_rating_warnings", "element_ids", "placeholder_rating_warnings", "read_line_trips", "sanitise"]
