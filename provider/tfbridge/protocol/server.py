"""The tfplugin6 Provider service: Terraform's RPCs mapped onto :mod:`tfbridge.resource` classes.

A request flows: gRPC (``tfbridge.plugin``) → a method here → decode ``DynamicValue`` with the
schema's cty type (``tfbridge.protocol.cty``) → the plan engine (``tfbridge.plan``) or a typed model
(``tfbridge.values``) → the resource's method → the result encoded back. This module is the adapter
only: it decides nothing about plans. Every failure becomes a diagnostic in one place
(:meth:`ProviderServer._answering`); nothing escapes as a gRPC error, because Terraform treats those as
a crashed plugin and forgets in-flight objects.
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Protocol, TypeVar

import grpc
from pydantic import BaseModel

from tfbridge.cancel import Cancelled, CancelToken
from tfbridge.command import destroying, whole_destroy
from tfbridge.diagnostics import Diagnostic, TFError, has_errors
from tfbridge.logs import REDACTOR, Logger
from tfbridge.plan import plan_change
from tfbridge.proto import tfplugin6_pb2 as pb
from tfbridge.proto import tfplugin6_pb2_grpc as pb_grpc
from tfbridge.protocol import cty
from tfbridge.protocol.conversions import decode, diagnostics_pb, encode, normalize, path_pb, schema_pb
from tfbridge.resource import Context, DataSource, Provider, Resource
from tfbridge.schema import MISSING, BlockSchema, Schema, validate
from tfbridge.timeouts import operation_budget
from tfbridge.values import ConfigView, from_model, to_model


def _type_of(schemas: Mapping[str, Schema], type_name: str) -> cty.CtyType | None:
    """The object type a diagnostic's path points into; None for an unknown type name."""
    schema = schemas.get(type_name)
    return schema.type if schema else None


def _config_diagnostics(
    element: Provider[Any] | Resource[Any] | DataSource[Any], config: Mapping[str, Any]
) -> list[Diagnostic]:
    """What is wrong with ``config``: the model's field checks, then the element's cross-attribute ones."""
    return [*validate(element.model, config), *element.validate_config(ConfigView(element.model, config))]


def _register_secrets(block: BlockSchema, value: object) -> None:
    """Teach the redactor every sensitive or write-only string in a decoded object."""
    if not isinstance(value, Mapping):
        return
    for name, attr in block.attributes.items():
        if attr.spec.sensitive or attr.spec.write_only:
            _register_leaf_strings(value.get(name))
    for name, nested in block.blocks.items():
        inner = value.get(name)
        for item in inner if isinstance(inner, list) else [inner]:
            _register_secrets(nested.block, item)


def _register_leaf_strings(value: object) -> None:
    if isinstance(value, str):
        REDACTOR.register(value)
    elif isinstance(value, list):
        for item in value:
            _register_leaf_strings(item)
    elif isinstance(value, Mapping):
        for item in value.values():
            _register_leaf_strings(item)


class _WithDiagnostics(Protocol):
    """Every tfplugin6 response carries its diagnostics in a repeated ``diagnostics`` field."""

    @property
    def diagnostics(self) -> Any: ...


ResponseT = TypeVar("ResponseT", bound=_WithDiagnostics)


class ProviderServer(pb_grpc.ProviderServicer):
    """Serves one :class:`tfbridge.resource.Provider` over tfplugin6.

    Each RPC decodes its values, calls the plan engine or the provider, and encodes the answer inside
    :meth:`_answering`, the one place where failures become diagnostics and diagnostics reach the
    response.
    """

    def __init__(self, provider: Provider[Any], *, cancel: CancelToken | None = None) -> None:
        self._provider = provider
        self._cancel = cancel or CancelToken()
        self._log = Logger(f"provider.terraform-provider-{provider.type_name}")
        self._resources: dict[str, Resource[Any]] = {cls.type_name: cls() for cls in provider.resources}
        self._data_sources: dict[str, DataSource[Any]] = {
            cls.type_name: cls() for cls in provider.data_sources
        }
        self._provider_schema = provider.schema()
        self._resource_schemas = {name: type(r).schema() for name, r in self._resources.items()}
        self._data_schemas = {name: type(d).schema() for name, d in self._data_sources.items()}
        self._configured: Any = None
        self._schema_response: pb.GetProviderSchema.Response | None = None

    # -- helpers -------------------------------------------------------------------------------

    def _context(self, deadline_seconds: float | None = None, private: bytes = b"") -> Context:
        deadline = None if deadline_seconds is None else time.monotonic() + deadline_seconds
        ctx = Context(self._cancel, self._log, self._configured, deadline, private=private)
        ctx.make_current()  # one request per gRPC worker thread at a time
        return ctx

    @contextmanager
    def _answering(
        self, response: _WithDiagnostics, operation: str, root: cty.CtyType | None
    ) -> Iterator[list[Diagnostic]]:
        """Collect an RPC's diagnostics (failures included) and put them into its response.

        ``root`` is the type of the object the diagnostics' attribute paths point into (None: none).
        """
        diagnostics: list[Diagnostic] = []
        with self._guard(operation, diagnostics):
            yield diagnostics
        response.diagnostics.extend(diagnostics_pb(diagnostics, root))

    @contextmanager
    def _guard(self, operation: str, diagnostics: list[Diagnostic]) -> Iterator[None]:
        """Turn any failure into diagnostics: Terraform must always get an answer."""
        try:
            yield
        except TFError as exc:
            diagnostics.extend(exc.diagnostics())
        except Cancelled:
            why = (
                "The provider's launcher or Terraform is gone; what the operation made was undone where it could be."
                if self._cancel.abandoned
                else "Terraform asked the provider to stop (Ctrl-C)."
            )
            diagnostics.append(Diagnostic.error(f"{operation} was cancelled", why))
        except TimeoutError as exc:
            diagnostics.append(Diagnostic.error(f"{operation} timed out", str(exc)))
        except cty.CtyError as exc:
            diagnostics.append(Diagnostic.error(f"{operation}: invalid value", str(exc), exc.path or None))
        except Exception as exc:
            known = self._provider.diagnose(exc)
            if known is not None:
                diagnostics.extend(known)
                return
            self._log.error(f"{operation} failed", error=repr(exc), trace=traceback.format_exc())
            diagnostics.append(
                Diagnostic.error(
                    f"{operation} failed: internal provider error", f"{type(exc).__name__}: {exc}"
                )
            )

    def _answering_resource(
        self, response: _WithDiagnostics, operation: str, type_name: str
    ) -> AbstractContextManager[list[Diagnostic]]:
        """:meth:`_answering` for an RPC on the resource type ``type_name``."""
        return self._answering(response, operation, _type_of(self._resource_schemas, type_name))

    def _answering_data_source(
        self, response: _WithDiagnostics, operation: str, type_name: str
    ) -> AbstractContextManager[list[Diagnostic]]:
        """:meth:`_answering` for an RPC on the data source type ``type_name``."""
        return self._answering(response, operation, _type_of(self._data_schemas, type_name))

    def _resource(self, type_name: str) -> tuple[Resource[Any], Schema]:
        try:
            return self._resources[type_name], self._resource_schemas[type_name]
        except KeyError:
            raise TFError(f"unknown resource type {type_name}") from None

    def _data_source(self, type_name: str) -> tuple[DataSource[Any], Schema]:
        try:
            return self._data_sources[type_name], self._data_schemas[type_name]
        except KeyError:
            raise TFError(f"unknown data source type {type_name}") from None

    def _budget(self, resource: Resource[Any], model: BaseModel, operation: str) -> float | None:
        timeouts = getattr(model, "timeouts", None)
        return operation_budget(timeouts, operation, resource.default_timeouts.get(operation))

    def _deadline(self, resource: Resource[Any], model: BaseModel, operation: str) -> float | None:
        budget = self._budget(resource, model, operation)
        return None if budget is None else time.monotonic() + budget

    # -- metadata and schema ------------------------------------------------------------------

    def _capabilities(self) -> pb.ServerCapabilities:
        return pb.ServerCapabilities(plan_destroy=True, get_provider_schema_optional=True)

    def GetMetadata(self, request: pb.GetMetadata.Request, context: grpc.ServicerContext) -> Any:
        return pb.GetMetadata.Response(
            server_capabilities=self._capabilities(),
            resources=[pb.GetMetadata.ResourceMetadata(type_name=n) for n in self._resources],
            data_sources=[pb.GetMetadata.DataSourceMetadata(type_name=n) for n in self._data_sources],
        )

    def GetProviderSchema(self, request: pb.GetProviderSchema.Request, context: grpc.ServicerContext) -> Any:
        if self._schema_response is None:
            self._schema_response = pb.GetProviderSchema.Response(
                provider=schema_pb(self._provider_schema),
                resource_schemas={n: schema_pb(s) for n, s in self._resource_schemas.items()},
                data_source_schemas={n: schema_pb(s) for n, s in self._data_schemas.items()},
                server_capabilities=self._capabilities(),
            )
        return self._schema_response

    # -- provider ------------------------------------------------------------------------------

    def ValidateProviderConfig(
        self, request: pb.ValidateProviderConfig.Request, context: grpc.ServicerContext
    ) -> Any:
        response = pb.ValidateProviderConfig.Response()
        schema = self._provider_schema
        with self._answering(response, "validating the provider configuration", schema.type) as diagnostics:
            config = decode(request.config, schema.type) or {}
            _register_secrets(schema.block, config)
            diagnostics += _config_diagnostics(self._provider, config)
        return response

    def ConfigureProvider(self, request: pb.ConfigureProvider.Request, context: grpc.ServicerContext) -> Any:
        response = pb.ConfigureProvider.Response()
        schema = self._provider_schema
        with self._answering(response, "configuring the provider", schema.type) as diagnostics:
            config = decode(request.config, schema.type) or {}
            _register_secrets(schema.block, config)
            ctx = self._context()
            self._configured = self._provider.configure(ctx, to_model(type(self._provider).model, config))
            diagnostics += ctx.warnings
        return response

    def StopProvider(self, request: pb.StopProvider.Request, context: grpc.ServicerContext) -> Any:
        # Never stop the server here: in-flight applies must still reach Terraform with what they made.
        self._log.info("stop requested: cancelling long-running operations")
        self._cancel.cancel()
        return pb.StopProvider.Response()

    # -- resources -----------------------------------------------------------------------------

    def ValidateResourceConfig(
        self, request: pb.ValidateResourceConfig.Request, context: grpc.ServicerContext
    ) -> Any:
        response = pb.ValidateResourceConfig.Response()
        operation = f"validating {request.type_name}"
        with self._answering_resource(response, operation, request.type_name) as diagnostics:
            resource, schema = self._resource(request.type_name)
            config = decode(request.config, schema.type) or {}
            _register_secrets(schema.block, config)
            write_only = [n for n, a in schema.block.attributes.items() if a.spec.write_only]
            if (
                write_only
                and not request.client_capabilities.write_only_attributes_allowed
                and any(config.get(n) is not None for n in write_only)
            ):
                diagnostics.append(
                    Diagnostic.error(
                        "Write-only attributes need Terraform 1.11 or later",
                        f"{request.type_name} sets a write-only attribute, which this Terraform cannot handle.",
                    )
                )
            diagnostics += _config_diagnostics(resource, config)
        return response

    def UpgradeResourceState(
        self, request: pb.UpgradeResourceState.Request, context: grpc.ServicerContext
    ) -> Any:
        response = pb.UpgradeResourceState.Response()
        operation = f"upgrading the state of {request.type_name}"
        with self._answering_resource(response, operation, request.type_name):
            resource, schema = self._resource(request.type_name)
            if not request.raw_state.json:
                raise TFError("state in the legacy flatmap format is not supported; re-import the resource")
            state = json.loads(request.raw_state.json)
            if request.version < schema.version:
                state = resource.upgrade_state(request.version, state)
            elif request.version > schema.version:
                raise TFError(
                    f"{request.type_name} state has schema version {request.version}, newer than this "
                    f"provider's {schema.version}: upgrade the provider"
                )
            response.upgraded_state.CopyFrom(encode(normalize(schema.block, state), schema.type))
        return response

    def ReadResource(self, request: pb.ReadResource.Request, context: grpc.ServicerContext) -> Any:
        response = pb.ReadResource.Response(new_state=request.current_state, private=request.private)
        operation = f"reading {request.type_name}"
        with self._answering_resource(response, operation, request.type_name) as diagnostics:
            resource, schema = self._resource(request.type_name)
            current = decode(request.current_state, schema.type)
            if current is not None:
                current_model = to_model(resource.model, current)
                ctx = self._context(self._budget(resource, current_model, "read"), request.private)
                refreshed = resource.read(ctx, current_model)
                new = None if refreshed is None else normalize(schema.block, from_model(refreshed))
                response.new_state.CopyFrom(encode(new, schema.type))
                response.private = ctx.private
                diagnostics += ctx.warnings
        return response

    def PlanResourceChange(
        self, request: pb.PlanResourceChange.Request, context: grpc.ServicerContext
    ) -> Any:
        response = pb.PlanResourceChange.Response(
            planned_state=request.proposed_new_state, planned_private=request.prior_private
        )
        operation = f"planning {request.type_name}"
        with self._answering_resource(response, operation, request.type_name) as diagnostics:
            resource, schema = self._resource(request.type_name)
            proposed = decode(request.proposed_new_state, schema.type)
            prior = decode(request.prior_state, schema.type)
            if proposed is None:  # a delete: nothing to decide, but what it still holds is held
                if prior is not None and not destroying():
                    ctx = self._context(private=request.prior_private)
                    resource.plan_delete(ctx, to_model(resource.model, prior))
                    diagnostics += ctx.warnings
                return response
            config = decode(request.config, schema.type) or {}
            _register_secrets(schema.block, config)
            change = plan_change(schema.block, config, prior, proposed)
            ctx = self._context(private=request.prior_private)
            # Terraform refreshes a destroy with a normal plan, of every object and of every create, and
            # aborts the destroy on any error of it, yet keeps nothing of it but the refreshed state. So a
            # resource's own plan rules (which ask the API, and refuse) do not run then: the schema's plan
            # (computed values unknown, defaults) stands.
            if not destroying():
                resource.modify_plan(ctx, change)
            elif prior is None and whole_destroy():
                try:
                    resource.end_unrecorded(ctx, change.config)
                except TFError as exc:
                    ctx.warnings += [d.as_warning() for d in exc.diagnostics()]
            diagnostics += change.diagnostics + ctx.warnings
            response.planned_state.CopyFrom(encode(change.planned_value, schema.type))
            response.planned_private = ctx.private
            response.requires_replace.extend(path_pb(p, schema.type) for p in change.requires_replace)
        return response

    def ApplyResourceChange(
        self, request: pb.ApplyResourceChange.Request, context: grpc.ServicerContext
    ) -> Any:
        response = pb.ApplyResourceChange.Response(
            new_state=request.prior_state, private=request.planned_private
        )
        operation = "applying " + request.type_name
        with self._answering_resource(response, operation, request.type_name) as diagnostics:
            resource, schema = self._resource(request.type_name)
            ctx = self._context(private=request.planned_private)
            new_state: Any = MISSING
            with self._guard(operation, diagnostics):  # on failure, still hand back what was recorded
                prior = decode(request.prior_state, schema.type)
                planned = decode(request.planned_state, schema.type)
                config = decode(request.config, schema.type)
                _register_secrets(schema.block, config)
                verb = "deleting" if planned is None else "creating" if prior is None else "updating"
                operation = f"{verb} {request.type_name}"  # what the log and an encoding error say
                new_state = self._apply(ctx, resource, prior, planned, config)
            if new_state is MISSING and ctx.partial_state is not None:
                # The operation failed after creating something: hand it to Terraform so it is tracked.
                new_state = from_model(ctx.partial_state)
            if new_state is not MISSING:
                with self._guard(operation, diagnostics):
                    normalized = None if new_state is None else normalize(schema.block, new_state)
                    response.new_state.CopyFrom(encode(normalized, schema.type))
            response.private = ctx.private
            diagnostics += ctx.warnings
            if has_errors(diagnostics):
                self._log.warn(f"{operation} failed", diagnostics=len(diagnostics))
        return response

    def _apply(
        self, ctx: Context, resource: Resource[Any], prior: Any, planned: Any, config: Any
    ) -> dict[str, object] | None:
        """Delete, create or update, as the planned and prior states say; the new state (None: gone)."""
        if planned is None:
            prior_model = to_model(resource.model, prior)
            ctx.deadline = self._deadline(resource, prior_model, "delete")
            resource.delete(ctx, prior_model)
            return None
        planned_model = to_model(resource.model, planned)
        if prior is None:
            ctx.deadline = self._deadline(resource, planned_model, "create")
            return from_model(resource.create(ctx, planned_model, to_model(resource.model, config)))
        ctx.deadline = self._deadline(resource, planned_model, "update")
        return from_model(
            resource.update(
                ctx, to_model(resource.model, prior), planned_model, to_model(resource.model, config)
            )
        )

    def ImportResourceState(
        self, request: pb.ImportResourceState.Request, context: grpc.ServicerContext
    ) -> Any:
        response = pb.ImportResourceState.Response()
        operation = f"importing {request.type_name}"
        with self._answering_resource(response, operation, request.type_name) as diagnostics:
            resource, schema = self._resource(request.type_name)
            ctx = self._context()
            state = normalize(schema.block, resource.import_state(ctx, request.id))
            response.imported_resources.append(
                pb.ImportResourceState.ImportedResource(
                    type_name=request.type_name, state=encode(state, schema.type), private=ctx.private
                )
            )
            diagnostics += ctx.warnings
        return response

    def MoveResourceState(self, request: pb.MoveResourceState.Request, context: grpc.ServicerContext) -> Any:
        response = pb.MoveResourceState.Response()
        with self._answering(response, "moving state", None):
            raise TFError("moving state between resource types is not supported")
        return response

    # -- data sources --------------------------------------------------------------------------

    def ValidateDataResourceConfig(
        self, request: pb.ValidateDataResourceConfig.Request, context: grpc.ServicerContext
    ) -> Any:
        response = pb.ValidateDataResourceConfig.Response()
        operation = f"validating data source {request.type_name}"
        with self._answering_data_source(response, operation, request.type_name) as diagnostics:
            data_source, schema = self._data_source(request.type_name)
            config = decode(request.config, schema.type) or {}
            diagnostics += _config_diagnostics(data_source, config)
        return response

    def ReadDataSource(self, request: pb.ReadDataSource.Request, context: grpc.ServicerContext) -> Any:
        response = pb.ReadDataSource.Response()
        operation = f"reading data source {request.type_name}"
        with self._answering_data_source(response, operation, request.type_name) as diagnostics:
            data_source, schema = self._data_source(request.type_name)
            config = decode(request.config, schema.type) or {}
            ctx = self._context()
            result = data_source.read(ctx, to_model(data_source.model, config))
            response.state.CopyFrom(encode(normalize(schema.block, from_model(result)), schema.type))
            diagnostics += ctx.warnings
        return response

    # -- not offered ---------------------------------------------------------------------------

    def GetFunctions(self, request: pb.GetFunctions.Request, context: grpc.ServicerContext) -> Any:
        return pb.GetFunctions.Response()

    def CallFunction(self, request: pb.CallFunction.Request, context: grpc.ServicerContext) -> Any:
        return pb.CallFunction.Response(error=pb.FunctionError(text=f"unknown function {request.name}"))

    def ValidateEphemeralResourceConfig(
        self, request: pb.ValidateEphemeralResourceConfig.Request, context: grpc.ServicerContext
    ) -> Any:
        return self._no_ephemeral(pb.ValidateEphemeralResourceConfig.Response(), request.type_name)

    def OpenEphemeralResource(
        self, request: pb.OpenEphemeralResource.Request, context: grpc.ServicerContext
    ) -> Any:
        return self._no_ephemeral(pb.OpenEphemeralResource.Response(), request.type_name)

    def _no_ephemeral(self, response: ResponseT, type_name: str) -> ResponseT:
        with self._answering(response, "ephemeral resource", None):
            raise TFError(f"unknown ephemeral resource {type_name}")
        return response

    def RenewEphemeralResource(
        self, request: pb.RenewEphemeralResource.Request, context: grpc.ServicerContext
    ) -> Any:
        return pb.RenewEphemeralResource.Response()

    def CloseEphemeralResource(
        self, request: pb.CloseEphemeralResource.Request, context: grpc.ServicerContext
    ) -> Any:
        return pb.CloseEphemeralResource.Response()
