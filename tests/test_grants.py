"""Grants: each authorization is remembered per (person, client) with its scopes, listed and
revoked from the CLI; revoking ends every token the client holds for the person at once."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.conftest import Service
from tests.support.oauth import OAuthDriver, assert_oauth_error, register_client


def test_a_revoked_grant_ends_the_clients_tokens_and_is_gone(service: Service,
                                                             cli: Callable[..., Any]) -> None:
    rp = OAuthDriver(service)
    client = register_client("Server", scopes=["openid", "profile"])
    tokens = rp.tokens(rp.authorization(client, scope="openid profile"))
    other = rp.tokens(rp.authorization(client, scope="openid"))  # another person
    subject = rp.verified(tokens["access_token"], audience=service.config.issuer)["sub"]

    listed = json.loads(cli("grant", "list", "--user", subject, "--json").output)
    assert [(g["clientId"], g["scopes"]) for g in listed] == [(client.client_id,
                                                              ["openid", "profile"])]
    revoked = cli("grant", "revoke", subject, client.client_id, "--yes", "--json")
    assert revoked.exit_code == 0, revoked.output
    assert json.loads(revoked.output)["tokenFamiliesEnded"] == 1

    assert rp.userinfo(tokens["access_token"]).status_code == 401
    assert_oauth_error(rp.refresh(client, tokens["refresh_token"]), 400, "invalid_grant")
    assert rp.userinfo(other["access_token"]).status_code == 200  # only that person's
    assert json.loads(cli("grant", "list", "--user", subject, "--json").output) == []
    again = cli("grant", "revoke", subject, client.client_id, "--yes", "--json")
    assert again.exit_code == 1
    assert json.loads(again.output)["error"]["code"] == "grant_not_found"
