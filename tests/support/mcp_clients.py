"""MCP clients for tests: the official SDK's own stdio and Streamable HTTP clients.

`mcp_session(service, transport)` opens an initialized `ClientSession` on a running
deployment: over HTTP to {base_url}/mcp with an admin token, or over stdio by spawning
`identityctl --config <its config> mcp`, as an MCP client in production would.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import Any, Literal, TypeVar

import httpx2
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent

from identityctl.security.tokens import ACCESS_TOKEN_TYP
from identityctl.services.tokens import TokenService
from tests.conftest import Service

T = TypeVar("T")
Transport = Literal["http", "stdio"]
ADMIN_SUBJECT = "mcp-test-admin"
#: The interface's 16 tools (spec §4.4), and ours beyond them.
SPEC_TOOLS = frozenset({
    "svc_list_applications", "svc_get_application_by_id", "svc_get_application_by_client_id",
    "svc_create_application", "svc_update_application", "svc_get_application_templates",
    "svc_list_flows", "svc_get_flow_by_handle", "svc_get_flow_by_id", "svc_create_flow",
    "svc_update_flow", "svc_list_themes", "svc_get_theme_by_id", "svc_list_organization_units",
    "svc_list_user_types", "svc_integrate_react_sdk"})
ROLE_TOOLS = frozenset({"list_roles", "create_role", "grant_role", "revoke_role"})
IDP_TOOLS = frozenset({"list_identity_providers", "add_identity_provider",
                       "remove_identity_provider"})
WEBHOOK_TOOLS = frozenset({"list_webhooks", "add_webhook", "remove_webhook"})
ALL_TOOLS = SPEC_TOOLS | ROLE_TOOLS | IDP_TOOLS | WEBHOOK_TOOLS | {"end_user_sessions"}


def run(coro: Awaitable[T], timeout: float = 120) -> T:
    """Run one async test scenario to the end (bounded, so a hang fails instead of sticking)."""

    async def bounded() -> T:
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


def first_text(result: CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


def admin_token(service: Service, *, ttl: int = 300, **claims: Any) -> str:
    """An access token as `identityctl token --scope system` mints it; ``claims`` override."""
    config = service.config
    return TokenService(config.issuer).sign(
        {"sub": ADMIN_SUBJECT, "aud": config.mcp_audience, "scope": "system",
         "client_id": "identityctl-cli", **claims}, typ=ACCESS_TOKEN_TYP, ttl=ttl)


@asynccontextmanager
async def http_session(url: str, token: str | None = None) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    timeout = httpx2.Timeout(30, read=60)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout, trust_env=False) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def identityctl_command(*args: str) -> list[str]:
    """`identityctl ARGS` run with this interpreter."""
    return [sys.executable, "-m", "identityctl", *args]


@asynccontextmanager
async def stdio_session(service: Service) -> AsyncIterator[ClientSession]:
    command, *args = identityctl_command("--config", str(service.config_path), "mcp")
    params = StdioServerParameters(command=command, args=args)
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def mcp_session(service: Service, transport: Transport) -> Any:
    """An initialized session on ``service`` over ``transport`` (async context manager)."""
    if transport == "stdio":
        return stdio_session(service)
    return http_session(service.url("/mcp"), admin_token(service))


async def call(session: ClientSession, name: str, arguments: dict[str, Any] | None = None
               ) -> dict[str, Any]:
    """Call a tool that must succeed; its structured result (also sent as JSON text)."""
    result = await session.call_tool(name, arguments or {})
    assert result.is_error is False, first_text(result)
    assert result.structured_content is not None
    assert json.loads(first_text(result)) == result.structured_content
    return result.structured_content


async def call_failing(session: ClientSession, name: str, arguments: dict[str, Any]) -> str:
    """Call a tool that must fail as a tool error (not a protocol error); its message."""
    result: CallToolResult = await session.call_tool(name, arguments)
    assert result.is_error is True
    assert result.structured_content is None
    return first_text(result)


# --- sample records ----------------------------------------------------------------------


def password_flow(handle: str, name: str = "Password sign-in") -> dict[str, Any]:
    """A valid AUTHENTICATION flow in the reference format."""
    return {"handle": handle, "name": name, "flowType": "AUTHENTICATION", "nodes": [
        {"id": "start", "type": "START", "onSuccess": "prompt"},
        {"id": "prompt", "type": "PROMPT", "prompts": [{
            "inputs": [
                {"ref": "u", "identifier": "username", "type": "TEXT_INPUT", "required": True},
                {"ref": "p", "identifier": "password", "type": "PASSWORD_INPUT",
                 "required": True}],
            "action": {"ref": "submit", "nextNode": "check"}}]},
        {"id": "check", "type": "TASK_EXECUTION", "executor": {"name": "BasicAuthExecutor"},
         "onSuccess": "assert", "onIncomplete": "prompt"},
        {"id": "assert", "type": "TASK_EXECUTION", "executor": {"name": "AuthAssertExecutor"},
         "onSuccess": "end"},
        {"id": "end", "type": "END"},
    ]}


def signup_flow(handle: str) -> dict[str, Any]:
    """A valid REGISTRATION flow: collect a username, provision the user."""
    return {"handle": handle, "name": "Sign-up", "flowType": "REGISTRATION", "nodes": [
        {"id": "start", "type": "START", "onSuccess": "collect"},
        {"id": "collect", "type": "PROMPT", "prompts": [{
            "inputs": [{"ref": "u", "identifier": "username", "type": "TEXT_INPUT"}],
            "action": {"ref": "next", "nextNode": "provision"}}]},
        {"id": "provision", "type": "TASK_EXECUTION",
         "executor": {"name": "ProvisioningExecutor"}, "onSuccess": "end"},
        {"id": "end", "type": "END"},
    ]}
