"""The plan engine: the planned state of a resource change, and the typed change its resource adjusts.

At ``PlanResourceChange`` Terraform sends the prior state, its proposed new state (configuration merged
over prior state) and the configuration. :func:`plan_change` applies the schema's declarative rules to
the proposed state, in this order:

1. a write-only attribute is planned null: its value lives in the configuration only;
2. a computed attribute the configuration leaves null takes its default, or on create is unknown;
3. on an update that changes anything, such an attribute without a default becomes unknown too
   (``known after apply``), unless it keeps its prior value with :class:`UseStateForUnknown`;
4. an attribute planned to differ from its prior value requires replacement if it has
   :class:`RequiresReplace`, or :class:`RequiresReplaceIf` whose predicate holds.

The result is a :class:`PlanChange`, which the resource's ``modify_plan`` then sees as typed models, as
terraform-plugin-framework's ``req.Plan.Get(ctx, &model)`` does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Generic, TypeVar, cast

from pydantic import BaseModel

from tfbridge.diagnostics import AttributePath, Diagnostic
from tfbridge.protocol import cty
from tfbridge.schema import MISSING, BlockSchema, RequiresReplace, RequiresReplaceIf, UseStateForUnknown
from tfbridge.values import check_attribute, terraform_value, to_model

M = TypeVar("M", bound=BaseModel)


class PlanChange(Generic[M]):
    """A planned change, typed, for :meth:`tfbridge.resource.Resource.modify_plan` to adjust.

    :attr:`config`, :attr:`prior` and :attr:`planned` are models with Terraform defaults applied; a
    value Terraform knows only after apply reads as ``None`` there, so ask :meth:`is_unknown` (planned)
    or :meth:`config_is_unknown` before treating ``None`` as null. Change the plan only through
    :meth:`set_planned`, :meth:`set_unknown`, :meth:`require_replace` and :meth:`keep_in_place`: they keep the model and the
    value sent back to Terraform in step. Models are built on first use, so a resource that looks at
    nothing costs nothing.
    """

    def __init__(
        self,
        block: BlockSchema,
        config: Mapping[str, object],
        prior: Mapping[str, object] | None,
        planned: dict[str, object],
        requires_replace: list[AttributePath],
    ) -> None:
        self._block = block
        self._type = cast("type[M]", block.model)  # plan_change builds it for the resource's model
        self._config_value = config
        self._prior_value = prior
        self._planned_value = planned
        self._requires_replace = requires_replace
        self._models: dict[str, Any] = {}
        self.diagnostics: list[Diagnostic] = []
        """Errors and warnings for Terraform to show with the plan."""

    def _model(self, which: str, value: Mapping[str, object]) -> M:
        model: M | None = self._models.get(which)
        if model is None:
            model = self._models[which] = to_model(self._type, value)
        return model

    @property
    def config(self) -> M:
        """The configuration: defaults applied, unknown values read as ``None``."""
        return self._model("config", self._config_value)

    @property
    def prior(self) -> M | None:
        """The prior state; ``None`` when creating."""
        return None if self._prior_value is None else self._model("prior", self._prior_value)

    @property
    def planned(self) -> M:
        """The planned new state after the declarative rules (and any change made here so far)."""
        return self._model("planned", self._planned_value)

    @property
    def creating(self) -> bool:
        return self._prior_value is None

    @property
    def requires_replace(self) -> tuple[AttributePath, ...]:
        """The attributes whose change destroys and re-creates the object."""
        return tuple(self._requires_replace)

    @property
    def planned_value(self) -> Mapping[str, object]:
        """The planned state as the Terraform object the server encodes (unknowns included)."""
        return self._planned_value

    def is_unknown(self, attribute: str) -> bool:
        """Whether the planned value is, or holds, a value known only after apply."""
        check_attribute(self._type, attribute)
        return cty.contains_unknown(self._planned_value.get(attribute))

    def config_is_unknown(self, attribute: str) -> bool:
        """Whether the configured value is, or holds, a value Terraform knows only after apply."""
        check_attribute(self._type, attribute)
        return cty.contains_unknown(self._config_value.get(attribute))

    def config_is_null(self, attribute: str) -> bool:
        """Whether the configuration leaves ``attribute`` null (unset): no value, and not unknown."""
        check_attribute(self._type, attribute)
        return self._config_value.get(attribute) is None

    def set_planned(self, attribute: str, value: Any) -> None:
        """Plan a known value (a model field's Python value) for ``attribute``."""
        check_attribute(self._type, attribute)
        self._set(attribute, self._terraform_value(attribute, value), value)

    def set_unknown(self, attribute: str) -> None:
        """Plan ``attribute`` as known only after apply; it reads as ``None`` in :attr:`planned`."""
        check_attribute(self._type, attribute)
        self._set(attribute, cty.UNKNOWN, None)

    def require_replace(self, attribute: str) -> None:
        """Mark ``attribute``'s change as one that destroys and re-creates the object."""
        check_attribute(self._type, attribute)
        if (attribute,) not in self._requires_replace:
            self._requires_replace.append((attribute,))

    def keep_in_place(self, attribute: str) -> None:
        """Take ``attribute``'s change in place after all: the resource knows its declared replacement
        rule does not hold for this object (an imported object's value its read could not return)."""
        check_attribute(self._type, attribute)
        self._requires_replace[:] = [p for p in self._requires_replace if p != (attribute,)]

    def _set(self, attribute: str, terraform: object, python: object) -> None:
        self._planned_value[attribute] = terraform
        planned = self._models.get("planned")
        if planned is not None:
            setattr(planned, attribute, python)

    def _terraform_value(self, attribute: str, value: object) -> object:
        attr = self._block.attributes.get(attribute)
        if attr is not None:
            return terraform_value(attr.type, value)
        nested = self._block.blocks[attribute]  # check_attribute ran: a field is an attribute or a block
        if isinstance(value, list):
            return [terraform_value(nested.block.type, v) for v in value]
        return terraform_value(nested.block.type, value)


def plan_change(
    block: BlockSchema,
    config: Mapping[str, object],
    prior: Mapping[str, object] | None,
    proposed: Mapping[str, object],
) -> PlanChange[Any]:
    """Apply the declarative plan rules to Terraform's proposed new state (see the module's docstring)."""
    planned = dict(proposed)
    for name, attr in block.attributes.items():
        spec = attr.spec
        if spec.write_only:
            planned[name] = None
        elif spec.computed and config.get(name) is None:
            if spec.default is not MISSING:
                planned[name] = spec.default
            elif prior is None:
                planned[name] = cty.UNKNOWN
    requires_replace: list[AttributePath] = []
    if prior is not None:
        if any(not _equal(planned.get(n), prior.get(n)) for n in planned):
            for name, attr in block.attributes.items():
                spec = attr.spec
                keep = any(isinstance(rule, UseStateForUnknown) for rule in spec.plan)
                if spec.computed and config.get(name) is None and spec.default is MISSING and not keep:
                    planned[name] = cty.UNKNOWN
        for name, attr in block.attributes.items():
            if _equal(planned.get(name), prior.get(name)):
                continue
            for rule in attr.spec.plan:
                if isinstance(rule, RequiresReplace) or (
                    isinstance(rule, RequiresReplaceIf) and rule.predicate(prior.get(name), planned.get(name))
                ):
                    requires_replace.append((name,))
                    break
    return PlanChange(block, config, prior, planned, requires_replace)


def _equal(a: object, b: object) -> bool:
    if cty.is_unknown(a) or cty.is_unknown(b):
        return False
    return a == b


__all__ = ["PlanChange", "plan_change"]
