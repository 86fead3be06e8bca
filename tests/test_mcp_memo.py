"""Replayed `tools/list` answers (identityctl/mcp/memo.py): same answer as the SDK's, own id,
and no check skipped — the token, the Host/Origin check and anything else still decide."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
import requests

from identityctl.mcp.memo import AnswerMemo
from tests.conftest import Service
from tests.support.mcp_clients import ALL_TOOLS, admin_token, http_session, run

MCP_ACCEPT = "application/json, text/event-stream"
MODERN = "2026-07-28"


def tools_list(service: Service, request_id: Any, *, token: str | None = None,
               modern: bool = False, **headers: str) -> requests.Response:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": "tools/list"}
    sent = {"Content-Type": "application/json", "Accept": MCP_ACCEPT, **headers}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    if modern:  # what the SDK's own client sends on a 2026-07-28 connection
        message["params"] = {"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                                       "io.modelcontextprotocol/clientCapabilities": {}}}
        sent |= {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"}
    return service.http.post(service.url("/mcp"), data=json.dumps(message), headers=sent,
                             timeout=60)


@pytest.mark.parametrize("modern", [False, True], ids=["2025 stateless", MODERN])
def test_repeated_tools_lists_get_the_same_tools_under_their_own_ids(service: Service,
                                                                     modern: bool) -> None:
    token = admin_token(service)
    answers = [tools_list(service, request_id, token=token, modern=modern)
               for request_id in (1, "second", 3, 3)]
    assert [answer.status_code for answer in answers] == [200] * 4
    bodies = [answer.json() for answer in answers]
    assert [body["id"] for body in bodies] == [1, "second", 3, 3]
    assert all(body["result"] == bodies[0]["result"] for body in bodies)
    assert {tool["name"] for tool in bodies[0]["result"]["tools"]} == ALL_TOOLS
    assert answers[-1].headers["Content-Type"].startswith("application/json")


def test_the_sdk_client_lists_the_same_tools_every_time(service: Service) -> None:
    async def list_twice() -> tuple[list[str], list[str]]:
        async with http_session(service.url("/mcp"), admin_token(service)) as session:
            first = [tool.name for tool in (await session.list_tools()).tools]
            second = [tool.name for tool in (await session.list_tools()).tools]
            return first, second

    first, second = run(list_twice())
    assert first == second and set(first) == ALL_TOOLS


def test_a_replayed_answer_still_needs_a_valid_token(service: Service) -> None:
    assert tools_list(service, 1, token=admin_token(service)).status_code == 200
    assert tools_list(service, 2).status_code == 401
    assert tools_list(service, 3, token=admin_token(service, scope="openid")).status_code == 403
    assert tools_list(service, 4, token=admin_token(service, aud="https://other.example")
                      ).status_code == 401


def test_a_replayed_answer_does_not_skip_the_host_and_origin_checks(service: Service) -> None:
    token = admin_token(service)
    assert tools_list(service, 1, token=token).status_code == 200
    foreign_host = tools_list(service, 2, token=token, Host="evil.example")
    foreign_origin = tools_list(service, 3, token=token, Origin="https://evil.example")
    assert foreign_host.status_code == 421, foreign_host.text
    assert foreign_origin.status_code == 403, foreign_origin.text


# --- the memo on its own, in front of a counting stand-in for the SDK -------------------------

class CountingSdk:
    """Answers like the SDK: tools/list -> the tools, anything else -> a JSON-RPC error."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        self.calls += 1
        message = json.loads(environ["wsgi.input"].read(int(environ["CONTENT_LENGTH"])))
        if message.get("method") == "tools/list" and "cursor" not in message.get("params", {}):
            body = {"jsonrpc": "2.0", "id": message["id"], "result": {"tools": [{"name": "t"}]}}
            status = "200 OK"
        else:
            body = {"jsonrpc": "2.0", "id": message.get("id"),
                    "error": {"code": -32602, "message": "no"}}
            status = "400 Bad Request"
        payload = json.dumps(body, separators=(",", ":")).encode()
        start_response(status, [("Content-Type", "application/json"),
                                ("Content-Length", str(len(payload)))])
        return [payload]


def call(app: AnswerMemo, message: dict[str, Any], **headers: str) -> tuple[str, Any]:
    payload = json.dumps(message).encode()
    environ = {"REQUEST_METHOD": "POST", "CONTENT_LENGTH": str(len(payload)),
               "CONTENT_TYPE": "application/json", "wsgi.input": io.BytesIO(payload),
               "wsgi.url_scheme": "http", "HTTP_HOST": "localhost:8090",
               **{f"HTTP_{name.upper()}": value for name, value in headers.items()}}
    statuses: list[str] = []
    body = b"".join(app(environ, lambda status, headers, exc=None: statuses.append(status)))
    return statuses[0], json.loads(body)


def listing(request_id: Any, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/list",
            **({"params": params} if params else {})}


def test_only_the_first_request_of_a_shape_reaches_the_sdk() -> None:
    sdk = CountingSdk()
    memo = AnswerMemo(sdk)
    answers = [call(memo, listing(n)) for n in range(5)]
    assert sdk.calls == 1
    assert [body["id"] for _, body in answers] == list(range(5))
    assert all(body["result"] == {"tools": [{"name": "t"}]} for _, body in answers)


def test_other_headers_params_methods_and_errors_go_to_the_sdk() -> None:
    sdk = CountingSdk()
    memo = AnswerMemo(sdk)
    call(memo, listing(1))
    call(memo, listing(2), Origin="https://other.example")  # another shape
    call(memo, listing(3, cursor="abc"))  # an error answer: never remembered
    call(memo, listing(4, cursor="abc"))
    call(memo, {"jsonrpc": "2.0", "id": 5, "method": "tools/call"})
    call(memo, listing(6.5))  # ids other than int and str: not replayed
    call(memo, listing(True))
    assert sdk.calls == 7
    assert call(memo, listing(8), Authorization="Bearer another")[1]["id"] == 8
    assert sdk.calls == 7  # credentials are checked before the memo, per request


def test_the_memo_keeps_at_most_its_capacity() -> None:
    sdk = CountingSdk()
    memo = AnswerMemo(sdk, capacity=2)
    for origin in ("a", "b", "c", "a"):
        call(memo, listing(1), Origin=f"https://{origin}.example")
    assert sdk.calls == 4  # "a" was dropped when "c" came
