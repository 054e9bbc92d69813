"""Loadings, losses and node voltages of an OpenDSS circuit, read in bulk or computed as OpenDSS computes them.

OpenDSS's own reads each compute every power-delivery (PD) element's terminal currents again:
``PDElements.AllPctNorm`` (the loadings) and ``Circuit.Losses`` (on IEEE 8500, ~0.5 ms each, as
much as half a power flow). :class:`PdReads` asks OpenDSS for the currents once
(``PDElements.AllCurrents``, the same ``GetCurrents`` those reads call) and takes both from them
with index arrays built once, doing the arithmetic of OpenDSS's source (DSS C-API 0.14) in the
same order, so each value is equal to OpenDSS's to the bit:

* loading of element *e*: ``100 * max_k |I_k| / NormAmps`` over the phase conductors of its
  first terminal (``_PDElements_Get_pctCapacity_for``; ``|I| = sqrt(re² + im²)``, ``Cabs``), 0
  when it is disabled or has no rating; the largest square is found first and its root taken
  once (a correctly rounded root never reverses an order: the root of the largest square is
  the largest root);
* losses: ``Σ_e Σ_k V[NodeRef_k] · conj(I_k)`` over the enabled elements that are not shunts, each
  element's sum taken first, from 0, conductor by conductor, and the elements' sums added in
  list order (``TDSSCircuit.Get_Losses``, ``TDSSCktElement.Get_Losses``); a grounded conductor
  (``NodeRef`` 0) adds nothing.

Each product and sum is one IEEE operation on both sides (numpy's real ufuncs never fuse a
multiply into an add), so the orders above are all that equality needs; sums that OpenDSS takes
one after the other are taken here column by column (the k-th conductor of every element at
once) or with ``cumsum``, which adds in sequence (``sum``/``add.reduce`` would add pairwise).
:meth:`PdReads.check` compares the first reading with OpenDSS's own; a circuit where they
differ (a positive-sequence model, seasonal ratings) is read through OpenDSS's calls instead, and
so is a small one (:data:`BULK_MIN_ELEMENTS`), where the bulk read saves nothing.
(A capacitor's Mvar, ``CktElement.Powers``, is not taken this way: it differs from the product
above in the last bit at some steps, so the few capacitors are read one by one.)

Reading the currents costs OpenDSS itself more than the rest (~0.55 ms of ~0.8 ms on IEEE 8500).
With ``make build``'s ``_opendss_kernels.so``, :class:`_YprimReads` computes them instead, as OpenDSS
does (``TPDElement.GetCurrents``: ``I = Yprim · V``, row by row in OpenDSS's order), from each
element's Yprim, read once, and the node voltages (``YNodeVarray``), with the loadings and losses
above in the same C pass (~0.1 ms). A Yprim changes only when the circuit is edited or a control
acts in a solve (a tap, a switch: the solve then runs more than one control iteration); after such
a solve the currents are read from OpenDSS once more, the kernel's are compared with them to the
bit, the Yprims of the elements that differ are read again, and the kernel is used only while all
of them agree (it is dropped otherwise: OpenDSS's currents are read at every step).

:class:`NodeVolts` likewise gives ``Circuit.AllBusVmagPu`` (every node's voltage magnitude in pu)
from the same read of the node voltages (``YNodeVarray``), checked against it at the first read.
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import numpy as np

from cosim.sdk import load_library

#: Circuits with fewer PD elements are read through OpenDSS's own calls: there numpy's fixed cost per
#: call outweighs what one read of the currents saves (CPU per read: IEEE 123, 141 elements, 38 µs
#: this way, 17 µs OpenDSS's; IEEE 8500, 4,904 elements, 0.69 ms against 0.97 ms). [-]
BULK_MIN_ELEMENTS = 1000
#: the name under which metadata.json's ``accelerations`` says whether the currents came from the Yprims
ACCELERATION = "opendss_yprim_reads"


class PdReads:
    """The loadings of chosen PD elements and the circuit's losses, from one read of the currents.

    Args:
        dss: the opendssdirect engine, its circuit compiled and solved once (the node numbers of
            the elements' conductors exist from then on).
        loading_pd: positions in ``PDElements.AllNames`` of the elements whose loading is read.
        volts: the node voltages by node number (:attr:`NodeVolts.volts`) that the caller refreshes
            after every solve, for the kernel (None: the kernel reads ``YNodeVarray`` itself).
    """

    def __init__(self, dss, loading_pd: np.ndarray, volts: np.ndarray | None = None) -> None:
        self.dss = dss
        self.circuit = circuit = dss.to_dss_python().ActiveCircuit
        self.loading_pd = np.asarray(loading_pd, np.int64)
        large = circuit.PDElements.Count >= BULK_MIN_ELEMENTS
        start, n_phases, counted, node_refs, rating, yprims = self._elements(large and _library() is not None)
        self.rating = rating[self.loading_pd]
        # terminal 1's phase conductors of each element whose loading is read (OpenDSS takes the
        # largest current of those; a disabled element reads 0, as one without a rating does)
        self._phases = _Columns([[(start[e] + k, 0) for k in range(n_phases[e])] for e in self.loading_pd])
        on = np.asarray([node_refs[e] is not None for e in self.loading_pd], bool) & (self.rating != 0)
        self._phase_on = on[self._phases.order]
        self._phase_rating = self.rating[self._phases.order]
        # every conductor that is not grounded, of each enabled element that is not a shunt
        self._conductors = _Columns([[(start[e] + k, int(ref)) for k, ref in enumerate(node_refs[e]) if ref > 0]
                                     for e in counted])
        #: True once :meth:`check` found the readings equal to OpenDSS's own (False: read through OpenDSS)
        self.exact: bool | None = None
        #: whether the loadings and losses come from the Yprims' currents (``on``) and if not why (``detail``);
        #: None until the first :meth:`check` (:data:`ACCELERATION` in the run's ``accelerations``)
        self.acceleration: dict[str, object] | None = None
        self._kernel = _YprimReads(self, start, n_phases, counted, node_refs, yprims, on, volts) if yprims else None

    def _elements(self, yprims: bool) -> tuple[np.ndarray, np.ndarray, list[int], list[np.ndarray | None],
                                                np.ndarray, list[np.ndarray | None]]:
        """Each PD element's first entry in ``AllCurrents`` (and, last, their count), its phases, the elements the losses
        count (enabled, not a shunt), each one's node numbers (None: disabled, OpenDSS has none), its
        rating (``NormAmps``) and, with ``yprims``, its Yprim (None: disabled; an empty list without
        ``yprims``). [-, -, -, -, A, S]"""
        circuit = self.circuit
        pd, element = circuit.PDElements, circuit.ActiveCktElement
        n_conductors = np.asarray(pd.AllNumConductors, np.int64) * np.asarray(pd.AllNumTerminals, np.int64)
        start = np.concatenate([[0], np.cumsum(n_conductors)]).astype(np.int64)
        counted, node_refs, rating, yprim = [], [], [], []
        for pos, name in enumerate(pd.AllNames):
            circuit.SetActiveElement(name)
            enabled = bool(element.Enabled)
            node_refs.append(np.asarray(element.NodeRef, np.int64) if enabled else None)
            rating.append(element.NormalAmps)
            if yprims:
                yprim.append(np.asarray(element.Yprim, float) if enabled else None)
            if enabled and not pd.IsShunt:
                counted.append(pos)
        return (start, np.asarray(pd.AllNumPhases, np.int64), counted, node_refs, np.asarray(rating, float),
                yprim)

    # -- reading ------------------------------------------------------------------------------
    def read(self, y_changed: bool = True) -> tuple[np.ndarray, float]:
        """The chosen elements' loadings [%] and the circuit's losses [W] of the last solution;
        through OpenDSS's own calls when :attr:`exact` is False. ``y_changed``: a Yprim may have
        changed since the last read (False: no edit and no control action since, so the kernel's
        Yprims are OpenDSS's)."""
        if self.exact is False:
            return self._read_opendss()
        kernel = self._kernel
        if kernel is not None and not y_changed:
            return kernel.read()
        currents = self.circuit.PDElements.AllCurrents  # re, im of every conductor, element by element
        if kernel is not None and self.exact:  # its arithmetic was found to be OpenDSS's (check)
            result = kernel.sync(currents)
            if result is not None:
                return result
            self._kernel = None
            self._note("the currents from the Yprims could not match OpenDSS's: OpenDSS's currents at every read")
        return self._loadings(currents), self._losses(currents, self.circuit.YNodeVarray)

    def _loadings(self, currents: np.ndarray) -> np.ndarray:
        """``100 * max |I| / NormAmps`` over each element's phase conductors at terminal 1. [%]"""
        cols = self._phases
        largest = np.zeros(len(cols.order))  # of |I|², the largest (sqrt keeps the order, exactly)
        for k in range(cols.width):
            part = slice(cols.bounds[k], cols.bounds[k + 1])
            re, im = currents[cols.current_re[part]], currents[cols.current_re[part] + 1]
            n = len(re)
            largest[:n] = np.fmax(largest[:n], re * re + im * im)  # fmax skips NaN, as OpenDSS's ">" does
        sorted_pct = np.zeros(len(largest))
        on = self._phase_on
        sorted_pct[on] = 100.0 * np.sqrt(largest[on]) / self._phase_rating[on]
        loading = np.empty_like(sorted_pct)
        loading[cols.order] = sorted_pct
        return loading

    def _losses(self, currents: np.ndarray, volts: np.ndarray) -> float:
        """Σ over elements (list order) of Σ over conductors of Re(V · conj(I)). [W]"""
        cols = self._conductors
        i, v = cols.current_re, cols.node_re
        power = volts[v] * currents[i] + volts[v + 1] * currents[i + 1]
        sums = np.zeros(len(cols.order))
        for k in range(cols.width):  # each element's sum from 0, conductor by conductor
            part = power[cols.bounds[k]:cols.bounds[k + 1]]
            sums[:len(part)] += part
        in_list_order = np.empty_like(sums)  # the elements' sums are added up in list order
        in_list_order[cols.order] = sums
        return float(np.cumsum(in_list_order)[-1]) if len(sums) else 0.0

    def _read_opendss(self) -> tuple[np.ndarray, float]:
        """The same two through OpenDSS's own calls (the reference :meth:`check` compares with)."""
        loading = np.asarray(self.circuit.PDElements.AllPctNorm(False))[self.loading_pd]
        return loading, self.dss.Circuit.Losses()[0]

    def check(self) -> bool:
        """Read the last solution both ways; :attr:`exact` is whether every value agrees to the bit
        (seasonal ratings, which move a rating with the hour, and a circuit of fewer than
        :data:`BULK_MIN_ELEMENTS` PD elements are read through OpenDSS)."""
        self.dss.Text.Command("get SeasonRating")
        seasonal = self.dss.Text.Result().strip().lower() in ("yes", "true")
        count = self.circuit.PDElements.Count
        if seasonal or count < BULK_MIN_ELEMENTS:
            self.exact = False
            self._note("seasonal ratings" if seasonal else f"{count} power-delivery elements, fewer than "
                       f"{BULK_MIN_ELEMENTS}: OpenDSS's own reads")
            return False
        self.exact = None
        currents = self.circuit.PDElements.AllCurrents
        fast = self._loadings(currents), self._losses(currents, self.circuit.YNodeVarray)
        self.exact = _same(fast, self._read_opendss())
        if self._kernel is not None:
            synced = self._kernel.sync(currents) if self.exact else None
            if synced is None or not _same(synced, fast):
                self._kernel = None  # its currents, loadings or losses are not OpenDSS's
        if not self.exact:
            why = "the loadings or losses from OpenDSS's currents were not its own: OpenDSS's own reads"
        elif _library() is None:
            why = "grid/_opendss_kernels.so not in use (see c_parts): OpenDSS's currents at every read"
        else:
            why = "the currents from the Yprims were not OpenDSS's: OpenDSS's currents at every read"
        self._note(why)
        return self.exact

    def _note(self, off: str) -> None:
        """Say in the run's metadata.json (``accelerations``, through :attr:`acceleration`) whether this circuit's
        loadings and losses come from the currents computed from the Yprims, and if not, why (``off``)."""
        on = self._kernel is not None and self.exact is not False
        self.acceleration = {"on": on, "detail": "the currents from each element's Yprim and the node voltages "
                             "(grid/_opendss_kernels.so), checked against OpenDSS's after any solve that may change "
                             "a Yprim" if on else off}

    @property
    def kernel(self) -> bool:
        """Whether the currents are computed from the Yprims (:class:`_YprimReads`) while no Yprim changes."""
        return self._kernel is not None


def _same(a: tuple[np.ndarray, float], b: tuple[np.ndarray, float]) -> bool:
    """Loadings and losses equal to the bit."""
    return all(np.asarray(x, float).tobytes() == np.asarray(y, float).tobytes() for x, y in zip(a, b))


@functools.cache
def _library(path: Path = Path(__file__).with_name("_opendss_kernels.so")):
    """``adapters/grid/_opendss_kernels.so`` (``make build``), or None: not built from its C source as it is
    now (an edited source is not trusted until rebuilt) or not loadable (:func:`cosim.sdk.load_library`)."""
    lib = load_library(path)
    if lib is None:
        return None
    lib.cosim_pd_reads.restype = ctypes.c_double
    lib.cosim_pd_reads.argtypes = ([ctypes.c_int64] + [ctypes.c_void_p] * 14 + [ctypes.c_int64]
                                   + [ctypes.c_void_p] * 4)
    lib.cosim_vm_pu.restype = None
    lib.cosim_vm_pu.argtypes = [ctypes.c_int64] + [ctypes.c_void_p] * 4
    return lib


class NodeVolts:
    """Every node's voltage magnitude in pu, in ``Circuit.AllBusVmagPu``'s order (bus by bus), from
    one read of the complex node voltages (``YNodeVarray``), which :attr:`volts` keeps by node number
    for :class:`PdReads`. With ``make build``'s library the magnitudes are computed as OpenDSS's
    ``AllBusVmagPu`` computes them (``cosim_vm_pu``: ``sqrt(re² + im²) / (1000 · kVBase)``), which
    :meth:`read` checks against ``AllBusVmagPu`` itself at the first read; without the library, or
    when they differ, ``AllBusVmagPu`` is read.

    Args:
        circuit: the DSS-Python circuit, solved once (its node numbers exist from then on).
        kv_base: each bus's base voltage by lower-case name (0: none). [kV]
    """

    def __init__(self, circuit, kv_base: dict[str, float]) -> None:
        self.circuit, self.lib = circuit, _library()
        number = {name.lower(): k + 1 for k, name in enumerate(circuit.YNodeOrder)}
        names = [name.lower() for name in circuit.AllNodeNames]
        self.node = np.asarray([number.get(name, 0) for name in names], np.int32)
        kv = np.asarray([kv_base.get(name.rpartition(".")[0], 0.0) for name in names], float)
        self.base = np.where(kv > 0.0, 1000.0 * kv, 1.0)  # OpenDSS's BaseFactor, the same product
        self.vm_pu = np.zeros(len(names))
        #: the last solution's node voltages by node number (re, im; node 0, the ground, first), read
        #: at every :meth:`read` when the library is loaded (else None)
        self.volts: np.ndarray | None = np.zeros(2 + 2 * len(number)) if self.lib is not None else None
        #: True once the first read equalled AllBusVmagPu; False: AllBusVmagPu is read
        self.exact: bool | None = None if self.lib is not None and self.node.all() else False
        if self.volts is not None:
            self._args = (len(names), *map(_address, (self.node, self.base, self.volts, self.vm_pu)))

    def read(self) -> np.ndarray:
        """The last solution's node voltage magnitudes [pu] (a buffer that the next read overwrites)."""
        if self.volts is None:
            return self.circuit.AllBusVmagPu
        self.volts[2:] = self.circuit.YNodeVarray
        if self.exact is not False:
            self.lib.cosim_vm_pu(*self._args)
            if self.exact is None:
                self.exact = self.vm_pu.tobytes() == np.asarray(self.circuit.AllBusVmagPu, float).tobytes()
        return self.vm_pu if self.exact else self.circuit.AllBusVmagPu


#: the C kernel's largest element order (conductors x terminals); a circuit with a larger one is not taken
MAX_ORDER = 64


class _YprimReads:
    """:class:`PdReads`'s loadings and losses with the currents computed as OpenDSS computes them,
    from each element's Yprim (held here) and the node voltages, by ``cosim_pd_reads``
    (``_opendss_kernels.c``). Only what is used is computed: the elements the losses count and the
    enabled ones whose loading is read; of each, the rows of its conductors that have a node or are
    phases whose loading is read, and the columns of those with a node (a grounded one adds ±0)."""

    def __init__(self, reads: PdReads, start: np.ndarray, n_phases: np.ndarray, counted: list[int],
                 node_refs: list[np.ndarray | None], yprims: list[np.ndarray | None], on: np.ndarray,
                 volts: np.ndarray | None) -> None:
        self.lib, self.circuit = _library(), reads.circuit
        n_el = len(node_refs)
        used = np.zeros(n_el, bool)
        used[counted] = True
        used[[e for e in reads.loading_pd if node_refs[e] is not None]] = True
        self.names = list(reads.circuit.PDElements.AllNames)
        self.n_phase = np.zeros(n_el, np.int32)
        self.n_phase[reads.loading_pd] = n_phases[reads.loading_pd]
        self.at = np.ascontiguousarray(start[:-1], np.int64)
        self.shape = np.zeros((n_el, 2), np.int32)
        self.y_at, self.row_at, self.col_at = (np.zeros(n_el, np.int64) for _ in range(3))
        self._kept: dict[int, tuple[np.ndarray, np.ndarray, int]] = {}  # element: kept rows, columns; order
        rows, row_nodes, col_nodes, blocks = [], [], [], []
        n_y = n_rows = n_cols = 0
        for e in np.flatnonzero(used):
            nodes = node_refs[e]
            live = nodes > 0
            kept = self._kept[e] = (np.flatnonzero(live | (np.arange(len(nodes)) < self.n_phase[e])),
                                    np.flatnonzero(live), len(nodes))
            self.shape[e] = len(kept[0]), len(kept[1])
            self.y_at[e], self.row_at[e], self.col_at[e] = n_y, n_rows, n_cols
            rows.append(kept[0])
            row_nodes.append(nodes[kept[0]])
            col_nodes.append(nodes[kept[1]])
            blocks.append(self._block(e, yprims[e]))
            n_y, n_rows, n_cols = n_y + len(blocks[-1]) // 2, n_rows + len(kept[0]), n_cols + len(kept[1])
        self.rows, self.row_nodes, self.col_nodes = (np.ascontiguousarray(np.concatenate(a) if a else [0], np.int32)
                                                     for a in (rows, row_nodes, col_nodes))
        self.y = np.ascontiguousarray(np.concatenate(blocks) if blocks else np.zeros(2), float)
        self.counted = np.zeros(n_el, np.int8)
        self.counted[counted] = 1
        self.largest = np.zeros(n_el)
        self.currents = np.zeros(2 * int(start[-1]))  # the layout of AllCurrents (written by sync's reads)
        #: the node voltages by node number (0: ground, unread); refreshed here when not given
        self._own_volts = volts is None
        self.volts = np.zeros(2 + len(reads.circuit.YNodeVarray)) if volts is None else volts
        self.loading_pd = np.ascontiguousarray(reads.loading_pd, np.int64)
        self.rating, self.on = np.ascontiguousarray(reads.rating, float), np.ascontiguousarray(on, np.int8)
        self.loading = np.zeros(len(self.loading_pd))
        self.fits = bool(self.shape.max(initial=0) <= MAX_ORDER)
        # the entries of AllCurrents computed here (the others are not compared with OpenDSS's)
        self._computed = np.zeros(int(start[-1]), bool)
        self._computed[np.concatenate([self.at[e] + k[0] for e, k in self._kept.items()] or [[]]).astype(int)] = True
        self._computed = np.repeat(self._computed, 2)
        addresses = map(_address, (self.shape, self.y_at, self.row_at, self.col_at, self.at, self.rows, self.row_nodes,
                                   self.col_nodes, self.y, self.volts, self.counted, self.n_phase, self.largest))
        self._args = [n_el, *addresses, None, len(self.loading_pd),
                      *map(_address, (self.loading_pd, self.rating, self.on, self.loading))]

    def _block(self, e: int, yprim: np.ndarray) -> np.ndarray:
        """Element ``e``'s kept rows and columns of its Yprim (column-major, as OpenDSS stores it: the
        entry of row i, column j at j·n + i), column-major, interleaved re, im."""
        rows, cols, n = self._kept[e]
        by_column = yprim.view(np.complex128).reshape(n, n)  # [j, i]: row i, column j
        return np.ascontiguousarray(by_column[np.ix_(cols, rows)]).view(float).ravel()

    def read(self, currents: bool = False) -> tuple[np.ndarray, float]:
        """The loadings [%] and losses [W] from the last solution's node voltages; with ``currents``
        the computed currents too, to :attr:`currents`."""
        if self._own_volts:
            self.volts[2:] = self.circuit.YNodeVarray
        self._args[14] = _address(self.currents) if currents else None
        losses = self.lib.cosim_pd_reads(*self._args)
        return self.loading.copy(), losses

    def sync(self, currents: np.ndarray) -> tuple[np.ndarray, float] | None:
        """After a solve that may have changed Yprims: read again the Yprim of each element whose
        computed currents differ from OpenDSS's (``currents``, ``AllCurrents``); the loadings and
        losses once every computed current is OpenDSS's to the bit (None: some still differ)."""
        if not self.fits or len(currents) != len(self.currents):
            return None
        for attempt in range(2):
            result = self.read(currents=True)
            computed = np.where(self._computed, self.currents, currents)  # the others are not compared
            differ = np.flatnonzero((computed != currents) & ~(np.isnan(computed) & np.isnan(currents)))
            if not len(differ):
                return result
            if attempt or not self._reread(np.unique(np.searchsorted(self.at, differ // 2, "right") - 1)):
                return None
        return None

    def _reread(self, elements: np.ndarray) -> bool:
        """Read these elements' Yprims again (False: one is not computed here or changed its order)."""
        circuit, element = self.circuit, self.circuit.ActiveCktElement
        for e in elements:
            circuit.SetActiveElement(self.names[e])
            yprim = np.asarray(element.Yprim, float)
            if e not in self._kept or len(yprim) != 2 * self._kept[e][2] ** 2 or not element.Enabled:
                return False
            block = self._block(e, yprim)
            self.y[2 * self.y_at[e]:2 * self.y_at[e] + len(block)] = block
        return True


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


class _Columns:
    """Per element, a list of (current, node) positions, laid out for sums and maxima that run
    element by element in one pass per column: column k holds the k-th entry of every element with
    more than k, the elements sorted by their count (most first, list order within a count), so
    that column k is a prefix of column k-1 and takes no padding.

    ``current_re``: index of each entry's current (real part) in ``AllCurrents`` (interleaved re,
    im); ``node_re``: index of its node's voltage (real part) in ``YNodeVarray``; ``bounds``: where
    each column starts; ``order``: element positions (in the list given) in sorted order.
    """

    def __init__(self, entries: list[list[tuple[int, int]]]) -> None:
        self.order = np.asarray(sorted(range(len(entries)), key=lambda e: -len(entries[e])), np.int64)
        counts = np.asarray([len(entries[e]) for e in self.order], np.int64)
        self.width = int(counts.max()) if len(counts) else 0
        lengths = [int(np.count_nonzero(counts > k)) for k in range(self.width)]
        columns = [[entries[e][k] for e in self.order[:m]] for k, m in enumerate(lengths)]
        flat = [pair for column in columns for pair in column]
        self.current_re = np.asarray([2 * c for c, _ in flat], np.int64)
        self.node_re = np.asarray([2 * (n - 1) for _, n in flat], np.int64)
        self.bounds = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
