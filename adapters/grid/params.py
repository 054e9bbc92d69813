"""The grid adapter's parameters: the ``[sims.<id>]`` keys of a grid (:class:`SimParams`: its network,
engine, voltage band, line trips and faults) and the keys of a Load, Sgen or Storage
(:class:`ElementParams`), with their defaults and the checks that need no network."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, ValidationInfo, field_validator, model_validator

from cosim.adapters._event_csv import read_events
from cosim.adapters.grid.backend import phase_set
from cosim.adapters.grid.opendss_faults import OpenDssFault
from cosim.adapters.grid.opendss_flow import V_MAX_PU, V_MIN_PU
from cosim.sdk import DataFile, Params, as_tuple

__all__ = ["DSS_LOAD_MODELS", "V_HIGH_PU", "V_LOW_PU", "ElementParams", "SimParams", "read_line_trips"]


#: The band of the all-bus voltage outputs: ANSI C84.1 range A (the KPIs' band too). [pu]
V_LOW_PU, V_HIGH_PU = 0.95, 1.05
#: OpenDSS load ``model`` numbers of the element's ``load_model``.
DSS_LOAD_MODELS = {"constant_power": 1, "constant_impedance": 2, "constant_current": 5}


def _triples(value: Any) -> Any:
    return tuple(as_tuple(v) for v in value) if isinstance(value, list) else value


def read_line_trips(path: Path) -> list[tuple[float, float, str]]:
    """The line trips of a CSV file (``t_s,duration_s,line``).

    Raises:
        ValueError: naming the file and row.
    """
    return read_events(path, "line", lambda text: str(text).strip(), "t_s and duration_s must be numbers")  # type: ignore[return-value]


def _nonconvergence_alias(value: Any) -> Any:
    """``on_nonconvergence = "hold"``: the older name of ``"continue_nan"`` (nothing is held: NaN results)."""
    return "continue_nan" if value == "hold" else value


class SimParams(Params):
    """Parameters of a grid simulator (``[sims.<id>]`` with ``adapter = "grid"``).

    ``engine`` picks the solver: ``"pandapower"`` (``network`` a catalogue name,
    ``simbench:<code>`` or a pandapower JSON file; ``network_params``, ``profiles`` and
    ``solver`` apply) or ``"opendss"`` (``network`` an OpenDSS feeder of the catalogue or a
    ``.dss`` file; ``regulators``, ``tap_positions`` and ``control_mode`` apply: ``"auto"``
    lets OpenDSS's RegControls move the taps, ``"fixed"`` holds every regulator at its
    ``tap_positions`` entry [steps from neutral] or at its initial tap; ``control_mode =
    "static"`` settles the controls within every solve, ``"time"`` runs OpenDSS's time-based
    control queue on the simulation clock, so a regulator waits its delay (OpenDSS default
    15 s, then 2 s per tap) as a real one does).
    """

    network: str
    engine: Literal["pandapower", "opendss"] = "pandapower"
    network_params: dict[str, Any] = {}
    profiles: bool = True
    solver: Literal["lightsim2grid", "pandapower"] = "lightsim2grid"
    #: an unsolved step: "continue_nan" goes on with NaN results for it (never the last solved ones; "hold",
    #: its older name, is accepted and read as it), "fail" ends the run
    on_nonconvergence: Annotated[Literal["continue_nan", "fail"], BeforeValidator(_nonconvergence_alias)] = \
        "continue_nan"
    regulators: Literal["auto", "fixed"] = "auto"
    tap_positions: dict[str, int] = {}
    control_mode: Literal["static", "time"] = "static"
    #: the band of the all-bus voltage outputs [pu]
    v_low_pu: float = Field(default=V_LOW_PU, gt=0)
    v_high_pu: float = Field(default=V_HIGH_PU, gt=0)
    #: buses left out of the all-bus outputs; None: the source bus and the regulator terminals
    exclude_buses: list[str] | None = None
    #: line trips ``[[t_s, duration_s, line], ...]``: the line is out of service in [t_s, t_s + duration_s) [s, s, -]
    line_trips: Annotated[tuple[tuple[float, float, str], ...], BeforeValidator(_triples)] = ()
    #: a CSV of line trips (``t_s,duration_s,line``), added to ``line_trips``
    line_trips_file: DataFile | None = None
    #: faults solved in the feeder (engine = "opendss"): ``[{bus, kind, phases, r_ohm, t_s, clearing_s}, ...]``
    #: (adapters/grid/opendss_faults.py)
    faults: Annotated[tuple[OpenDssFault, ...], BeforeValidator(as_tuple)] = ()
    #: the largest |p_mw| and |q_mvar| a Load/Sgen/Storage input takes from outside (``Session.set``,
    #: the live API); None: ten times the network's tabulated load and generation, at least
    #: 100 MW (``ELEMENT_P_MAX_FLOOR_MW``) [MW]
    element_p_max_mw: float | None = Field(default=None, gt=0, allow_inf_nan=False)

    def all_line_trips(self) -> list[tuple[float, float, str]]:
        """``line_trips`` and the file's, by start time."""
        return sorted([*self.line_trips, *(read_line_trips(self.line_trips_file) if self.line_trips_file else [])])

    @field_validator("network")
    @classmethod
    def _resolve_json(cls, value: str, info: ValidationInfo) -> str:
        """Relative JSON and DSS paths resolve from the scenario file's folder."""
        base_dir = (info.context or {}).get("base_dir")
        if value.lower().endswith((".json", ".dss")) and base_dir is not None and not Path(value).is_absolute():
            return str((Path(base_dir) / value).resolve())
        return value

    @model_validator(mode="after")
    def _engine_options(self) -> "SimParams":
        if self.v_low_pu >= self.v_high_pu:
            raise ValueError(f"v_low_pu = {self.v_low_pu:g} is not below v_high_pu = {self.v_high_pu:g}")
        if self.engine == "pandapower" and (self.regulators != "auto" or self.tap_positions
                                            or self.control_mode != "static"):
            raise ValueError('regulators, tap_positions and control_mode apply to engine = "opendss"')
        if self.engine == "opendss" and self.network_params:
            raise ValueError('network_params apply to engine = "pandapower" catalogue networks')
        if self.engine != "opendss" and self.faults:
            raise ValueError('faults apply to engine = "opendss" (a balanced power flow has no fault); on '
                             'pandapower give the sag as events of the faults adapter')
        for t_s, duration_s, line in self.all_line_trips():
            if t_s < 0 or duration_s <= 0:
                raise ValueError(f"line trip ({t_s:g}, {duration_s:g}, {line!r}): give t_s >= 0 and duration_s > 0 "
                                 "(seconds from the scenario start)")
        return self


class ElementParams(Params):
    """A Load, Sgen or Storage: a new element at ``bus`` or an existing ``element``.

    ``bus`` and ``element`` are matched against the names in the net first, then against
    the sanitised ids, then against the pandapower index (so on ``ieee33``, ``bus = "18"``
    is Baran & Wu's bus 18, index 17). ``p_mw`` [MW] and ``q_mvar`` [Mvar] are the initial
    values; for an existing element they apply only when given, otherwise the element
    follows its profile (or tabulated value) until the first input arrives.
    """

    bus: str | int | None = None
    element: str | int | None = None
    p_mw: float = 0.0
    q_mvar: float = 0.0
    phases: str = "abc"
    #: OpenDSS load model and the range it holds in (engine = "opendss", new elements only) [-, pu, pu]
    load_model: Literal["constant_power", "constant_current", "constant_impedance"] | None = None
    vmin_pu: float | None = Field(default=None, gt=0, lt=2)
    vmax_pu: float | None = Field(default=None, gt=0, lt=10)

    @field_validator("phases")
    @classmethod
    def _phase_set(cls, value: str) -> str:
        """``"abc"`` (balanced three-phase) or a subset of a, b, c; returned in a-b-c order."""
        return phase_set(value)

    @model_validator(mode="after")
    def _exactly_one_place(self) -> "ElementParams":
        if (self.bus is None) == (self.element is None):
            raise ValueError("give exactly one of bus (attach a new element) or element (an existing one)")
        if self.element is not None and self.dss_load_options():
            raise ValueError("load_model, vmin_pu and vmax_pu apply to new elements (bus = ...); an existing "
                             "element keeps the model its network file gives it")
        vmin, vmax = self.vmin_pu or V_MIN_PU, self.vmax_pu or V_MAX_PU
        if vmin >= vmax:
            raise ValueError(f"vmin_pu = {vmin:g} is not below vmax_pu = {vmax:g}")
        return self

    def dss_load_options(self) -> dict[str, Any]:
        """The OpenDSS load options given (keywords of ``OpenDssFlow.attach``)."""
        given = {"load_model": DSS_LOAD_MODELS.get(self.load_model), "vmin_pu": self.vmin_pu, "vmax_pu": self.vmax_pu}
        return {k: v for k, v in given.items() if v is not None}
