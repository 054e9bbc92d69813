"""CIGRE medium-voltage benchmark network (20 kV, 15 buses, 2 feeders), pandapower's builder.

Built with ``with_der="pv_wind"`` by default: the CIGRE task force's eight PV plants and one
wind turbine are in the net as sgens, so the feeder carries the distributed generation the
benchmark was defined with (pass ``with_der=False`` for the passive variant, ``"all"`` for
batteries, fuel cells and CHP too). The three tie switches S1-S3 are open as in the
benchmark; switch them through the net file if a meshed variant is wanted.

Reference: K. Rudion, A. Orths, Z. Styczynski, K. Strunz, "Design of benchmark of medium
voltage distribution network for investigation of DG integration", IEEE PES GM 2006;
CIGRE TB 575 (2014).
"""

from __future__ import annotations

from typing import Literal

import pandapower.networks as pn
from pandapower.auxiliary import pandapowerNet


def build(with_der: Literal[False, "pv_wind", "all"] = "pv_wind") -> pandapowerNet:
    """Return the CIGRE MV benchmark net.

    Args:
        with_der: which distributed energy resources to include (see module docstring).
    """
    return pn.create_cigre_network_mv(with_der=with_der)
