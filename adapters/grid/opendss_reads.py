"""Loadings and losses of an OpenDSS circuit from one bulk read of its currents.

OpenDSS's own reads each compute every power-delivery (PD) element's terminal currents again:
``PDElements.AllPctNorm`` (the loadings) and ``Circuit.Losses`` (on IEEE 8500, ~0.5 ms each, as
much as half a power flow). :class:`PdReads` asks OpenDSS for the currents once
(``PDElements.AllCurrents``, the same ``GetCurrents`` those reads call) and takes both from them
with index arrays built once, doing the arithmetic of OpenDSS's source (DSS C-API 0.14) in the
same order, so each value is equal to OpenDSS's to the bit:

* loading of element *e*: ``100 * max_k |I_k| / NormAmps`` over the phase conductors of its
  first terminal (``_PDElements_Get_pctCapacity_for``; ``|I| = sqrt(re² + im²)``, ``Cabs``), 0
  when it is disabled or has no rating;
* losses: ``Σ_e Σ_k V[NodeRef_k] · conj(I_k)`` over the enabled elements that are not shunts, each
  element's sum taken first, from 0, conductor by conductor, and the elements' sums added in
  list order (``TDSSCircuit.Get_Losses``, ``TDSSCktElement.Get_Losses``); a grounded conductor
  (``NodeRef`` 0) adds nothing.

Each product and sum is one IEEE operation on both sides (numpy's real ufuncs never fuse a
multiply into an add), so the orders above are all that equality needs; sums that OpenDSS takes
one after the other are taken here column by column (the k-th conductor of every element at
once) or with ``cumsum``, which adds in sequence (``sum``/``add.reduce`` would add pairwise).
:meth:`PdReads.check` compares the first reading with OpenDSS's own; a circuit where they
differ (a positive-sequence model, seasonal ratings) is read through OpenDSS's calls instead.
(A capacitor's Mvar, ``CktElement.Powers``, is not taken this way: it differs from the product
above in the last bit at some steps, so the few capacitors are read one by one.)
"""

from __future__ import annotations

import numpy as np


class PdReads:
    """The loadings of chosen PD elements and the circuit's losses, from one read of the currents.

    Args:
        dss: the opendssdirect engine, its circuit compiled and solved once (the node numbers of
            the elements' conductors exist from then on).
        loading_pd: positions in ``PDElements.AllNames`` of the elements whose loading is read.
    """

    def __init__(self, dss, loading_pd: np.ndarray) -> None:
        self.dss = dss
        self.circuit = circuit = dss.to_dss_python().ActiveCircuit
        names = circuit.PDElements.AllNames
        self.n_pd = len(names)
        n_conductors, n_phases, enabled, shunt, node_refs = [], [], [], [], []
        element = circuit.ActiveCktElement
        for name in names:
            circuit.SetActiveElement(name)
            n = element.NumConductors * element.NumTerminals
            n_conductors.append(n)
            n_phases.append(element.NumPhases)
            enabled.append(bool(element.Enabled))
            shunt.append(bool(circuit.PDElements.IsShunt))
            # a disabled element has no node numbers (OpenDSS refuses to give them)
            node_refs.append(np.asarray(element.NodeRef, dtype=np.int64) if enabled[-1] else np.zeros(n, np.int64))
        start = np.concatenate([[0], np.cumsum(n_conductors)[:-1]]).astype(np.int64)
        #: index of an entry that is always 0 (appended to the current and voltage vectors)
        self._zero_i = int(np.sum(n_conductors))
        self.rating = np.zeros(len(loading_pd))
        for k, pos in enumerate(loading_pd):
            circuit.SetActiveElement(names[pos])
            self.rating[k] = element.NormalAmps
        self._rated = self.rating != 0
        enabled_arr = np.asarray(enabled, bool)
        self._loading_on = enabled_arr[loading_pd]
        self._phase_index = self._phase_columns(start, np.asarray(n_phases), loading_pd)
        self._loss_columns(start, node_refs, enabled_arr & ~np.asarray(shunt, bool))
        self.loading_pd = np.asarray(loading_pd, np.int64)
        #: True once :meth:`check` found the readings equal to OpenDSS's own (False: read through OpenDSS)
        self.exact: bool | None = None

    # -- building the index arrays -----------------------------------------------------------
    def _phase_columns(self, start: np.ndarray, n_phases: np.ndarray, loading_pd) -> np.ndarray:
        """(phase, element) -> index of that phase conductor's current at terminal 1 (0 beyond)."""
        pos = np.asarray(loading_pd, np.int64)
        width = int(n_phases[pos].max()) if len(pos) else 0
        index = np.full((width, len(pos)), self._zero_i, np.int64)
        for k in range(width):
            has = k < n_phases[pos]
            index[k, has] = start[pos[has]] + k
        return index

    def _columns(self, start, node_refs, elements: np.ndarray):
        """The grounded-conductor-free (current, node) index pairs of ``elements``, laid out column
        by column: column k holds the k-th conductor of every element that has more than k, the
        elements sorted by their count (most first) so that column k is a prefix of column k-1."""
        kept = [(e, [(start[e] + k, int(ref)) for k, ref in enumerate(node_refs[e]) if ref > 0]) for e in elements]
        kept.sort(key=lambda item: -len(item[1]))  # stable: list order within a count
        order = np.asarray([e for e, _ in kept], np.int64)
        counts = np.asarray([len(pairs) for _, pairs in kept], np.int64)
        width = int(counts.max()) if len(counts) else 0
        lengths = [int(np.count_nonzero(counts > k)) for k in range(width)]
        current = [np.asarray([pairs[k][0] for _, pairs in kept[:m]], np.int64) for k, m in enumerate(lengths)]
        node = [np.asarray([pairs[k][1] for _, pairs in kept[:m]], np.int64) for k, m in enumerate(lengths)]
        flat_current = np.concatenate(current) if current else np.zeros(0, np.int64)
        flat_node = np.concatenate(node) if node else np.zeros(0, np.int64)
        bounds = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        return order, flat_current, flat_node, bounds

    def _loss_columns(self, start, node_refs, counted: np.ndarray) -> None:
        order, self._loss_i, self._loss_v, self._loss_bounds = self._columns(start, node_refs, np.flatnonzero(counted))
        # the elements' sums go back to list order before they are added up
        self._loss_order = np.argsort(order, kind="stable")
        self._n_loss = len(order)

    # -- reading ------------------------------------------------------------------------------
    def read(self) -> tuple[np.ndarray, float]:
        """The chosen elements' loadings [%] and the circuit's losses [W] of the last solution;
        through OpenDSS's own calls when :attr:`exact` is False."""
        if self.exact is False:
            return self._read_opendss()
        currents = self.circuit.PDElements.AllCurrents
        i_re = np.append(currents[0::2], 0.0)
        i_im = np.append(currents[1::2], 0.0)
        volts = self.circuit.YNodeVarray  # node 1.. of the solution (NodeV), interleaved re, im
        v_re = np.concatenate([[0.0], volts[0::2]])
        v_im = np.concatenate([[0.0], volts[1::2]])
        return self._loadings(i_re, i_im), self._losses(i_re, i_im, v_re, v_im)

    def _loadings(self, i_re: np.ndarray, i_im: np.ndarray) -> np.ndarray:
        largest = np.zeros(self._phase_index.shape[1])
        for column in self._phase_index:  # OpenDSS keeps the largest, starting from 0, skipping NaN
            re, im = i_re[column], i_im[column]
            largest = np.fmax(largest, np.sqrt(re * re + im * im))
        loading = np.zeros_like(largest)
        on = self._rated & self._loading_on
        loading[on] = 100.0 * largest[on] / self.rating[on]
        return loading

    def _column_sums(self, values: np.ndarray, bounds: np.ndarray, n: int) -> np.ndarray:
        """Each element's sum of its conductors' values, from 0 and in conductor order."""
        sums = np.zeros(n)
        for k in range(len(bounds) - 1):
            part = values[bounds[k]:bounds[k + 1]]
            sums[:len(part)] += part
        return sums

    def _losses(self, i_re, i_im, v_re, v_im) -> float:
        """Σ over elements (list order) of Σ over conductors of Re(V · conj(I)) [W]."""
        i, v = self._loss_i, self._loss_v
        power = v_re[v] * i_re[i] + v_im[v] * i_im[i]
        per_element = self._column_sums(power, self._loss_bounds, self._n_loss)[self._loss_order]
        return float(np.cumsum(per_element)[-1]) if len(per_element) else 0.0

    def _read_opendss(self) -> tuple[np.ndarray, float]:
        """The same two through OpenDSS's own calls (the reference :meth:`check` compares with)."""
        loading = np.asarray(self.circuit.PDElements.AllPctNorm(False))[self.loading_pd]
        return loading, self.dss.Circuit.Losses()[0]

    def check(self) -> bool:
        """Read the last solution both ways; :attr:`exact` is whether every value agrees to the bit
        (seasonal ratings, which move a rating with the hour, are read through OpenDSS)."""
        self.dss.Text.Command("get SeasonRating")
        if self.dss.Text.Result().strip().lower() in ("yes", "true"):
            self.exact = False
            return False
        self.exact = None
        fast = self.read()
        reference = self._read_opendss()
        self.exact = all(np.asarray(a, float).tobytes() == np.asarray(b, float).tobytes()
                         for a, b in zip(fast, reference))
        return self.exact
