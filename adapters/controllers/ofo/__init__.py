"""Online feedback optimisation (OFO): hold every monitored bus-phase in band with a
datacenter's compute and a battery's active and reactive power, at the least cost.

The adapter ``ofo`` as a package (docs/development.md, "A simulator with several modules"):

* ``params.py``: an entity's keys (:class:`OFOParams`, with its sites and fleets) and the sim's;
* ``sim.py``: :class:`OFOSim`, the adapter (its docstring has the method, its equations and sources);
* ``controller.py``: the primal-dual iteration (:class:`OFOController`);
* ``sensitivity.py``: the feeder model's sensitivities (:class:`FeederSensitivity`);
* ``fleets.py``: one fleet's batch control (:class:`FleetBatch`).
"""

from cosim.adapters.controllers.ofo.controller import EXHAUSTED_TOL_FRAC, OFOController
from cosim.adapters.controllers.ofo.fleets import FleetBatch
from cosim.adapters.controllers.ofo.params import FleetControl, OFOParams, OFOSimParams, SiteControl, phases_problem
from cosim.adapters.controllers.ofo.sensitivity import FeederSensitivity
from cosim.adapters.controllers.ofo.sim import (
    KNOB_OUTPUTS,
    OUTPUTS,
    PAUSE_OUTPUTS,
    SITE_INPUTS,
    OFOSim,
    fleet_outputs,
    site_inputs,
    site_outputs,
)

__all__ = ["EXHAUSTED_TOL_FRAC", "KNOB_OUTPUTS", "OUTPUTS", "PAUSE_OUTPUTS", "SITE_INPUTS", "FeederSensitivity",
           "FleetBatch", "FleetControl", "OFOController", "OFOParams", "OFOSim", "OFOSimParams", "SiteControl",
           "fleet_outputs", "phases_problem", "site_inputs", "site_outputs"]
