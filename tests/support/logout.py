"""Signing a browser out as a person does: RP-initiated logout without an ID token asks
"Sign out of …?" first, and the page's button posts the answer back."""

from __future__ import annotations

import re
from typing import Any

import requests

from tests.conftest import Service

LOGOUT = "/oauth2/logout"
_CONFIRMATION = re.compile(r'name="confirmation" value="([^"]*)"')
SESSION_COOKIE = "__Host-identityctl-session"


def logout_question(service: Service, session: str, **params: str) -> requests.Response:
    """GET /oauth2/logout in the browser holding ``session`` (no ID token)."""
    return service.http.get(service.url(LOGOUT), params=params, timeout=30,
                            allow_redirects=False,
                            headers={"Cookie": f"{SESSION_COOKIE}={session}"})


def confirmation_in(page: requests.Response) -> str:
    found = _CONFIRMATION.search(page.text)
    assert found, page.text
    return found.group(1)


def press_sign_out(service: Service, session: str, confirmation: str,
                   **params: str) -> requests.Response:
    """The question page's "Sign out" button: its form, posted back."""
    return service.http.post(service.url(LOGOUT), timeout=30, allow_redirects=False,
                             data={"confirmation": confirmation, **params},
                             headers={"Cookie": f"{SESSION_COOKIE}={session}"})


def confirmed_logout(service: Service, session: str, **params: str) -> requests.Response:
    """Open the logout address and press "Sign out"."""
    return press_sign_out(service, session,
                          confirmation_in(logout_question(service, session, **params)), **params)


def sign_out_in_the_browser(page: Any, service: Service) -> None:
    """A Playwright page opens the logout address and presses "Sign out"."""
    page.goto(service.url(LOGOUT))
    page.get_by_role("button", name="Sign out", exact=True).click()
    page.get_by_role("heading", name="You are signed out").wait_for()
