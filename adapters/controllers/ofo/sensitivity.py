"""The OFO controller's feeder model: the sensitivities ``J = ∂v/∂x`` of every monitored bus-phase to
the sites' and the battery's power, by central differences on a copy of the feeder (OpenDSS)."""

from __future__ import annotations

import numpy as np

from cosim import grid_models
from cosim.adapters._grid_opendss import OpenDssFlow
from cosim.adapters.controllers.ofo.params import OFOParams

__all__ = ["FeederSensitivity"]


class FeederSensitivity:
    """∂v/∂(p, q) of the datacenter and the battery on a copy of the feeder, by perturbation.

    Args:
        params: where the sites are and the network.
    """

    def __init__(self, params: OFOParams):
        self.p = params
        self.flow = OpenDssFlow(grid_models.dss_file(params.network), regulators="auto")
        if params.sites:
            self.dc = [self.flow.attach("load", s.dc_bus, 0.0, 0.0, f"ofo_dc_{s.name}", phases=s.dc_phases,
                                        vmin_pu=0.5, vmax_pu=1.5) for s in params.sites]
        else:
            self.dc = [self.flow.attach("load", params.dc_bus, 0.0, 0.0, "ofo_dc", phases=params.dc_phases,
                                        vmin_pu=0.5, vmax_pu=1.5)]
        self.bat = (self.flow.attach("storage", params.bat_bus, 0.0, 0.0, "ofo_bat", phases=params.bat_phases,
                                     vmin_pu=0.5, vmax_pu=1.5) if params.has_battery else None)
        self.n_updates = 0

    def _voltages(self, p_mw: dict[str, np.ndarray], q_mvar: dict[str, np.ndarray]) -> np.ndarray:
        if not self.flow.solve(p_mw, q_mvar):
            raise RuntimeError(f"OFO: the feeder model {self.flow.path.name} did not converge at the operating point")
        return self.flow.phase_vm_pu()

    def compute(self, dc_mw, dc_mvar, bat_mw: float, bat_mvar: float,
                taps_pu: dict[str, float]) -> dict[str, np.ndarray]:
        """Columns ``dc`` (per MW of datacenter power at its power factor), ``bat_p`` (per MW),
        ``bat_q`` (per Mvar), one row per :attr:`OpenDssFlow.phase_attrs`, central differences. [pu/MW, pu/Mvar]

        With ``sites``, ``dc_mw`` and ``dc_mvar`` hold one value per site and the columns are
        ``dc_<site>`` (each site's bus perturbed alone, at its own power factor); ``dc`` is the first's."""
        d = self.p.perturbation_mw
        dc_mw, dc_mvar = np.atleast_1d(np.asarray(dc_mw, dtype=float)), np.atleast_1d(np.asarray(dc_mvar, dtype=float))
        tan_phi = [q / p if p > 1e-9 else 0.0 for p, q in zip(dc_mw, dc_mvar)]
        point = {"load": dc_mw.copy(), "storage": np.array([bat_mw]), "sgen": np.zeros(0)}
        reactive = {"load": dc_mvar.copy(), "storage": np.array([bat_mvar]), "sgen": np.zeros(0)}
        if self.bat is None:
            point["storage"], reactive["storage"] = np.zeros(0), np.zeros(0)
        if not taps_pu and self.n_updates == 0:  # no taps measured: settle the model's own once, then hold
            self._voltages(point, reactive)
            taps_pu = dict(zip(self.flow.ids["reg"], self.flow.tap_pu.tolist()))
        if taps_pu:  # held, so a perturbation never moves a tap
            self.flow.hold_taps_pu(taps_pu)

        def diff(kind: str, dp: float, dq: float, i: int = 0) -> np.ndarray:
            up = {k: v.copy() for k, v in point.items()}, {k: v.copy() for k, v in reactive.items()}
            down = {k: v.copy() for k, v in point.items()}, {k: v.copy() for k, v in reactive.items()}
            up[0][kind][i] += dp
            up[1][kind][i] += dq
            down[0][kind][i] -= dp
            down[1][kind][i] -= dq
            return (self._voltages(*up) - self._voltages(*down)) / (2 * d)

        columns = {"dc": diff("load", d, d * tan_phi[0])}
        for i, site in enumerate(self.p.sites):
            columns[f"dc_{site.name}"] = columns["dc"] if i == 0 else diff("load", d, d * tan_phi[i], i)
        if self.bat is not None:
            columns["bat_p"] = diff("storage", d, 0.0)
            columns["bat_q"] = diff("storage", 0.0, d)
        self._voltages(point, reactive)  # leave the model at the operating point
        self.n_updates += 1
        return columns

