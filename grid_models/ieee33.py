"""IEEE 33-bus radial distribution feeder (Baran & Wu 1989), pandapower's ``case33bw``.

Buses are named ``"1"`` … ``"33"`` as in the paper (pandapower index + 1), so bus ``"18"``
is the feeder's far end, the weakest bus of the base case. Lines are named
``"<from>_<to>"`` in the same numbering (the five tie lines, e.g. ``"8_21"``, are out of
service as in the paper) and loads ``"load_<bus>"``.

Reference: M. E. Baran and F. F. Wu, "Network reconfiguration in distribution systems for
loss reduction and load balancing", IEEE Trans. Power Delivery 4(2), 1989, pp. 1401-1407.
"""

from __future__ import annotations

import pandapower.networks as pn
from pandapower.auxiliary import pandapowerNet


def build() -> pandapowerNet:
    """Return the 33-bus feeder (12.66 kV, 3.715 MW / 2.3 Mvar base load) with paper names."""
    net = pn.case33bw()
    number = {idx: str(idx + 1) for idx in net.bus.index}
    net.bus["name"] = [number[idx] for idx in net.bus.index]
    net.line["name"] = [f"{number[f]}_{number[t]}" for f, t in zip(net.line.from_bus, net.line.to_bus)]
    net.load["name"] = [f"load_{number[b]}" for b in net.load.bus]
    return net
