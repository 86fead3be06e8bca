"""Passkeys are listed with their authenticator's name and icon (account API, admin
console API), and the icons are served as images that run nothing."""

from __future__ import annotations

from identityctl.server.resources.passkey import ICON_CSP
from tests.conftest import Service
from tests.support.authenticator import SoftAuthenticator
from tests.test_account import Account

UNIQKEY = "45e3057e-b2f9-48ed-912f-9b901e153b16"


def test_the_account_lists_each_passkey_with_its_authenticators_name_and_icons(
        service: Service) -> None:
    me = Account(service)  # its first passkey's authenticator tells nothing (zeros)
    started = me.ok("POST", "/passkeys/start", {})
    made = SoftAuthenticator(aaguid=bytes.fromhex(UNIQKEY.replace("-", ""))).create(
        started["publicKeyCredentialCreationOptions"], origin=me.passkeys.origin)
    me.ok("POST", "/passkeys/finish", {"sessionToken": started["sessionToken"],
                                      "publicKeyCredential": made})

    unknown, uniqkey = me.ok("GET", "/passkeys")["passkeys"]
    assert (unknown["authenticator"], unknown["icon"], unknown["iconDark"]) == (None,) * 3
    assert uniqkey["authenticator"] == "Uniqkey" and uniqkey["name"] == "Passkey in Uniqkey"
    assert uniqkey["icon"] == service.url(f"/authenticators/{UNIQKEY}/icon")
    assert uniqkey["iconDark"] == uniqkey["icon"] + "?scheme=dark"

    light, dark = (service.http.get(uniqkey[icon], timeout=30)
                   for icon in ("icon", "iconDark"))
    for answer in (light, dark):
        assert answer.status_code == 200 and answer.headers["Content-Type"] == "image/svg+xml"
        assert answer.headers["Content-Security-Policy"] == ICON_CSP  # sandbox: no script
        assert answer.headers["X-Content-Type-Options"] == "nosniff"
        assert answer.content.lstrip().startswith((b"<svg", b"<?xml"))
    assert light.content != dark.content
    assert service.http.get(service.url(
        "/authenticators/00000000-0000-0000-0000-000000000000/icon"), timeout=30
                            ).status_code == 404
