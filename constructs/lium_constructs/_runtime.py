"""What every generated construct shares: argument specs, synthesis to JSON and HCL, and references.

The generated classes (``lium_constructs.generated``) are plain Python subclasses of cdktf's
``TerraformProvider``, ``TerraformResource`` and ``TerraformDataSource``: they keep the user's arguments
in a dict and hand them to cdktf through the two jsii callbacks it asks every element for,
``synthesizeAttributes`` (JSON) and ``synthesizeHclAttributes`` (``synth --hcl``). Unset arguments
(``None``) are dropped, so Terraform sees them as null.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Literal, TypeVar

from constructs import Construct
from lium_constructs._cdk import cdk
from lium_provider import PROVIDER_SOURCE, __version__

PROVIDER_VERSION = __version__
"""The provider version the stacks require (the constructs ship in the same wheel as the provider)."""


@dataclass(frozen=True)
class ValueKind:
    """How cdktf's HCL renderer types a value: its ``type`` and ``storageClassType``."""

    hcl_type: str
    storage_class: str


STRING = ValueKind("simple", "string")
NUMBER = ValueKind("simple", "number")
BOOL = ValueKind("simple", "boolean")
STRING_LIST = ValueKind("list", "stringList")
NUMBER_LIST = ValueKind("list", "numberList")
BOOL_LIST = ValueKind("list", "booleanList")
STRING_SET = ValueKind("set", "stringList")
NUMBER_SET = ValueKind("set", "numberList")
BOOL_SET = ValueKind("set", "booleanList")
STRING_MAP = ValueKind("map", "stringMap")
NUMBER_MAP = ValueKind("map", "numberMap")
BOOL_MAP = ValueKind("map", "booleanMap")
ANY = ValueKind("any", "any")


class Struct:
    """Base of the generated nested-block dataclasses (``PodTimeouts``)."""

    _ARGUMENTS: ClassVar[tuple[Argument, ...]]

    def _values(self) -> dict[str, object]:
        raise NotImplementedError

    def to_terraform(self) -> dict[str, Any]:
        return to_terraform(self._ARGUMENTS, self._values())

    def to_hcl(self) -> dict[str, Any]:
        return to_hcl(self._ARGUMENTS, self._values())


@dataclass(frozen=True)
class Argument:
    """One settable attribute (``kind``) or nested block (``block``: its struct class and nesting).

    ``secret`` marks write-only and sensitive attributes: they only take references, never literals.
    """

    name: str
    kind: ValueKind | None = None
    secret: bool = False
    block: tuple[type[Struct], Literal["single", "list"]] | None = None


def check_secrets(arguments: Sequence[Argument], values: Mapping[str, object]) -> None:
    """Refuse a literal for a secret argument: it would be written into cdk.tf.json in clear text.

    A reference (a token such as ``SecretVariable.string_value``) synthesizes as ``${var.name}``; Terraform then
    reads the value from the environment (``TF_VAR_name``) at plan and apply time.
    """
    for argument in arguments:
        value = values.get(argument.name)
        if argument.secret and value is not None and not cdk.Token.is_unresolved(value):
            raise ValueError(
                f"{argument.name} is secret: pass a reference such as SecretVariable(...).string_value, not a "
                "literal, so it never appears in the synthesized configuration"
            )


def _set_arguments(
    arguments: Sequence[Argument], values: Mapping[str, object]
) -> Iterator[tuple[Argument, object]]:
    """Each argument that has a value, with it: unset ones stay out of the synthesized configuration."""
    for argument in arguments:
        value = values.get(argument.name)
        if value is not None:
            yield argument, value


def to_terraform(arguments: Sequence[Argument], values: Mapping[str, object]) -> dict[str, Any]:
    """The JSON attributes of an element: set arguments by Terraform name, nested blocks expanded."""
    result: dict[str, Any] = {}
    for argument, value in _set_arguments(arguments, values):
        if argument.block is not None:
            result[argument.name] = _structs(value, argument.block[1], Struct.to_terraform)
        else:
            result[argument.name] = value
    return result


def to_hcl(arguments: Sequence[Argument], values: Mapping[str, object]) -> dict[str, Any]:
    """The same attributes as :func:`to_terraform`, each wrapped the way cdktf's HCL renderer expects."""
    result: dict[str, Any] = {}
    for argument, value in _set_arguments(arguments, values):
        if argument.block is not None:
            struct, nesting = argument.block
            result[argument.name] = {
                "value": _structs(value, nesting, Struct.to_hcl),
                "isBlock": True,
                "type": "struct" if nesting == "single" else "list",
                "storageClassType": struct.__name__ if nesting == "single" else f"{struct.__name__}List",
            }
        else:
            kind = argument.kind or ANY
            result[argument.name] = {
                "value": value,
                "isBlock": False,
                "type": kind.hcl_type,
                "storageClassType": kind.storage_class,
            }
    return result


def _structs(value: object, nesting: str, render: Callable[[Struct], dict[str, Any]]) -> object:
    if nesting == "single":
        if not isinstance(value, Struct):
            raise TypeError(f"expected a block object, got {type(value).__name__}")
        return render(value)
    if not isinstance(value, Sequence) or not all(isinstance(v, Struct) for v in value):
        raise TypeError("expected a list of block objects")
    return [render(v) for v in value]


def _generator_metadata() -> cdk.TerraformProviderGeneratorMetadata:
    return cdk.TerraformProviderGeneratorMetadata(provider_name="lium", provider_version=PROVIDER_VERSION)


class _Synthesized:
    """The two jsii callbacks, shared by provider, resources and data sources."""

    _ARGUMENTS: ClassVar[tuple[Argument, ...]]
    _arguments: dict[str, object]

    def _synthesize_attributes(self) -> Mapping[str, Any]:
        return to_terraform(self._ARGUMENTS, self._arguments)

    def _synthesize_hcl_attributes(self) -> Mapping[str, Any]:
        return to_hcl(self._ARGUMENTS, self._arguments)


class LiumProviderBase(_Synthesized, cdk.TerraformProvider):
    """Base of the generated provider construct. Overrides ``alias``: cdktf's own property is a no-op."""

    _TERRAFORM_TYPE: ClassVar[str]

    def __init__(
        self, scope: Construct, id_: str, arguments: Mapping[str, object], *, alias: str | None
    ) -> None:
        check_secrets(self._ARGUMENTS, arguments)  # before the element joins the construct tree
        self._alias = alias
        super().__init__(
            scope,
            id_,
            terraform_resource_type=self._TERRAFORM_TYPE,
            terraform_generator_metadata=_generator_metadata(),
            terraform_provider_source=PROVIDER_SOURCE,
        )
        self._arguments = dict(arguments)

    @property
    def alias(self) -> str | None:
        """Name of this configuration when a stack declares several (resources pick one by ``provider``)."""
        return self._alias

    @alias.setter
    def alias(self, value: str | None) -> None:
        self._alias = value


class _Element(_Synthesized):
    """The constructor resources and data sources share: both cdktf base classes take these arguments."""

    _TERRAFORM_TYPE: ClassVar[str]

    def __init__(
        self,
        scope: Construct,
        id_: str,
        arguments: Mapping[str, object],
        *,
        count: float | cdk.TerraformCount | None,
        depends_on: Sequence[cdk.ITerraformDependable] | None,
        for_each: cdk.ITerraformIterator | None,
        lifecycle: cdk.TerraformResourceLifecycle | None,
        provider: cdk.TerraformProvider | None,
    ) -> None:
        check_secrets(self._ARGUMENTS, arguments)  # before the element joins the construct tree
        super().__init__(  # type: ignore[call-arg]  # the cdktf base class that follows in the MRO
            scope,
            id_,
            terraform_resource_type=self._TERRAFORM_TYPE,
            terraform_generator_metadata=_generator_metadata(),
            count=count,
            depends_on=depends_on,
            for_each=for_each,
            lifecycle=lifecycle,
            provider=provider,
        )
        self._arguments = dict(arguments)


class LiumResourceBase(_Element, cdk.TerraformResource):
    """Base of the generated resource constructs."""


class LiumDataSourceBase(_Element, cdk.TerraformDataSource):
    """Base of the generated data-source constructs."""


Element = cdk.TerraformResource | cdk.TerraformDataSource


class ObjectRef:
    """References into one object of a computed list (``offers[0]``): its attributes as tokens."""

    def __init__(self, element: Element, path: str) -> None:
        self._element = element
        self._base = path

    def _path(self, name: str) -> str:
        return f"{self._base}.{name}"


RefT = TypeVar("RefT", bound=ObjectRef)


class ComputedList(Generic[RefT]):
    """A computed list of objects: ``get(i)`` gives typed references into element ``i``."""

    def __init__(self, element: Element, attribute: str, ref: Callable[[Element, str], RefT]) -> None:
        self._element = element
        self._attribute = attribute
        self._ref = ref

    def get(self, index: int) -> RefT:
        return self._ref(self._element, f"{self._attribute}[{index}]")

    @property
    def reference(self) -> cdk.IResolvable:
        """The whole list (for ``Fn`` functions, outputs or ``for_each``)."""
        return self._element.interpolation_for_attribute(self._attribute)

    def every(self, attribute: str) -> list[str]:
        """``attribute`` of every element, as one list (Terraform's ``<list>[*].<attribute>``): a team's
        ``authorized_keys`` is ``DataLiumSshKeys(...).keys.every("public_key")``."""
        splat = self._element.interpolation_for_attribute(f"{self._attribute}[*].{attribute}")
        return cdk.Token.as_list(splat)
