"""The 16 `svc_*` tools of spec §4.4, and ours beyond them (roles), on one `MCPServer`, over
the shared service layer.

Every operation is the same service or store function the CLI and REST API call; this module
only translates: typed arguments in (schemas.py), records out, and an `IdentityError` into an
MCP tool error "failed to <operation>: <what is wrong>" (never a transport failure). Changes
are audited as actor `mcp:<token subject>` over HTTP, `mcp:stdio` over stdio.

Importing this module imports the mcp SDK (about a second): only the MCP entry points
(`identityctl mcp`, the first request to /mcp) do.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Literal, TypeVar

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field

from identityctl import __version__
from identityctl.errors import Forbidden, IdentityError
from identityctl.federation import KINDS
from identityctl.mcp import react_sdk
from identityctl.mcp.bridge import ORIGIN_ENVIRON_KEY
from identityctl.mcp.schemas import (
    Application,
    ApplicationFields,
    ApplicationList,
    ApplicationTemplates,
    CreatedApplication,
    Flow,
    FlowDefinition,
    FlowList,
    FlowName,
    FlowNodes,
    FlowType,
    OrganizationUnitList,
    ReactIntegrationGuide,
    Role,
    RoleList,
    Theme,
    ThemeList,
    UserRoles,
    UserTypeList,
    WireModel,
    field_title,
)
from identityctl.services import catalog as catalog_service
from identityctl.services.accounts import federation
from identityctl.services.accounts import sessions as sessions_service
from identityctl.services.admin import changes as changes_service
from identityctl.services.catalog.applications import THEME_PLACEHOLDER
from identityctl.services.context import ServiceContext
from identityctl.services.delivery import webhooks as webhooks_service
from identityctl.services.directory import roles as roles_service
from identityctl.services.directory import users as directory_service
from identityctl.services.origin import RequestOrigin
from identityctl.store import db

F = TypeVar("F", bound=Callable[..., Any])

SERVER_NAME = "identityctl"
STDIO_ACTOR = "mcp:stdio"
STDIO_ORIGIN = RequestOrigin(actor=STDIO_ACTOR)
#: The keyword of a tool's parameter that receives who asks (see _takes_origin).
ORIGIN = "origin"
INSTRUCTIONS = f"""\
identityctl is a passkey-first identity service. These tools manage the applications (OAuth
clients) that sign users in through it, the sign-in and sign-up flows, the themes of its
hosted sign-in page, and read its organization units and user types.

Rules:
- Before creating an SPA, Mobile or Server application, call svc_list_themes and put a real
  theme id in themeId: the svc_get_application_templates templates carry the placeholder
  {THEME_PLACEHOLDER}, which is refused. M2M applications have no login page
  and need no theme.
- svc_update_application and svc_update_flow replace the whole record: read it first, change
  what you need, send all of it back.
- Flows are checked as the flow engine runs them; an error names the node and what to fix.
- A confidential client's secret appears once, in the svc_create_application result.
- svc_integrate_react_sdk explains how a React app signs users in and up with this service.
- Roles carry scopes; only a person holding a role that carries a scope can grant it to a
  client (the role admin carries system: administering this service). list_roles,
  create_role, grant_role and revoke_role manage them.
- end_user_sessions signs a user out everywhere (their single sign-on sessions).
- list_identity_providers, add_identity_provider and remove_identity_provider manage the
  "Continue with Google / Microsoft / GitHub / your OpenID provider" sign-in.
- list_webhooks, add_webhook and remove_webhook send audit events to HTTPS endpoints.
- Where an administrator approves changes, a changing tool answers "Not applied yet:
  proposed as change <id>" with the page where they approve it: tell the person."""

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
CREATES = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
REPLACES = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True,
                           open_world_hint=False)

_TOOLS: list[tuple[Callable[..., Any], str, ToolAnnotations]] = []
#: The mutating tools whose change is configuration (as code): with
#: ``admin.approve_mcp_changes`` they propose it (see _approved_by_a_person).
_PROPOSABLE: set[str] = set()
#: The tools whose arguments are a document (an application, a flow): see _keeping_all_keys.
_TAKE_DOCUMENTS: set[str] = set()

ApplicationId = Annotated[str, Field(
    description="Application id (UUID), as svc_list_applications shows it.")]
FlowId = Annotated[str, Field(description="Flow id (UUID), as svc_list_flows shows it.")]
ServiceUrl = Annotated[str | None, Field(
    description="Public URL of this identity service as the React app reaches it; default: "
                "the service's configured base_url.")]


def request_origin(context: Context[Any, Any]) -> RequestOrigin:
    """Who asks and from where: over /mcp, the verified caller server/mcp_endpoint.py put in
    the request (``mcp:<subject>``, its address, the request's id); else the local user of
    stdio."""
    request = context.request_context.request
    environ = getattr(request, "scope", {}).get("wsgi_environ") if request is not None else None
    origin = environ.get(ORIGIN_ENVIRON_KEY) if environ else None
    return origin if isinstance(origin, RequestOrigin) else STDIO_ORIGIN


def _takes_origin(function: Any) -> bool:
    """A tool that changes something takes ``origin`` (keyword-only): the SDK passes its
    request context there, never a client's argument, and _reporting_failures makes it the
    request's :func:`request_origin`."""
    return ORIGIN in inspect.signature(function).parameters


def tool(operation: str, annotations: ToolAnnotations, *, proposable: bool = False
         ) -> Callable[[F], F]:
    """Register a module-level function as a tool; ``operation`` names it in error messages;
    ``proposable``: what it changes is configuration, which a person may approve."""

    def register(function: F) -> F:
        _TOOLS.append((function, operation, annotations))
        if proposable:
            _PROPOSABLE.add(function.__name__)
        return function

    return register


def takes_fields_of(model: type[WireModel], *leading: inspect.Parameter) -> Callable[[F], F]:
    """Give a ``**document`` function the fields of ``model`` as keyword parameters.

    The tool's input schema then lists the record's fields at the top level under their wire
    names (the application object itself is the arguments, as in the reference system); the
    function gets them as keyword arguments and `_document` makes the services' JSON of them.
    """

    def apply(function: F) -> F:
        fields = [
            inspect.Parameter(
                field.alias or name, inspect.Parameter.KEYWORD_ONLY,
                default=inspect.Parameter.empty if field.is_required() else field.default,
                annotation=Annotated[(field.annotation, *field.metadata,
                                      Field(title=field_title(name),
                                            description=field.description))])
            for name, field in model.model_fields.items()]
        _TAKE_DOCUMENTS.add(function.__name__)
        signature = inspect.signature(function, eval_str=True)
        origin = [signature.parameters[ORIGIN]] if ORIGIN in signature.parameters else []
        function.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=[*leading, *fields, *origin])
        return function

    return apply


def _document(model: type[WireModel], values: dict[str, Any]) -> dict[str, Any]:
    return model.model_validate(values).document()


#: Every list tool pages: an assistant reads a result whole, so a list that grows with the
#: deployment must not grow the answer (1,001 applications were 1.4 MB in one call).
PageSize = Annotated[int, Field(ge=1, le=100, description="Page size.")]
PageOffset = Annotated[int, Field(ge=0, description="Items to skip (the previous pages).")]


def _compact(page: BaseModel) -> CallToolResult:
    """``page`` as the SDK would answer it, with its text as compact JSON (the SDK indents
    it, which costs the assistant's context and the server's time on every list)."""
    structured = page.model_dump(mode="json", by_alias=True)
    text = json.dumps(structured, ensure_ascii=False, separators=(",", ":"))
    return CallToolResult(content=[TextContent(type="text", text=text)],
                          structured_content=structured)


# --- applications ---------------------------------------------------------------------------


@tool("list applications", READ_ONLY)
def svc_list_applications(limit: PageSize = 30, offset: PageOffset = 0
                          ) -> Annotated[CallToolResult, ApplicationList]:
    """List the registered applications (OAuth clients) with their settings, ordered by
    name, one page at a time; total_count is the number on all pages.

    Client secrets are never shown."""
    total, applications = catalog_service.applications.applications_page(limit=limit, offset=offset)
    return _compact(ApplicationList.model_validate({"total_count": total,
                                                    "applications": applications}))


@tool("get application", READ_ONLY)
def svc_get_application_by_id(id: ApplicationId) -> Application:
    """Full details of one application, by its id."""
    return Application.model_validate(catalog_service.applications.get_application(id))


@tool("get application", READ_ONLY)
def svc_get_application_by_client_id(
        client_id: Annotated[str, Field(description="The application's OAuth client id.")],
) -> Application:
    """Full details of one application, by its OAuth client id."""
    return Application.model_validate(
        catalog_service.applications.require_application_by_client_id(client_id))


@tool("create application", CREATES, proposable=True)
@takes_fields_of(ApplicationFields)
def svc_create_application(*, origin: RequestOrigin, **application: Any) -> CreatedApplication:
    """Create an application, optionally with its OAuth configuration (inboundAuthConfig).

    Start from svc_get_application_templates. SPA, Mobile and Server applications show the
    hosted sign-in page: call svc_list_themes first and replace the placeholder themeId with a
    real theme id (the placeholder and unknown ids are refused). M2M applications
    (client_credentials only) have no login page and need no theme. Replace placeholder
    redirect URIs with the app's real ones. A confidential client's secret is returned once,
    in clientSecret."""
    created, secret = catalog_service.applications.create_application(
        _document(ApplicationFields, application), origin=origin)
    return CreatedApplication.model_validate({**created, "clientSecret": secret})


@tool("update application", REPLACES, proposable=True)
@takes_fields_of(ApplicationFields, inspect.Parameter(
    "id", inspect.Parameter.KEYWORD_ONLY, annotation=ApplicationId))
def svc_update_application(*, origin: RequestOrigin, **application: Any) -> Application:
    """Replace an existing application (full replacement: fields left out are reset).

    Read it with svc_get_application_by_id, change what you need and send the whole object
    with its id. The client id and secret are kept; publicClient cannot change. The themeId
    rules of svc_create_application apply."""
    document = {**_document(ApplicationFields, application), "id": application["id"]}
    return Application.model_validate(
        catalog_service.applications.update_application(document, origin=origin))


@tool("get application templates", READ_ONLY)
def svc_get_application_templates() -> ApplicationTemplates:
    """Minimal application objects for SPA, Mobile, Server, Device (a TV or command-line
    tool: the device authorization grant) and M2M applications.

    Fill one in and pass it to svc_create_application. SPA, Mobile and Server templates carry
    a placeholder themeId: call svc_list_themes and replace it. M2M needs no theme."""
    return ApplicationTemplates(
        templates=catalog_service.applications.application_templates(), rules=[
        f"SPA, Mobile and Server: themeId is the placeholder {THEME_PLACEHOLDER}; call "
        "svc_list_themes and put a real theme id there before svc_create_application.",
        "M2M (client_credentials) and Device (the person signs in on another device with "
        "the code the device shows) have no login page of their own: leave themeId out.",
        "Replace the example redirect URIs (<CUSTOM_SCHEME>://callback, "
        "https://app.example.com/callback, http://localhost:3000/callback) with the app's own.",
        "Confidential clients (Server, M2M) get their client secret once, in the "
        "svc_create_application result.",
    ])


# --- flows ----------------------------------------------------------------------------------


@tool("list flows", READ_ONLY)
def svc_list_flows(
        limit: PageSize = 30,
        offset: PageOffset = 0,
        flow_type: Annotated[FlowType | None, Field(
            description="Only flows of this type.")] = None,
) -> FlowList:
    """List flows (id, handle, name, type), ordered by handle, one page at a time.

    total_count is the number of matching flows on all pages. Read a whole flow with
    svc_get_flow_by_id or svc_get_flow_by_handle."""
    total, flows = catalog_service.flows.list_flows(flow_type=flow_type, limit=limit, offset=offset)
    return FlowList.model_validate({"total_count": total, "flows": flows})


@tool("get flow", READ_ONLY)
def svc_get_flow_by_handle(
        handle: Annotated[str, Field(description="The flow's handle, e.g. default-passkey-flow.")],
        flow_type: Annotated[FlowType, Field(
            description="AUTHENTICATION, REGISTRATION or RECOVERY: one handle may name one "
                        "flow of each type.")],
) -> Flow:
    """The complete flow definition (nodes included) with this handle and type."""
    return Flow.model_validate(catalog_service.flows.require_flow_by_handle(handle, flow_type))


@tool("get flow", READ_ONLY)
def svc_get_flow_by_id(id: FlowId) -> Flow:
    """The complete flow definition (nodes included), by its id."""
    return Flow.model_validate(catalog_service.flows.get_flow(id))


@tool("create flow", CREATES, proposable=True)
@takes_fields_of(FlowDefinition)
def svc_create_flow(*, origin: RequestOrigin, **flow: Any) -> Flow:
    """Create an AUTHENTICATION (sign-in), REGISTRATION (sign-up) or RECOVERY flow.

    A flow is a graph of nodes: one START (onSuccess), PROMPT nodes (prompts: inputs and an
    action with nextNode), TASK_EXECUTION nodes (executor; onSuccess, optional onIncomplete
    and onFailure) and END. It is validated exactly as the flow engine runs it; an error
    names the node and the fix. Read an existing flow (svc_get_flow_by_handle,
    default-passkey-flow) for a working example."""
    return Flow.model_validate(
        catalog_service.flows.create_flow(_document(FlowDefinition, flow), origin=origin))


@tool("update flow", REPLACES, proposable=True)
def svc_update_flow(id: FlowId, name: FlowName, nodes: FlowNodes, *,
                    origin: RequestOrigin) -> Flow:
    """Replace a flow's name and nodes (its handle and type stay).

    Read it with svc_get_flow_by_id first; the new nodes are validated as in svc_create_flow."""
    return Flow.model_validate(catalog_service.flows.update_flow(
        id, name=name, nodes=[node.document() for node in nodes], origin=origin))


# --- themes, organization units, user types -------------------------------------------------


@tool("list themes", READ_ONLY)
def svc_list_themes(limit: PageSize = 30, offset: PageOffset = 0
                    ) -> Annotated[CallToolResult, ThemeList]:
    """List the themes of the hosted sign-in page (id, handle, display name), ordered by
    handle, one page at a time; total_count is the number on all pages.

    Call it before creating an SPA, Mobile or Server application and use one of these ids as
    its themeId."""
    total, themes = catalog_service.themes.themes_page(limit=limit, offset=offset)
    return _compact(ThemeList.model_validate({"total_count": total, "themes": themes}))


@tool("get theme", READ_ONLY)
def svc_get_theme_by_id(
        id: Annotated[str, Field(description="Theme id, as svc_list_themes shows it.")],
) -> Theme:
    """A full theme: its color schemes (light, dark) and typography."""
    return Theme.model_validate(catalog_service.themes.require_theme(id))


@tool("list organization units", READ_ONLY)
def svc_list_organization_units(limit: PageSize = 30, offset: PageOffset = 0
                                ) -> Annotated[CallToolResult, OrganizationUnitList]:
    """List organization units (id, handle, name, description, parent), ordered by handle,
    one page at a time; total_count is the number on all pages."""
    total, units = directory_service.ous_page(limit=limit, offset=offset)
    return _compact(OrganizationUnitList.model_validate({"total_count": total,
                                                         "organization_units": units}))


@tool("list user types", READ_ONLY)
def svc_list_user_types(limit: PageSize = 30, offset: PageOffset = 0
                        ) -> Annotated[CallToolResult, UserTypeList]:
    """List user types with their self-registration setting and attribute schema, ordered by
    name, one page at a time; total_count is the number on all pages."""
    total, types = directory_service.user_types_page(limit=limit, offset=offset)
    return _compact(UserTypeList.model_validate({"total_count": total, "user_types": types}))


# --- roles (ours, beyond the interface's 16) --------------------------------------------------

RoleName = Annotated[str, Field(description="Role name (or id), as list_roles shows it.")]
UserName = Annotated[str, Field(description="Username or user id.")]


def _user_roles(user: str) -> UserRoles:
    person = directory_service.require_user(user)
    # Whether mail is sent is the deployment's, not the user's: these facts are theirs.
    recovery = directory_service.recovery_of(person, mail=False)
    return UserRoles(user_id=person.id, username=person.username,
                     roles=[Role.model_validate(role.to_api())
                            for role in roles_service.roles_of(person.id)],
                     email_verified=recovery.email_verified,
                     recovery_codes_left=recovery.codes_left)


@tool("list roles", READ_ONLY)
def list_roles(limit: PageSize = 30, offset: PageOffset = 0) -> Annotated[CallToolResult,
                                                                          RoleList]:
    """List roles and the scopes each carries, ordered by name, one page at a time;
    total_count is the number on all pages."""
    roles = roles_service.list_roles()
    return _compact(RoleList(total_count=len(roles), roles=[
        Role.model_validate(role.to_api()) for role in roles[offset:offset + limit]]))


@tool("create role", CREATES, proposable=True)
def create_role(name: Annotated[str, Field(description="Handle: letters, digits, - and _.")],
                scopes: Annotated[list[str], Field(description="Scopes the role carries.")],
                description: str = "", *, origin: RequestOrigin) -> Role:
    """Create a role carrying scopes. From then on only people holding a role that carries
    one of those scopes can grant it to a client."""
    return Role.model_validate(roles_service.create_role(
        name=name, scopes=scopes, description=description, origin=origin).to_api())


@tool("grant role", CREATES)
def grant_role(user: UserName, role: RoleName, *, origin: RequestOrigin) -> UserRoles:
    """Give a user a role (nothing changes if they hold it); the user's roles after."""
    roles_service.grant_role(user, role, origin=origin)
    return _user_roles(user)


@tool("revoke role", REPLACES)
def revoke_role(user: UserName, role: RoleName, *, origin: RequestOrigin) -> UserRoles:
    """Take a role from a user; the user's roles after. Tokens already issued keep their
    scopes until they expire; refreshing them is refused."""
    roles_service.revoke_role(user, role, origin=origin)
    return _user_roles(user)


# --- sessions (ours) ---------------------------------------------------------------------------


class IdentityProviderInfo(WireModel):
    """A provider as list_identity_providers shows it (never its client secret)."""

    id: str
    handle: str
    name: str
    kind: str
    issuer: str
    client_id: str
    scopes: list[str]


class IdentityProviderList(BaseModel):
    redirect_uri: Annotated[str, Field(description="Register this at each provider.")]
    identity_providers: list[IdentityProviderInfo]


class WebhookInfo(BaseModel):
    id: str
    url: str
    events: list[str]
    description: str = ""


class NewWebhook(WebhookInfo):
    secret: Annotated[str, Field(description="Signing secret (whsec_…): shown only now.")]


class WebhookList(BaseModel):
    webhooks: list[WebhookInfo]


class Removed(BaseModel):
    id: str
    removed: bool


class EndedSessions(BaseModel):
    user_id: str
    username: str
    ended: Annotated[int, Field(description="How many sign-in sessions ended.")]


# --- the server -----------------------------------------------------------------------------


#: The next step after an error whose fix is another tool, in the tools' words (the command
#: line names its commands: cli/common.py).
NEXT_STEP = {"theme_placeholder": "call svc_list_themes for the theme ids"}


def _reporting_failures(function: F, operation: str) -> F:
    """Turn our domain errors into tool errors the client sees (`isError` with the reason),
    a database failure included ("The database does not answer; retry shortly."); the SDK
    runs each call on a worker thread, which gives its connection back when the call ends."""

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        if ORIGIN in kwargs:
            kwargs[ORIGIN] = request_origin(kwargs[ORIGIN])
        try:
            with db.failures_as_503():
                return function(*args, **kwargs)
        except IdentityError as exc:
            step = f" ({NEXT_STEP[exc.code]})" if exc.code in NEXT_STEP else ""
            raise ToolError(f"failed to {operation}: {exc.description or exc.message}{step}"
                            ) from exc
        finally:
            db.release_connection()

    return call  # type: ignore[return-value]


def _approved_by_a_person(function: F, operation: str, context: ServiceContext) -> F:
    """With ``admin.approve_mcp_changes``, a mutating tool makes no change: a proposable one
    records it as a proposed change (services/admin/changes.py) and answers its id and where
    an admin approves it; any other is refused (its change is no configuration to show)."""
    proposable = function.__name__ in _PROPOSABLE

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        if not proposable:
            raise Forbidden(f"This deployment applies changes from an assistant only when an "
                            f"administrator approves them, and '{operation}' cannot be "
                            "proposed: ask an administrator to do it in the admin console or "
                            "with identityctl.", code="approval_required")
        token = get_access_token()
        change = changes_service.propose(
            context, summary=operation, make=lambda: function(*args, **kwargs),
            client_id=token.client_id if token is not None else STDIO_ACTOR,
            origin=kwargs[ORIGIN])
        url = changes_service.console_url(context, change.id)
        # An error result: nothing was applied, and a client checks a success against the
        # tool's output schema, which describes the applied record.
        return CallToolResult(is_error=True, content=[TextContent(type="text", text=(
            f"Not applied yet: proposed as change {change.id}. It takes effect when an "
            f"administrator approves it with a passkey at {url}"))], structured_content={
            "changeId": change.id, "state": change.state, "approvalUrl": url,
            "digest": change.digest, "diff": change.diff})

    return call  # type: ignore[return-value]


@contextmanager
def _root_logging_kept() -> Iterator[None]:
    """`MCPServer()` calls `logging.basicConfig`; keep the host's root logger as it was."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


def _keeping_all_keys(tool: Tool) -> Tool:
    """A tool that takes a document gets every key sent, unknown ones included: the SDK's
    argument model would drop a misspelt key without a word, where the services' key check
    (services/shapes.py) names it and the key meant."""
    declared = tool.fn_metadata.arg_model

    class Arguments(declared):  # type: ignore[misc, valid-type]
        model_config = ConfigDict(extra="allow")

        def model_dump_one_level(self) -> dict[str, Any]:
            return {**super().model_dump_one_level(), **(self.model_extra or {})}

    tool.fn_metadata.arg_model = Arguments
    return tool


def build_server(context: ServiceContext) -> MCPServer[Any]:
    """An `MCPServer` with the tools, for stdio or the HTTP bridge.

    The tool list is the same for every caller and fixed once built: /mcp replays the SDK's
    `tools/list` answers (mcp/memo.py), so a list that depended on the caller would leak.
    """
    config = context.config

    def svc_integrate_react_sdk(
            service_url: ServiceUrl = None,
    ) -> ReactIntegrationGuide:
        """Instructions and code snippets for a React app: redirect-based login (Mode 1,
        react-oidc-context + PKCE), self-hosted login driving /flow/execute and WebAuthn
        (Mode 2), and app-native sign-up, with this service's URLs filled in."""
        url = service_url or config.base_url
        return react_sdk.integration_guide(service_url=url, issuer=config.oauth.issuer or url)

    def list_identity_providers() -> IdentityProviderList:
        """The upstream identity providers people may sign in through ("Continue with …"),
        never their client secrets, and the redirect URI to register at each."""
        return IdentityProviderList(
            redirect_uri=federation.callback_uri(context),
            identity_providers=[IdentityProviderInfo.model_validate(provider.to_api())
                                for provider in federation.list_providers()])

    def add_identity_provider(
            kind: Annotated[Literal[KINDS], Field(  # type: ignore[valid-type]
                description="oidc (any OpenID provider), google, microsoft or github.")],
            client_id: Annotated[str, Field(description="The client id the provider gave.")],
            client_secret: Annotated[str, Field(description="Its client secret: stored, "
                                                "never shown again.")],
            issuer: Annotated[str, Field(description="oidc: the issuer URL.")] = "",
            tenant: Annotated[str, Field(description="microsoft: the directory id, or "
                                         "organizations / common.")] = "",
            handle: Annotated[str, Field(description="Short key (default: the kind).")] = "",
            name: Annotated[str, Field(description="Shown after \"Continue with\".")] = "",
            *, origin: RequestOrigin,
    ) -> IdentityProviderInfo:
        """Let people sign in through an identity provider; register
        list_identity_providers' redirect_uri at the provider first. The default sign-in
        flow then shows "Continue with <name>"."""
        return IdentityProviderInfo.model_validate(federation.add_provider(
            context, kind=kind, client_id=client_id, client_secret=client_secret,
            issuer=issuer, tenant=tenant, handle=handle, name=name,
            origin=origin).to_api())

    def remove_identity_provider(
            provider: Annotated[str, Field(description="Its handle or id.")], *,
            origin: RequestOrigin) -> Removed:
        """Stop offering a provider; accounts linked through it are unlinked (the users
        stay and sign in another way)."""
        found = federation.require_provider(provider)
        federation.remove_provider(found.id, origin=origin)
        return Removed(id=found.id, removed=True)

    def list_webhooks() -> WebhookList:
        """The webhook subscriptions: which audit events go to which HTTPS endpoint (never
        their signing secrets)."""
        return WebhookList(webhooks=[WebhookInfo.model_validate(subscription.to_api())
                                     for subscription in webhooks_service.list_subscriptions()])

    def add_webhook(
            url: Annotated[str, Field(description="The endpoint (https).")],
            events: Annotated[list[str], Field(description="Audit event types "
                                               "(passkey.register), prefixes (user.*) or *.")],
            description: str = "", *, origin: RequestOrigin,
    ) -> NewWebhook:
        """Send audit events to an HTTPS endpoint, signed per Standard Webhooks; the signing
        secret is in this answer only."""
        made, secret = webhooks_service.add_subscription(
            url=url, events=events, description=description, origin=origin)
        return NewWebhook(**WebhookInfo.model_validate(made.to_api()).model_dump(),
                          secret=secret)

    def remove_webhook(id: Annotated[str, Field(description="The subscription's id.")], *,
                       origin: RequestOrigin) -> Removed:
        """Stop delivering to a webhook subscription."""
        webhooks_service.remove_subscription(id, origin=origin)
        return Removed(id=id, removed=True)

    def end_user_sessions(user: UserName, *, origin: RequestOrigin) -> EndedSessions:
        """Sign a user out everywhere: end every sign-in session (single sign-on) and every
        token of a client signed in through one; clients with a back-channel logout URI are
        told."""
        person = directory_service.require_user(user)
        ended = sessions_service.end_user_sessions(context, person.id, origin=origin,
                                                   reason="ended by an administrator")
        return EndedSessions(user_id=person.id, username=person.username, ended=ended)

    tools = [*_TOOLS, (svc_integrate_react_sdk, "integrate the React SDK", READ_ONLY),
             (end_user_sessions, "end user sessions", REPLACES),
             (list_identity_providers, "list identity providers", READ_ONLY),
             (add_identity_provider, "add identity provider", CREATES),
             (remove_identity_provider, "remove identity provider", REPLACES),
             (list_webhooks, "list webhooks", READ_ONLY),
             (add_webhook, "add webhook", CREATES),
             (remove_webhook, "remove webhook", REPLACES)]
    if config.admin.approve_mcp_changes:
        tools = [(function if hints.read_only_hint else
                  _approved_by_a_person(function, operation, context), operation, hints)
                 for function, operation, hints in tools]
    served = [Tool.from_function(_reporting_failures(function, operation),
                                 name=function.__name__, annotations=hints,
                                 description=inspect.cleandoc(function.__doc__ or ""),
                                 context_kwarg=ORIGIN if _takes_origin(function) else None)
              for function, operation, hints in tools]
    with _root_logging_kept():
        server: MCPServer[Any] = MCPServer(
            SERVER_NAME, instructions=INSTRUCTIONS, version=__version__,
            tools=[_keeping_all_keys(tool) if tool.name in _TAKE_DOCUMENTS else tool
                   for tool in served])
    # The SDK logs every stateless request and expected tool error at INFO.
    logging.getLogger("mcp").setLevel(logging.WARNING)
    return server
