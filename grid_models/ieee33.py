"""IEEE 33-bus radial distribution feeder (Baran & Wu 1989), pandapower's ``case33bw``.

Buses are named ``"1"`` … ``"33"`` as in the paper (pandapower index + 1), so bus ``"18"``
is the feeder's far end, the weakest bus of the base case. Lines are named
``"<from>_<to>"`` in the same numbering (the five tie lines, e.g. ``"8_21"``, are out of
service as in the paper) and loads ``"load_<bus>"``.

Line ratings: the paper publishes none, and pandapower's case gives every line 99,999 kA (a
placeholder: loading never binds, and validation warns). A thermal study gives the feeder's
conductor rating with ``network_params = {max_i_ka = 0.4}`` (every line, in kA), or a
pandapower JSON copy with per-line ``net.line.max_i_ka``.

Reference: M. E. Baran and F. F. Wu, "Network reconfiguration in distribution systems for
loss reduction and load balancing", IEEE Trans. Power Delivery 4(2), 1989, pp. 1401-1407.
"""

from __future__ import annotations

import pandapower.networks as pn
from pandapower.auxiliary import pandapowerNet


def build(max_i_ka: float | None = None) -> pandapowerNet:
    """Return the 33-bus feeder (12.66 kV, 3.715 MW / 2.3 Mvar base load) with paper names.

    Args:
        max_i_ka: thermal rating of every line (tie lines included); ``None`` keeps the
            placeholder. [kA]

    Raises:
        ValueError: a rating that is not a positive finite number.
    """
    net = pn.case33bw()
    if max_i_ka is not None:
        if isinstance(max_i_ka, bool) or not isinstance(max_i_ka, (int, float)) or not 0 < max_i_ka < 100:
            raise ValueError(f"network_params.max_i_ka = {max_i_ka!r}: give the lines' rating in kA, a number "
                             "above 0 and below 100 (e.g. 0.4 for a 400 A conductor)")
        net.line["max_i_ka"] = float(max_i_ka)
    number = {idx: str(idx + 1) for idx in net.bus.index}
    net.bus["name"] = [number[idx] for idx in net.bus.index]
    net.line["name"] = [f"{number[f]}_{number[t]}" for f, t in zip(net.line.from_bus, net.line.to_bus)]
    net.load["name"] = [f"load_{number[b]}" for b in net.load.bus]
    return net
