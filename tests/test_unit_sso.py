"""The rules of single sign-on, without HTTP or SQL: when a session stands for a sign-in
(oauth/sso.py), and where a flow says sessions count (flow/definition.py)."""

from __future__ import annotations

import pytest

from identityctl.errors import InvalidField
from identityctl.flow.definition import SessionCheck, session_check, validate_flow
from identityctl.oauth.claims import BACKCHANNEL_LOGOUT_EVENT, logout_token_claims
from identityctl.oauth.errors import InvalidRequest
from identityctl.oauth.sso import parse_max_age, session_answers

SIGNED_IN_AT = 1_000_000.0


@pytest.mark.parametrize(("seconds_later", "prompts", "max_age", "flow_max_age", "answers"), [
    (3600, (), None, None, True),
    (3600, ("consent",), None, None, True),
    (3600, ("none",), None, None, True),
    (0, ("login",), None, None, False),          # prompt=login: always a new sign-in
    (60, (), 60, None, True),
    (61, (), 60, None, False),                   # older than the request's max_age
    (1, (), 0, None, False),                     # max_age=0: sign in now
    (301, (), None, 300, False),                 # older than the flow's maxAge
    (299, (), 3600, 300, True),
])
def test_a_session_stands_for_a_sign_in_unless_asked_for_a_fresher_one(
        seconds_later: int, prompts: tuple[str, ...], max_age: int | None,
        flow_max_age: int | None, answers: bool) -> None:
    assert session_answers(auth_time=SIGNED_IN_AT, now=SIGNED_IN_AT + seconds_later,
                           prompts=prompts, max_age=max_age,
                           flow_max_age=flow_max_age) is answers


@pytest.mark.parametrize("value", ["-1", "1.5", "ten", "", "99999999999"])
def test_max_age_is_a_whole_number_of_seconds(value: str) -> None:
    with pytest.raises(InvalidRequest):
        parse_max_age(value)
    assert parse_max_age("0") == 0 and parse_max_age(None) is None


def _flow(*nodes: dict) -> dict:
    return {"handle": "f", "name": "F", "flowType": "AUTHENTICATION", "nodes": [
        {"id": "start", "type": "START", "onSuccess": nodes[0]["id"] if nodes else "end"},
        *nodes, {"id": "end", "type": "END"}]}


def test_a_flow_accepts_sessions_only_where_it_has_an_sso_check() -> None:
    check = {"id": "sso", "type": "TASK_EXECUTION", "onSuccess": "end",
             "executor": {"name": "SSOCheckExecutor", "properties": {"maxAge": 300}}}
    assert session_check(validate_flow(_flow(check))["nodes"]) == SessionCheck(max_age=300)
    assert session_check(validate_flow(_flow())["nodes"]) is None
    check["executor"]["properties"]["maxAge"] = "soon"
    with pytest.raises(InvalidField, match="maxAge"):
        validate_flow(_flow(check))


def test_a_logout_token_names_the_client_the_person_and_the_session_and_no_nonce() -> None:
    claims = logout_token_claims(client_id="app", subject="u1", session_id="s1", jti="j1")
    assert claims == {"aud": "app", "sub": "u1", "sid": "s1", "jti": "j1",
                      "events": {BACKCHANNEL_LOGOUT_EVENT: {}}}
