"""Declared waits: a dispatcher's thread tells it once per outermost wait, other threads
tell nobody, and the MCP bridge declares the time its app runs, which is while its body is
drawn."""

from __future__ import annotations

import asyncio
import io
import threading
from typing import Any

from identityctl import waits
from identityctl.mcp.bridge import McpWsgiBridge


class Recorder:
    """A dispatcher that notes what it is told."""

    def __init__(self) -> None:
        self.told: list[tuple[int, bool]] = []

    def waiting(self, thread: int, waits: bool) -> None:
        self.told.append((thread, waits))

    @property
    def declared(self) -> bool:
        return bool(self.told) and self.told[-1][1]


def on_a_dispatcher_thread(work: Any) -> Recorder:
    recorder = Recorder()

    def run() -> None:
        waits.serve_for(recorder)
        work(recorder)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(10)
    return recorder


def test_nested_waits_are_told_once_with_the_waiting_threads_id() -> None:
    seen: list[int] = []

    def work(recorder: Recorder) -> None:
        seen.append(threading.get_ident())
        with waits.waiting(), waits.waiting():
            assert recorder.declared
        assert not recorder.declared

    recorder = on_a_dispatcher_thread(work)
    assert recorder.told == [(seen[0], True), (seen[0], False)]


def test_a_wait_that_fails_is_still_told_when_it_ends() -> None:
    def work(recorder: Recorder) -> None:
        try:
            with waits.waiting():
                raise TimeoutError
        except TimeoutError:
            pass

    assert [told for _, told in on_a_dispatcher_thread(work).told] == [True, False]


def test_outside_a_dispatchers_threads_a_wait_tells_nobody() -> None:
    done = []

    def elsewhere() -> None:
        with waits.waiting():
            done.append(True)

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join(10)
    assert done == [True]


def slow_tool(declared_while_running: list[bool], recorders: list[Recorder]) -> Any:
    """An ASGI app whose answer takes a while on its own loop, as an MCP tool does; it notes
    whether the request's thread had declared a wait while it ran."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        await receive()
        await asyncio.sleep(0.05)
        declared_while_running.append(recorders[0].declared)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b"{}"})

    return app


def test_the_mcp_bridge_declares_its_app_running_while_the_server_draws_the_body() -> None:
    declared_while_running: list[bool] = []
    recorders: list[Recorder] = []
    bridge = McpWsgiBridge.from_asgi_app(slow_tool(declared_while_running, recorders))
    bridge.start()
    environ = {"REQUEST_METHOD": "POST", "PATH_INFO": "/mcp", "SERVER_NAME": "localhost",
               "SERVER_PORT": "80", "wsgi.input": io.BytesIO(b"{}"), "CONTENT_LENGTH": "2",
               "wsgi.url_scheme": "http", "SERVER_PROTOCOL": "HTTP/1.1", "QUERY_STRING": "",
               "HTTP_HOST": "localhost"}
    bodies: list[bytes] = []
    try:
        def work(recorder: Recorder) -> None:
            recorders.append(recorder)
            answer = bridge(environ, lambda status, headers, exc_info=None: None)
            bodies.append(b"".join(answer))
            getattr(answer, "close", lambda: None)()

        recorder = on_a_dispatcher_thread(work)
    finally:
        bridge.close()
    assert bodies == [b"{}"]
    assert declared_while_running == [True]
    assert recorder.told and not recorder.declared
