"""The records the MCP tools take and return, as pydantic models (their JSON schemas are the
tools' input and output schemas, so field descriptions are written for the AI model).

Records use the REST API's camelCase names on the wire (`themeId`, `inboundAuthConfig`), the
list envelopes the reference system's snake_case (`{total_count, applications}`). Unknown keys
are kept, so a record the store grows a field for still round-trips, and unset optional fields
are left out of results rather than sent as null (a node copied back into svc_update_flow must
not carry `"onFailure": null`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer
from pydantic.alias_generators import to_camel

from identityctl.flow.definition import EXECUTORS, FLOW_TYPES, INPUT_TYPES, NODE_TYPES
from identityctl.services.catalog.applications import AUTH_METHODS, GRANT_TYPES, TEMPLATES

# Literal[tuple] spells the enum from the tuple the services validate against: one list.
FlowType = Literal[FLOW_TYPES]  # type: ignore[valid-type]
NodeType = Literal[NODE_TYPES]  # type: ignore[valid-type]
InputType = Literal[INPUT_TYPES]  # type: ignore[valid-type]
ExecutorName = Literal[tuple(EXECUTORS)]  # type: ignore[valid-type]
GrantType = Literal[GRANT_TYPES]  # type: ignore[valid-type]
AuthMethod = Literal[AUTH_METHODS]  # type: ignore[valid-type]
TemplateName = Literal[tuple(TEMPLATES)]  # type: ignore[valid-type]


def field_title(name: str) -> str:
    """The schema title of a field: `theme_id` -> "Theme Id" (as pydantic titles parameters)."""
    return name.replace("_", " ").title()


class WireModel(BaseModel):
    """camelCase on the wire, snake_case in Python; unknown keys kept; None fields omitted."""

    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True,
                              validate_by_alias=True, serialize_by_alias=True, extra="allow",
                              field_title_generator=lambda name, _: field_title(name))

    @model_serializer(mode="wrap")
    def _omit_none(self, serialize: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return {key: value for key, value in serialize(self).items() if value is not None}

    def document(self) -> dict[str, Any]:
        """The JSON document the services take (camelCase keys, no nulls)."""
        return self.model_dump(mode="json")


# --- applications ---------------------------------------------------------------------------


class OAuthSettings(WireModel):
    client_id: Annotated[str | None, Field(
        description="OAuth client id. Generated when left out on create; never changes.")] = None
    redirect_uris: Annotated[list[str] | None, Field(
        description="Exact redirect URIs (no wildcards, no fragment). Required for the "
                    "authorization_code grant; replace template placeholders such as "
                    "<CUSTOM_SCHEME>.")] = None
    grant_types: Annotated[list[GrantType] | None, Field(
        description="Grants the client may use. Browser and mobile apps: authorization_code and "
                    "refresh_token; machine-to-machine: client_credentials only.")] = None
    response_types: Annotated[list[str] | None, Field(
        description="Derived from the grants: ['code'] with authorization_code.")] = None
    token_endpoint_auth_method: Annotated[AuthMethod | None, Field(
        description="'none' for public clients (SPA, Mobile); client_secret_basic or "
                    "client_secret_post for confidential ones (Server, M2M).")] = None
    pkce_required: Annotated[bool | None, Field(
        description="PKCE (S256) at the token endpoint; always on for public clients.")] = None
    public_client: Annotated[bool | None, Field(
        description="True for clients that cannot keep a secret (SPA, Mobile). Cannot change "
                    "after creation.")] = None
    scopes: Annotated[list[str] | None, Field(
        description="Scopes the client may request, e.g. openid profile email.")] = None
    token: Annotated[dict[str, Any] | None, Field(
        description="Token settings (lifetimes); optional.")] = None


class InboundAuthConfig(WireModel):
    type: Annotated[Literal["oauth2"], Field(description="Always 'oauth2'.")] = "oauth2"
    config: OAuthSettings


class ApplicationFields(WireModel):
    """The application object svc_create_application takes (and svc_update_application, with id)."""

    name: Annotated[str, Field(description="Unique display name of the application.")]
    description: Annotated[str | None, Field(description="Free text.")] = None
    template: Annotated[TemplateName | None, Field(
        description="Template the application was made from: SPA, Mobile, Server, Device "
                    "or M2M.",
    )] = None
    theme_id: Annotated[str | None, Field(
        description="Id of the theme of the hosted sign-in page. SPA, Mobile and Server apps: "
                    "call svc_list_themes and use a real id (the templates' '<THEME_ID>' "
                    "placeholder is refused); left out, the 'default' theme is used. M2M apps "
                    "have no login page: leave it out.")] = None
    ou_id: Annotated[str | None, Field(
        description="Organization unit id or handle (svc_list_organization_units).")] = None
    auth_flow_id: Annotated[str | None, Field(
        description="AUTHENTICATION flow (id or handle) the hosted sign-in runs; left out, "
                    "the default passkey flow.")] = None
    registration_flow_id: Annotated[str | None, Field(
        description="REGISTRATION flow (id or handle) used for sign-up.")] = None
    is_registration_flow_enabled: Annotated[bool | None, Field(
        description="Whether users may sign up through this application.")] = None
    passkey_upgrade: Annotated[bool | None, Field(
        description="Whether its sign-in offers a passkey after a sign-in without one "
                    "(the automatic upgrade of the default flows); left out, true.")] = None
    allowed_user_types: Annotated[list[str] | None, Field(
        description="User type names allowed to sign in (svc_list_user_types); empty: any.")] = None
    passkeys_only: Annotated[bool | None, Field(
        description="Passkeys only: nobody signs in to it with a password (nor so with an "
                    "authenticator app's code); left out, passwords are allowed.")] = None
    inbound_auth_config: Annotated[list[InboundAuthConfig] | None, Field(
        description="OAuth 2.0 client settings: one entry of type oauth2.")] = None


class Application(ApplicationFields):
    id: Annotated[str, Field(description="Application id (UUID).")]
    template: str | None = None
    created_at: Annotated[float | None, Field(description="UNIX time.")] = None
    updated_at: Annotated[float | None, Field(description="UNIX time.")] = None


class CreatedApplication(Application):
    client_secret: Annotated[str | None, Field(
        description="Client secret of a confidential client. Shown only now (it is stored "
                    "hashed): hand it to the user to keep safe. None for public clients.")] = None


class ApplicationList(BaseModel):
    total_count: Annotated[int, Field(description="How many there are, on all pages.")]
    applications: list[Application]


class ApplicationTemplates(BaseModel):
    templates: Annotated[dict[str, dict[str, Any]], Field(
        description="Minimal application objects by type: SPA, Mobile, Server, Device, "
                    "M2M.")]
    rules: Annotated[list[str], Field(description="What to change before creating one.")]


# --- flows ----------------------------------------------------------------------------------


class FlowExecutor(WireModel):
    name: Annotated[ExecutorName, Field(description="Executor that runs this task.")]
    mode: Annotated[str | None, Field(
        description="PasskeyAuthExecutor only: challenge, verify, register_start or "
                    "register_finish.")] = None
    properties: Annotated[dict[str, Any] | None, Field(
        description="Executor settings; passkey challenge and register_start need "
                    "relyingPartyId.")] = None


class PromptInput(WireModel):
    ref: str | None = None
    identifier: Annotated[str, Field(description="Input name, e.g. username, password.")]
    type: InputType = "TEXT_INPUT"
    required: bool | None = None


class PromptAction(WireModel):
    ref: Annotated[str, Field(description="Action reference the client posts back.")]
    next_node: Annotated[str, Field(description="Node id this action leads to.")]


class Prompt(WireModel):
    inputs: list[PromptInput] | None = None
    action: PromptAction


class FlowNode(WireModel):
    id: Annotated[str, Field(description="Unique within the flow, e.g. start, prompt, end.")]
    type: NodeType
    on_success: Annotated[str | None, Field(
        description="Next node id (START and TASK_EXECUTION).")] = None
    on_incomplete: Annotated[str | None, Field(
        description="Node to return to when a task needs more input (e.g. the prompt).")] = None
    on_failure: Annotated[str | None, Field(
        description="Where a definite task failure goes; without it the execution ends.")] = None
    executor: Annotated[FlowExecutor | None, Field(description="TASK_EXECUTION only.")] = None
    prompts: Annotated[list[Prompt] | None, Field(
        description="PROMPT only: each entry is one way forward (inputs + action).")] = None
    meta: Annotated[dict[str, Any] | None, Field(
        description="PROMPT only: UI components the hosted page renders.")] = None


FlowName = Annotated[str, Field(min_length=1, description="Display name of the flow.")]
FlowNodes = Annotated[list[FlowNode], Field(
    description="The flow graph: exactly one START, at least one reachable END; every next-node "
                "id must exist; cycles must pass a PROMPT; passkey registration only after a "
                "step that creates or identifies the user.")]


class FlowDefinition(WireModel):
    """The flow object svc_create_flow takes."""

    handle: Annotated[str, Field(
        description="Stable key, unique per flow type: 1-64 of a-z 0-9 - _ "
                    "(e.g. my-passkey-flow).")]
    name: FlowName
    flow_type: Annotated[FlowType, Field(description="AUTHENTICATION (sign-in), "
                                                     "REGISTRATION (sign-up) or RECOVERY "
                                                     "(\"Lost your passkey?\").")]
    nodes: FlowNodes


class Flow(FlowDefinition):
    id: Annotated[str, Field(description="Flow id (UUID).")]
    created_at: float | None = None
    updated_at: float | None = None


class FlowSummary(WireModel):
    model_config = ConfigDict(extra="ignore")  # the list leaves the nodes out

    id: str
    handle: str
    name: str
    flow_type: FlowType
    created_at: float | None = None
    updated_at: float | None = None


class FlowList(BaseModel):
    total_count: Annotated[int, Field(description="Flows matching the filter, on all pages.")]
    flows: list[FlowSummary]


# --- themes, organization units, user types -------------------------------------------------


class ThemeSummary(WireModel):
    model_config = ConfigDict(extra="ignore")  # the list leaves the theme document out

    id: str
    handle: str
    display_name: str


class ThemeList(BaseModel):
    total_count: Annotated[int, Field(description="How many there are, on all pages.")]
    themes: list[ThemeSummary]


class ThemeDocument(WireModel):
    color_schemes: Annotated[dict[str, dict[str, Any]] | None, Field(
        description="Colors by scheme name (light, dark).")] = None
    typography: Annotated[dict[str, Any] | None, Field(
        description="Font family, sizes, weights, radius.")] = None


class Theme(ThemeSummary):
    description: str | None = None
    theme: ThemeDocument


class OrganizationUnit(WireModel):
    id: str
    handle: str
    name: str
    description: str | None = None
    parent: Annotated[str | None, Field(description="Parent organization unit id.")] = None


class OrganizationUnitList(BaseModel):
    total_count: Annotated[int, Field(description="How many there are, on all pages.")]
    organization_units: list[OrganizationUnit]


class UserType(WireModel):
    id: str
    name: str
    ou_id: Annotated[str, Field(description="Organization unit new users of this type join.")]
    allow_self_registration: Annotated[bool, Field(
        description="Whether people may sign up as this type themselves.")]
    attribute_schema: Annotated[dict[str, Any], Field(
        alias="schema", description="Attributes: {name: {type, required?, unique?}}.")]


class UserTypeList(BaseModel):
    total_count: Annotated[int, Field(description="How many there are, on all pages.")]
    user_types: list[UserType]


# --- React integration ----------------------------------------------------------------------


class Role(WireModel):
    id: str
    name: str
    description: str = ""
    scopes: Annotated[list[str], Field(
        description="Scopes (permissions) the role carries: only a person holding it can "
                    "grant them to a client.")]


class RoleList(BaseModel):
    total_count: Annotated[int, Field(description="How many there are, on all pages.")]
    roles: list[Role]


class UserRoles(BaseModel):
    user_id: str
    username: str
    roles: list[Role]
    email_verified: Annotated[bool, Field(
        description="Whether the user's e-mail address is verified: a recovery code can be "
                    "mailed there when the deployment sends mail.")]
    recovery_codes_left: Annotated[int, Field(
        description="Unused recovery codes: each lets the user back in once without an "
                    "administrator.")]


class GuideSection(BaseModel):
    title: str
    markdown: Annotated[str, Field(description="Explanation and code, ready to follow.")]


class ReactIntegrationGuide(BaseModel):
    service_url: str
    authority: Annotated[str, Field(
        description="OpenID Connect issuer: oidc-client-ts' 'authority'.")]
    packages: Annotated[list[str], Field(description="npm packages the snippets use.")]
    endpoints: dict[str, str]
    sections: list[GuideSection]
