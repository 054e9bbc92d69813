"""Every number an adapter's params take is finite and within a sane range for its unit.

Over every registered adapter, every params model it declares (``SimParams``, ``ModelParams``,
and the models nested in them) and every numeric field of those: NaN and infinity are refused
for that field, and a value past :data:`cosim.sdk.MAGNITUDE_LIMITS` for the field's unit (1e300
m of altitude, 1e300 pu) is refused by the magnitude check, so ``cosim validate`` names it
before a simulator starts. A new adapter is covered without an edit here.
"""

from __future__ import annotations

import math
import typing

import pytest
from pydantic import BaseModel, ValidationError

from cosim import registry
from cosim.sdk import MAGNITUDE_LIMITS, Params, magnitude_problem
from cosim.units import unit_of


def _types(annotation) -> list:
    found = [annotation]
    for arg in typing.get_args(annotation):
        found += _types(arg)
    return found


def _nested(model: type[BaseModel], seen: dict[type[BaseModel], str], adapter: str) -> None:
    if model in seen:
        return
    seen[model] = adapter
    for field in model.model_fields.values():
        for arg in _types(field.annotation):
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                _nested(arg, seen, adapter)


def _params_models() -> dict[type[BaseModel], str]:
    seen: dict[type[BaseModel], str] = {}
    for name in registry.available():
        cls = registry.adapter_class(name)
        for model in [getattr(cls, "SimParams", None), *(getattr(cls, "ModelParams", None) or {}).values()]:
            if isinstance(model, type) and issubclass(model, BaseModel):
                _nested(model, seen, name)
    return seen


MODELS = _params_models()
FIELDS = [(adapter, model, name, field.annotation) for model, adapter in MODELS.items()
          for name, field in model.model_fields.items()
          if {float, int} & set(_types(field.annotation))]
IDS = [f"{adapter}:{model.__name__}.{name}" for adapter, model, name, _ in FIELDS]


def test_the_contract_sees_the_adapters():
    assert len(MODELS) > 30 and len(FIELDS) > 300  # every adapter's models, not a few


@pytest.mark.parametrize("adapter,model,name,annotation", FIELDS, ids=IDS)
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf], ids=["nan", "inf", "-inf"])
def test_every_number_refuses_nan_and_infinity(adapter, model, name, annotation, bad):
    value = [bad] if list in {typing.get_origin(t) for t in _types(annotation)} and float not in _types(annotation) \
        else bad
    with pytest.raises(ValidationError) as info:
        model.model_validate({name: value})
    assert any(err["loc"] and err["loc"][0] == name for err in info.value.errors()), info.value.errors()


@pytest.mark.parametrize("adapter,model,name,annotation", FIELDS, ids=IDS)
def test_every_number_has_a_sane_range_for_its_unit(adapter, model, name, annotation):
    """Past the unit's limit the model refuses the value (a field's own bounds may refuse it first)."""
    assert issubclass(model, Params), f"{model.__name__} is not a cosim.sdk.Params: no magnitude check"
    unit = unit_of(name) or ""
    assert unit in MAGNITUDE_LIMITS, f"{name}: unit {unit!r} has no entry in MAGNITUDE_LIMITS"
    huge = 10 ** 300 if float not in _types(annotation) else 1e300
    value = [huge] if float not in _types(annotation) and int not in _types(annotation) else huge
    assert magnitude_problem(name, value) is not None
    if not any(field.is_required() for field in model.model_fields.values()):  # the whole model, end to end
        with pytest.raises(ValidationError) as info:
            model.model_validate({name: value})
        assert name in str(info.value)
