"""What a scenario may say to ``andes_grid``: ``[sims.<id>]`` (the case, its events, the integration step)
and a ``Load``'s keys (its bus, its power, PERC1 inside ANDES), with their checks."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, ValidationInfo, field_validator

import cosim.adapters.andes_grid.perc1_record as record
from cosim.adapters.andes_grid.cases import CASES, S_BASE_MVA, STEP_MAX_S
from cosim.adapters.ride_through import Perc1Params
from cosim.sdk import Params, as_tuple


def _resolve(value: str | None, info: ValidationInfo) -> str | None:
    base_dir = (info.context or {}).get("base_dir")
    if value is not None and value not in CASES and base_dir is not None and not Path(value).is_absolute():
        return str((Path(base_dir) / value).resolve())
    return value


def _rows(value: Any) -> Any:
    return tuple(as_tuple(v) for v in value) if isinstance(value, list) else value


class SimParams(Params):
    """``[sims.<id>]`` of ``adapter = "andes_grid"`` (the adapter's docstring, ``sim.py``).

    Attributes:
        case: a shipped case name, an ANDES case file, or a PSS/E RAW / MATPOWER case.
        dyr: the PSS/E dynamic data of a RAW / MATPOWER case (path relative to the scenario).
        skip_unsupported_dyr: run without the DYR records ANDES has no model for (else refused).
        dt_s: ANDES integration step; None: the largest divisor of the step up to 1/30 s. [s]
        faults: ``[[t_s, duration_s, bus, x_pu], ...]``. [s, s, -, pu]
        gen_trips: ``[[t_s, gen], ...]``. [s, -]
    """

    case: str = "ieee39"
    dyr: str | None = None
    skip_unsupported_dyr: bool = False
    dt_s: float | None = Field(default=None, gt=0, le=STEP_MAX_S)
    faults: Annotated[tuple[tuple[float, float, int | str, float], ...], BeforeValidator(_rows)] = ()
    gen_trips: Annotated[tuple[tuple[float, str], ...], BeforeValidator(_rows)] = ()
    #: the largest |p_mw| and |q_mvar| a Load takes from outside (``Session.set``, the live API):
    #: ten times the 100 MVA system base by default [MW]
    load_p_max_mw: float = Field(default=10 * S_BASE_MVA, gt=0, allow_inf_nan=False)

    @field_validator("case", "dyr")
    @classmethod
    def _resolve_file(cls, value: str | None, info: ValidationInfo) -> str | None:
        """A relative case or DYR file resolves from the scenario file's folder."""
        return _resolve(value, info)

    @field_validator("faults")
    @classmethod
    def _faults(cls, value):
        for t_s, duration_s, bus, x_pu in value:
            if t_s < 0 or duration_s <= 0 or x_pu <= 0:
                raise ValueError(f"fault ({t_s:g}, {duration_s:g}, {bus!r}, {x_pu:g}): give t_s >= 0, duration_s > 0 "
                                 "and x_pu > 0 (the fault reactance on the 100 MVA base)")
        return value


class LoadParams(Params):
    """A cosim-driven load at ``bus`` (number or name); ``p_mw``/``q_mvar`` hold until the first input. [MW, Mvar]

    Attributes:
        perc1: PERC1 ceasing and reconnection inside ANDES (``ride_through``'s ``perc1`` keys); None: off.
        perc1_dyr: a DYR file with this load's PERC1 record (``cosim model-record`` writes one), instead
            of ``perc1`` (path relative to the scenario).
        perc1_id: the record's id in ``perc1_dyr``.
    """

    bus: int | str
    p_mw: float = 0.0
    q_mvar: float = 0.0
    perc1: Perc1Params | None = None
    perc1_dyr: str | None = None
    perc1_id: str = "1"

    @field_validator("perc1_dyr")
    @classmethod
    def _resolve_dyr(cls, value: str | None, info: ValidationInfo) -> str | None:
        return _resolve(value, info)


def perc1_of(params: LoadParams, bus: str) -> Perc1Params | None:
    """The load's PERC1 parameters: its ``perc1``, or its record in ``perc1_dyr`` at ``bus``.

    Raises:
        ValueError: both given; the record missing, malformed or out of order (naming file and key).
    """
    if params.perc1 is not None and params.perc1_dyr is not None:
        raise ValueError("perc1 and perc1_dyr both given: keep one (perc1_dyr reads the parameters from a record)")
    if params.perc1_dyr is None:
        return params.perc1
    if not Path(params.perc1_dyr).is_file():
        raise ValueError(f"perc1_dyr = {params.perc1_dyr!r}: no such file; give the DYR record file "
                         "(`cosim model-record` writes perc1.dyr)")
    values = record.find_record(params.perc1_dyr, bus, params.perc1_id)
    try:
        return Perc1Params(**values)
    except ValueError as exc:
        text = "; ".join(_record_error(e) for e in exc.errors()) if hasattr(exc, "errors") else str(exc)
        raise ValueError(f"perc1_dyr = {params.perc1_dyr!r} (bus {bus}, id {params.perc1_id!r}): {text}") from None


def _record_error(err: dict[str, Any]) -> str:
    """One pydantic error of a record's values, naming the column (``Tfl``), its key and the value."""
    message = err["msg"].removeprefix("Value error, ")
    if not err["loc"]:
        return message  # a check over several values names them itself
    key = str(err["loc"][0])
    column = next((name for name, (k, _u, _m) in record.PARAMS.items() if k == key), key)
    return f"column {column} ({key}) = {err.get('input')!r}: {message}"
