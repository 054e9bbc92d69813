"""Roles: what each model is for, declared by the model, read by KPIs, accounting, report and studies.

pandapower knows what an element does from the table it sits in (``load``, ``sgen``,
``storage``); cosim knows it from the role a model declares in its META
(``model_meta(..., role=...)``). Nothing outside ``adapters/`` names a model to decide how
to count it, so a new simulator is counted by declaring its role.

The roles, and the attribute that carries each one's electric power (consumer sign for
loads and storage, generator sign for generation, DESIGN.md):

=============  ================  ===========================================================
role           power attribute   what it is
=============  ================  ===========================================================
``it``         ``p_mw``          IT load at its meter: servers and their UPS/PDU losses; it also
                                 reports ``p_it_mw``, the servers alone (``p_loss_mw`` the losses,
                                 when it has any)
``load``       ``p_mw``          any other site load (a flexible plant, offices)
``cooling``    ``p_cooling_mw``  cooling plant electricity (chillers, pumps, towers, dry coolers);
                                 ``water_m3`` its water, ``q_unmet_mw`` heat it failed to remove
``air_handler`` ``p_fans_mw``    air handlers in the white space (CRAH fans); their
                                 ``dt_inlet_excursion_k`` is the rack-inlet excursion
``clean_gen``  ``p_mw``          carbon-free generation (PV, wind, nuclear)
``fossil_gen`` ``p_mw``          fossil generation (gas turbine, diesel)
``storage``    ``p_mw``          storage, charging positive (batteries)
``backup``     ``p_backup_mw``   backup supply behind the meter (a ride-through's UPS and standby
                                 generator): the demand the grid did not serve (carried, or unserved
                                 when the backup ran out) minus the recharge, generator sign; the
                                 site's grid import excludes it
``grid``       —                 a solved network (its ``p_import_mw`` is the import at the slack)
``grid_element`` —               the grid's copy of a site element (a Load, Sgen or Storage at a
                                 bus): never counted again on the site side
``signal``     —                 exogenous time series (weather, carbon, prices, DR events)
``controller`` —                 reads measurements, writes setpoints
``other``      —                 takes no part in the energy accounting (a thermal model without
                                 electricity, a test model)
=============  ================  ===========================================================

A scenario may give an entity another role (``role = "load"``) or a role per recorded
column (``roles = { p_mw = "clean_gen" }``): a PV trace read by the signals adapter is
clean generation at its column.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

#: role -> the attribute carrying its electric power (None: the role draws or makes none).
POWER_ATTR: dict[str, str | None] = {
    "it": "p_mw",
    "load": "p_mw",
    "cooling": "p_cooling_mw",
    "air_handler": "p_fans_mw",
    "clean_gen": "p_mw",
    "fossil_gen": "p_mw",
    "storage": "p_mw",
    "backup": "p_backup_mw",
    "grid": None,
    "grid_element": None,
    "signal": None,
    "controller": None,
    "other": None,
}
ROLES: tuple[str, ...] = tuple(POWER_ATTR)
#: Outputs a model of each role must declare (its power, and an IT load's server power).
REQUIRED_OUTPUTS: dict[str, tuple[str, ...]] = {
    role: (attr,) if attr else () for role, attr in POWER_ATTR.items()} | {"it": ("p_mw", "p_it_mw")}


def missing_outputs(role: str, outputs: Iterable[str]) -> list[str]:
    """The outputs a model of ``role`` must declare that ``outputs`` lacks."""
    have = set(outputs)
    return [a for a in REQUIRED_OUTPUTS.get(role, ()) if a not in have]
#: Roles drawing from the site's supply (consumer sign).
DEMAND_ROLES = ("it", "load", "cooling", "air_handler")
#: Roles producing power (generator sign).
GENERATION_ROLES = ("clean_gen", "fossil_gen")


def check_role(role: Any) -> str:
    """``role`` when it is a known role.

    Raises:
        ValueError: naming the known roles.
    """
    if role not in POWER_ATTR:
        raise ValueError(f"unknown role {role!r}; roles: {', '.join(ROLES)}")
    return role


@dataclass
class RunRoles:
    """The roles of one run's entities and columns (what ``metadata.json`` keeps as ``roles``).

    Attributes:
        entities: entity id -> role.
        columns: ``<entity>.<attr>`` -> role, for columns given a role of their own (these
            override the entity's role for that column).
    """

    entities: dict[str, str] = field(default_factory=dict)
    columns: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Any) -> "RunRoles":
        """From the ``roles`` entry of ``metadata.json`` (anything malformed is ignored)."""
        data = data if isinstance(data, dict) else {}
        entities = data.get("entities") if isinstance(data.get("entities"), dict) else {}
        columns = data.get("columns") if isinstance(data.get("columns"), dict) else {}
        return cls({str(k): v for k, v in entities.items() if v in POWER_ATTR},
                   {str(k): v for k, v in columns.items() if v in POWER_ATTR})

    def to_json(self) -> dict[str, dict[str, str]]:
        return {"entities": dict(self.entities), "columns": dict(self.columns)}

    def of(self, entity: str) -> str | None:
        """The role of ``entity`` (None when unknown)."""
        return self.entities.get(entity)

    def entities_with(self, *roles: str) -> list[str]:
        """Entities whose own role is one of ``roles``, in declaration order."""
        return [e for e, r in self.entities.items() if r in roles]

    def power_columns(self, role: str | tuple[str, ...], recorded: Iterable[str]) -> list[str]:
        """Recorded columns carrying the power of ``role`` (one or several roles): each such
        entity's power attribute, in declaration order, unless that column has a role of its
        own; then the columns given one of these roles."""
        wanted = (role,) if isinstance(role, str) else tuple(role)
        have = set(recorded)
        found = []
        for entity, own in self.entities.items():
            attr = POWER_ATTR.get(own)
            column = f"{entity}.{attr}"
            if own in wanted and attr and column in have and column not in self.columns:
                found.append(column)
        found += [c for c, r in self.columns.items() if r in wanted and c in have and c not in found]
        return found

    def role_of_column(self, column: str) -> str | None:
        """The role a column's values count for: its own, else its entity's when the column is
        that role's power attribute; None otherwise."""
        if column in self.columns:
            return self.columns[column]
        entity, _, attr = column.partition(".")
        role = self.entities.get(entity)
        return role if role is not None and POWER_ATTR.get(role) == attr else None
