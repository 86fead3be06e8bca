"""McpWsgiBridge: the SDK's Streamable HTTP app served by waitress, and the stdio transport.

Everything goes through the official mcp SDK 2.x client (`ClientSession` over
`streamable_http_client` / `stdio_client`), as an MCP client in production would.
"""

from __future__ import annotations

import asyncio
import http.client
import io
import json
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import pytest
import waitress
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel

from identityctl.mcp.bridge import ACCESS_TOKEN_ENVIRON_KEY, McpWsgiBridge
from tests.support.mcp_clients import first_text, http_session, run
from tests.support.threads import served_in_thread

PUBLIC_HOST = "id.example.test"
GOOD_TOKEN = "good-token"


class Greeting(BaseModel):
    text: str
    times: int


def build_server() -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer("bridge-test", instructions="Tools for the bridge test.")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def greet(name: str, times: int = 1, style: Literal["plain", "loud"] | None = None) -> Greeting:
        """Greet someone."""
        text = f"hello {name}"
        return Greeting(text=text.upper() if style == "loud" else text, times=times)

    @server.tool()
    def fail(reason: str) -> str:
        """Always fails, as an expected (anticipated) error."""
        raise ToolError(reason)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def whoami() -> dict[str, Any]:
        """The caller identity the WSGI auth layer handed to the bridge."""
        token = get_access_token()
        if token is None:
            return {"client_id": None, "subject": None, "scopes": []}
        return {"client_id": token.client_id, "subject": token.subject, "scopes": token.scopes}

    return server


def make_wsgi_app(bridge: McpWsgiBridge) -> Callable[..., Iterable[bytes]]:
    """A plain WSGI app: a stand-in bearer check in front of the bridge, 404 elsewhere."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO", "").rstrip("/") != bridge.path:
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not found"]
        authorization = environ.get("HTTP_AUTHORIZATION")
        if authorization is not None:
            if authorization != f"Bearer {GOOD_TOKEN}":
                start_response("401 Unauthorized", [("WWW-Authenticate", "Bearer")])
                return [b""]
            environ[ACCESS_TOKEN_ENVIRON_KEY] = AccessToken(
                token=GOOD_TOKEN, client_id="test-client", scopes=["mcp"], subject="user-1"
            )
        return bridge(environ, start_response)

    return app


@contextmanager
def serve(bridge: McpWsgiBridge) -> Iterator[str]:
    """Run waitress (4 threads, ephemeral port) on the test WSGI app; yield the /mcp URL."""
    server = waitress.create_server(make_wsgi_app(bridge), host="127.0.0.1", port=0, threads=4)
    server.close_app = bridge.close  # what stop_server releases, as make_server sets it
    with served_in_thread(server):
        yield f"http://127.0.0.1:{server.effective_port}/mcp"


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serve(McpWsgiBridge(build_server, allowed_hosts=[PUBLIC_HOST])) as mcp_url:
        yield mcp_url


def test_initialize_list_and_call_over_http(url: str) -> None:
    async def scenario() -> None:
        async with http_session(url) as session:
            init = await session.initialize()  # cached: initialize() is idempotent
            assert init.server_info.name == "bridge-test"
            assert init.instructions == "Tools for the bridge test."

            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            assert set(tools) == {"greet", "fail", "whoami"}
            greet = tools["greet"]
            assert greet.annotations is not None and greet.annotations.read_only_hint is True
            assert greet.input_schema["required"] == ["name"]
            props = greet.input_schema["properties"]
            assert props["times"] == {"default": 1, "title": "Times", "type": "integer"}
            assert props["style"]["anyOf"][0] == {"enum": ["plain", "loud"], "type": "string"}
            assert greet.output_schema is not None
            assert greet.output_schema["required"] == ["text", "times"]

            result = await session.call_tool("greet", {"name": "ada", "style": "loud"})
            assert result.is_error is False
            assert result.structured_content == {"text": "HELLO ADA", "times": 1}
            assert json.loads(first_text(result)) == result.structured_content

            invalid = await session.call_tool("greet", {"name": "ada", "style": "shout"})
            assert invalid.is_error is True

    run(scenario())


def test_expected_tool_error_reaches_client(url: str) -> None:
    async def scenario() -> None:
        async with http_session(url) as session:
            result = await session.call_tool("fail", {"reason": "user not found: bob"})
            assert result.is_error is True
            assert result.structured_content is None
            assert first_text(result) == ("Error executing tool fail: user not found: bob")

    run(scenario())


def test_concurrent_clients_on_a_cold_bridge() -> None:
    """6 clients at once; the first requests race into the lazy, locked start-up."""
    bridge = McpWsgiBridge(build_server)
    assert not bridge.started

    async def one(url: str, index: int) -> int:
        async with http_session(url) as session:
            for _ in range(3):
                result = await session.call_tool("greet", {"name": f"c{index}", "times": index})
                assert result.structured_content == {"text": f"hello c{index}", "times": index}
            return index

    async def scenario(url: str) -> list[int]:
        return list(await asyncio.gather(*(one(url, i) for i in range(6))))

    with serve(bridge) as url:
        assert run(scenario(url)) == list(range(6))
        assert bridge.started


def test_high_level_client_modern_protocol(url: str) -> None:
    """`mcp.Client(url)` probes `server/discover` (protocol 2026-07-28): another SDK path."""

    async def scenario() -> None:
        async with Client(url) as client:
            result = await client.call_tool("greet", {"name": "eve"})
            assert result.structured_content == {"text": "hello eve", "times": 1}
            failed = await client.call_tool("fail", {"reason": "nope"})
            assert failed.is_error is True

    run(scenario())


def test_bridge_import_does_not_import_the_sdk() -> None:
    code = (
        "import sys, identityctl.mcp, identityctl.mcp.bridge as b\n"
        "b.McpWsgiBridge(lambda: None, allowed_hosts=['x'])\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in ('mcp', 'starlette', 'pydantic')]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_access_token_from_wsgi_layer_reaches_tools(url: str) -> None:
    async def whoami(token: str | None) -> Any:
        async with http_session(url, token) as session:
            return (await session.call_tool("whoami", {})).structured_content

    assert run(whoami(GOOD_TOKEN)) == {
        "client_id": "test-client",
        "subject": "user-1",
        "scopes": ["mcp"],
    }
    assert run(whoami(None)) == {"client_id": None, "subject": None, "scopes": []}


def raw_request(
    url: str, method: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    address = url.split("//", 1)[1].split("/", 1)[0]
    host, port = address.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        connection.request(method, "/mcp", body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


INITIALIZE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }
).encode()
POST_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_get_and_delete_answer_405(url: str, method: str) -> None:
    status, headers, body = raw_request(url, method, headers={"Accept": "text/event-stream"})
    assert status == 405
    assert headers["Allow"] == "POST"
    assert headers["Content-Type"] == "application/json"
    assert json.loads(body)["error"]["message"].startswith("Method Not Allowed")


def test_host_check_uses_public_host_names(url: str) -> None:
    status, headers, body = raw_request(
        url, "POST", INITIALIZE, {**POST_HEADERS, "Host": f"{PUBLIC_HOST}:443"}
    )
    assert status == 200, body
    assert headers["Content-Type"].startswith("application/json")
    assert json.loads(body)["result"]["serverInfo"]["name"] == "bridge-test"

    status, _, body = raw_request(url, "POST", INITIALIZE, {**POST_HEADERS, "Host": "evil.test"})
    assert status == 421, body
    status, _, body = raw_request(
        url, "POST", INITIALIZE, {**POST_HEADERS, "Origin": "https://evil.test"}
    )
    assert status == 403, body
    status, _, body = raw_request(
        url, "POST", INITIALIZE, {**POST_HEADERS, "Origin": f"https://{PUBLIC_HOST}"}
    )
    assert status == 200, body


def test_hop_by_hop_headers_dropped_and_lifespan_driven() -> None:
    events: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    events.append("startup")
                    await send({"type": "lifespan.startup.complete"})
                else:
                    events.append("shutdown")
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/plain"),
                    (b"connection", b"keep-alive, x-private"),
                    (b"keep-alive", b"timeout=5"),
                    (b"x-private", b"1"),
                    (b"transfer-encoding", b"chunked"),
                    (b"x-kept", b"yes"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": b"ok"})

    bridge = McpWsgiBridge.from_asgi_app(app, path="/mcp")
    assert not bridge.started
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/mcp",
        "SERVER_NAME": "localhost",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.input": io.BytesIO(b"{}"),
        "CONTENT_LENGTH": "2",
    }
    seen: list[tuple[str, list[tuple[str, str]]]] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        seen.append((status, headers))

    body = b"".join(bridge(environ, start_response))
    assert body == b"ok"
    assert seen == [("200 OK", [("content-type", "text/plain"), ("x-kept", "yes")])]
    assert bridge.started and events == ["startup"]
    bridge.close()
    assert events == ["startup", "shutdown"]
    assert json.loads(b"".join(bridge(environ, start_response)))["error"]["code"] == -32000
    assert seen[-1][0] == "503 Service Unavailable"


STDIO_SERVER = textwrap.dedent(
    '''
    import os

    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    server = MCPServer("stdio-test", instructions="stdio tools")


    @server.tool()
    def add(a: int, b: int = 2) -> int:
        """Add two numbers."""
        return a + b


    @server.tool()
    def env(name: str) -> str | None:
        """Read an environment variable of the server process."""
        return os.environ.get(name)


    @server.tool()
    def fail() -> str:
        raise ToolError("nope")


    if __name__ == "__main__":
        server.run("stdio")
    '''
)


def test_stdio_transport(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "server.py"
    script.write_text(STDIO_SERVER)
    monkeypatch.setenv("IDENTITYCTL_TEST_NOT_INHERITED", "1")
    params = StdioServerParameters(
        command=sys.executable, args=[str(script)], env={"IDENTITYCTL_CONFIG": "/x/config.toml"}
    )

    async def scenario() -> None:
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write) as session,
        ):
            init = await session.initialize()
            assert init.server_info.name == "stdio-test"
            tools = {tool.name for tool in (await session.list_tools()).tools}
            assert tools == {"add", "env", "fail"}

            added = await session.call_tool("add", {"a": 40})
            assert (added.is_error, added.structured_content) == (False, {"result": 42})
            assert first_text(added) == "42"

            passed = await session.call_tool("env", {"name": "IDENTITYCTL_CONFIG"})
            assert passed.structured_content == {"result": "/x/config.toml"}
            filtered = await session.call_tool("env", {"name": "IDENTITYCTL_TEST_NOT_INHERITED"})
            assert filtered.structured_content == {"result": None}

            failed = await session.call_tool("fail", {})
            assert failed.is_error is True
            assert first_text(failed) == "Error executing tool fail: nope"

    run(scenario())
