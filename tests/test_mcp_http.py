"""/mcp inside the waitress process: concurrent clients, and the SDK loaded only on first use."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from identityctl.services.catalog.applications import application_templates
from identityctl.store import catalog
from tests.conftest import Service, added_applications
from tests.support.mcp_clients import (
    ALL_TOOLS,
    admin_token,
    call,
    http_session,
    password_flow,
    run,
)

CLIENTS = 8
ROOT = Path(__file__).resolve().parent.parent


def test_concurrent_clients_on_a_multi_threaded_server(service: Service) -> None:
    """Eight SDK clients at once, each reading and writing, on the 8-thread test server."""
    url = service.url("/mcp")
    m2m = application_templates()["M2M"]

    async def client(index: int) -> dict[str, Any]:
        async with http_session(url, admin_token(service, sub=f"admin-{index}")) as session:
            tools = (await session.list_tools()).tools
            assert {tool.name for tool in tools} == ALL_TOOLS
            app = await call(session, "svc_create_application",
                             {**m2m, "name": f"worker {index}"})
            assert (await call(session, "svc_get_application_by_id", {"id": app["id"]}))[
                "name"] == f"worker {index}"
            flow = await call(session, "svc_create_flow", password_flow(f"concurrent-{index}"))
            assert (await call(session, "svc_get_flow_by_id", {"id": flow["id"]}))[
                "handle"] == f"concurrent-{index}"
            assert (await call(session, "svc_list_flows", {"limit": 100}))["total_count"] >= 1
            await call(session, "svc_list_themes")
            return app

    async def all_clients() -> list[dict[str, Any]]:
        return list(await asyncio.gather(*(client(i) for i in range(CLIENTS))))

    created = run(all_clients())
    assert sorted(app["name"] for app in created) == sorted(f"worker {i}" for i in range(CLIENTS))
    assert len({app["id"] for app in created}) == CLIENTS
    assert len(added_applications()) == CLIENTS
    handles = {flow["handle"] for flow in catalog.list_flows(limit=100)[1]}
    assert {f"concurrent-{i}" for i in range(CLIENTS)} <= handles


SDK_MODULES = ("mcp", "pydantic", "starlette", "a2wsgi", "anyio")

FIRST_USE = textwrap.dedent(f"""
    import json, logging, sys, tempfile
    from pathlib import Path

    import identityctl.cli.main  # the CLI (e.g. `identityctl user list`) must not load it
    from identityctl.security.tokens import ACCESS_TOKEN_TYP
    from identityctl.services.tokens import TokenService
    from tests.conftest import start_service

    def loaded():
        return sorted({{name.split(".")[0] for name in sys.modules}} & set({SDK_MODULES!r}))

    root_handlers = list(logging.getLogger().handlers)
    service, stop = start_service(Path(tempfile.mkdtemp()))
    assert loaded() == [], ("at start", loaded())
    assert service.get("/health").status_code == 200
    assert service.post("/mcp", {{}}).status_code == 401
    assert loaded() == [], ("after a refused request", loaded())

    token = TokenService(service.config.issuer).sign(
        {{"sub": "admin", "aud": service.config.mcp_audience, "scope": "system"}},
        typ=ACCESS_TOKEN_TYP, ttl=60)
    response = service.http.post(service.url("/mcp"), data=json.dumps({{
        "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {{
            "protocolVersion": "2025-06-18", "capabilities": {{}},
            "clientInfo": {{"name": "t", "version": "0"}}}}}}),
        headers={{"Authorization": "Bearer " + token, "Content-Type": "application/json",
                 "Accept": "application/json, text/event-stream"}}, timeout=60)
    assert response.status_code == 200, response.text
    assert "mcp" in loaded()
    # MCPServer() calls logging.basicConfig: the host's root logger must be as it was.
    assert logging.getLogger().handlers == root_handlers
    assert logging.getLogger("mcp").level == logging.WARNING
    stop()
    print("ok")
""")


def test_the_sdk_is_loaded_only_when_mcp_is_first_used() -> None:
    done = subprocess.run([sys.executable, "-c", FIRST_USE], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
