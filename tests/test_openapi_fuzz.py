"""Schemathesis against the live server's /openapi.json: no 5xx, every error in the one shape.

Bounded so it stays in CI: a few valid (positive) and invalid (negative) examples per
operation, no Hypothesis database, no shrinking. The passkey registration endpoints get an
admin token so their bodies are reached; the others are called as an anonymous client.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable

from tests.conftest import Service
from tests.support.passkeys import PasskeyClient

EXAMPLES_PER_MODE = 10
#: The admin API answers an anonymous call at its token check, before it reads any input: a
#: couple of examples show that each route does so in the one error shape.
ADMIN_API, ADMIN_EXAMPLES_PER_MODE = "/admin/api/", 2
#: About how long the run may take, shared out between the operations.
BUDGET_SECONDS = 40
ERROR_FIELDS = {"code", "message", "description"}
#: Operations that show errors to a person as an HTML page instead of JSON (OAuth
#: authorize/logout before the redirect URI is trusted).
HTML_ERROR_TYPES = ("text/html",)


def _check(case: Any, response: schemathesis.Response, problems: list[str]) -> None:
    where = f"{case.method} {case.formatted_path}"
    body = response.text
    if response.status_code >= 500:
        problems.append(f"{where}: {response.status_code} {body[:300]}")
    if "Traceback" in body:
        problems.append(f"{where}: a traceback in the body")
    if response.status_code < 400:
        return
    # schemathesis' Response: header names in lower case, each with a list of values.
    media_type = (response.headers.get("content-type") or [""])[0].split(";")[0].strip()
    if media_type in HTML_ERROR_TYPES:
        return
    if media_type != "application/json":
        problems.append(f"{where}: {response.status_code} error as {media_type or 'nothing'}")
        return
    try:
        error = json.loads(body)
    except ValueError:
        problems.append(f"{where}: {response.status_code} body is not JSON: {body[:200]}")
        return
    if not isinstance(error, dict) or not set(error) >= ERROR_FIELDS or not all(
            isinstance(error[name], str) for name in ERROR_FIELDS) or not error["code"]:
        problems.append(f"{where}: {response.status_code} not the error shape: {body[:300]}")


def _fuzz(operation: Any, mode: schemathesis.GenerationMode,
          call: Callable[[Any], None]) -> None:
    """Run ``call`` on a bounded number of generated cases of ``operation``."""
    examples = ADMIN_EXAMPLES_PER_MODE if operation.path.startswith(ADMIN_API) \
        else EXAMPLES_PER_MODE

    @settings(max_examples=examples, deadline=None, database=None,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(generation_mode=mode))
    def exercise(case: Any) -> None:
        call(case)

    try:
        exercise()
    except Unsatisfiable:
        # Nothing in the operation can be made invalid (no parameters, no body).
        if mode is not schemathesis.GenerationMode.NEGATIVE:
            raise


def test_fuzzed_requests_never_fail_the_server_and_errors_keep_their_shape(
        service: Service) -> None:
    schema = schemathesis.openapi.from_url(service.url("/openapi.json"))
    admin = {"Authorization": f"Bearer {PasskeyClient(service).admin_token()}"}
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 5, [op.label for op in operations]
    # A bound on the run's length, shared out so that a slow machine sends fewer examples of
    # each operation rather than none of the last ones: the first of each is always sent.
    share = BUDGET_SECONDS / len(operations)
    problems: list[str] = []
    called: dict[str, int] = {}
    unsendable: list[str] = []
    http = requests.Session()

    def call(case: Any, headers: dict[str, str], label: str, until: float) -> None:
        if called.get(label) and time.monotonic() > until:
            return
        try:
            response = case.call(base_url=service.base_url, session=http, headers=headers,
                                 timeout=15, allow_redirects=False)
        except (requests.exceptions.InvalidHeader, requests.exceptions.InvalidURL,
                UnicodeError, ValueError) as refused:
            # The client library refuses to send it: not the server's problem.
            unsendable.append(f"{case.method} {case.formatted_path}: {refused!r}"[:200])
            return
        called[label] = called.get(label, 0) + 1
        _check(case, response, problems)

    for operation in operations:
        headers = admin if operation.path.startswith("/register/") else {}
        until = time.monotonic() + share
        for mode in schemathesis.GenerationMode:
            _fuzz(operation, mode, lambda case, headers=headers, label=operation.label,
                  until=until: call(case, headers, label, until))
    http.close()
    assert not problems, "\n".join(sorted(set(problems))[:30])
    missed = [op.label for op in operations if op.label not in called]
    assert not missed, (missed, unsendable)
