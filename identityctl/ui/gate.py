"""The hosted UI ("gate"): sign-in and sign-up pages, theme stylesheets, message pages.

The pages are shells: ``gate.js`` drives the application's flow through ``/flow/execute``
and hands the resulting assertion to ``/oauth2/auth/callback``. What the page needs (the
application, the authorization request, the endpoints) travels in ``data-*`` attributes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

from identityctl import i18n
from identityctl.config import Config
from identityctl.errors import NotFound
from identityctl.oauth.discovery import CALLBACK_PATH, CONSENT_PATH
from identityctl.oauth.errors import UntrustedRedirect
from identityctl.services import catalog
from identityctl.services.accounts import federation, recovery
from identityctl.services.oauth import authorization
from identityctl.theme import stylesheet as theme
from identityctl.theme.branding import page_branding
from identityctl.ui import pages

GATE_PATH = "/gate"
STATIC_PATH = GATE_PATH + "/static"
THEME_PATH = GATE_PATH + "/theme.css"
FLOW_PATH = "/flow/execute"
#: Where the language switcher of every page posts (server/resources/gate.py).
LANGUAGE_PATH = GATE_PATH + "/language"
SIGN_IN, SIGN_UP, RECOVER = "signin", "signup", "recover"
#: Where identity providers send the browser back.
PROVIDER_RETURN_PATH = federation.CALLBACK_PATH
#: The heading of each page.
TITLES = {SIGN_IN: "Sign in", SIGN_UP: "Create your account",
          RECOVER: "Get back into your account"}
#: What the sign-in pages say where no script runs (their ``<noscript>``).
NEEDS_SCRIPT = "This sign-in page needs JavaScript."
DEFAULT_THEME = "default"


@dataclass(frozen=True, slots=True)
class GateApplication:
    """What the hosted UI shows of an application."""

    id: str
    name: str
    registration_enabled: bool
    recovery_offered: bool
    theme: dict[str, Any]


def gate_application(application_id: str) -> GateApplication:
    try:
        application = catalog.applications.get_application(application_id)
    except NotFound as missing:
        raise UntrustedRedirect("This sign-in link names no application.",
                                code="application_not_found") from missing
    return GateApplication(
        id=application["id"], name=application["name"],
        registration_enabled=bool(application["isRegistrationFlowEnabled"]
                                  and application["registrationFlowId"]),
        recovery_offered=recovery.offers_recovery(application),
        theme=_theme(application["themeId"]))


def _theme(theme_id: str | None) -> dict[str, Any]:
    try:
        return catalog.themes.require_theme(theme_id or DEFAULT_THEME)["theme"]
    except NotFound:
        return {}


def theme_stylesheet(application_id: str | None) -> str:
    """The application's theme (the default theme without an application) as CSS."""
    chosen = gate_application(application_id).theme if application_id else _theme(None)
    return theme.stylesheet(chosen)


def assets(config: Config, application_id: str | None) -> pages.Assets:
    query = f"?{urlencode({'applicationId': application_id})}" if application_id else ""
    return pages.Assets(theme_stylesheet=f"{config.base_url}{THEME_PATH}{query}",
                        static=config.base_url + STATIC_PATH,
                        language_switch=config.base_url + LANGUAGE_PATH)


def flow_page(config: Config, *, mode: str, application_id: str, auth_id: str,
              execution_id: str = "", resume: bool = False,
              language: str = i18n.DEFAULT, browser: str = "", here: str = "/") -> str:
    """The sign-in (or sign-up) page of an authorization request; with ``resume``, the
    consent of a person the browser's session signed in. The execution the link names goes
    on only in the browser it belongs to (``browser``: its secret); elsewhere the page starts
    a fresh sign-in."""
    application = gate_application(application_id)
    try:
        first_step = authorization.pending_first_step(
            auth_id=auth_id, application_id=application.id, execution_id=execution_id,
            browser=browser)
    except UntrustedRedirect as spent:
        spent.back_to = _application_home(application.id)
        raise
    if first_step is None:
        execution_id = ""
    request = {"authId": auth_id, "applicationId": application.id,
               **({"ui_locales": language} if language != i18n.DEFAULT else {})}
    signing_up, signing_in = mode == SIGN_UP, mode == SIGN_IN
    if signing_up and not application.registration_enabled:
        raise UntrustedRedirect(f"{application.name} does not offer sign-up here.",
                                code="registration_disabled")
    title = i18n.translate(language, TITLES[mode])
    brand = page_branding(application.theme)
    main = pages.render(
        "gate.html", logo=brand.get("logo", ""), logo_hidden="" if "logo" in brand else "hidden",
        product_name=brand.get("productName", ""),
        terms_url=brand.get("termsUrl", ""), terms_hidden="" if "termsUrl" in brand else "hidden",
        terms_text=i18n.translate(language, "Terms"),
        privacy_url=brand.get("privacyUrl", ""),
        privacy_hidden="" if "privacyUrl" in brand else "hidden",
        privacy_text=i18n.translate(language, "Privacy"),
        legal_hidden="" if {"termsUrl", "privacyUrl"} & brand.keys() else "hidden",
        mode=mode, heading=title, needs_script=i18n.translate(language, NEEDS_SCRIPT),
        application_name=application.name,
        application_id=application.id, auth_id=auth_id, execution_id=execution_id,
        resume="session" if resume and signing_in else "",
        first_step=json.dumps(first_step) if first_step and signing_in else "",
        flow_url=config.base_url + FLOW_PATH, callback_url=config.base_url + CALLBACK_PATH,
        consent_url=config.base_url + CONSENT_PATH,
        signin_url=f"{config.gate_url}/{SIGN_IN}?{urlencode(request)}",
        signup_url=(f"{config.gate_url}/{SIGN_UP}?{urlencode(request)}"
                    if application.registration_enabled else ""),
        recover_url=(f"{config.gate_url}/{RECOVER}?{urlencode(request)}"
                     if application.recovery_offered else ""))
    product = brand.get("productName")
    return pages.page(title=f"{title} | {product or application.name}", main=main,
                      assets=assets(config, application.id),
                      scripts=("webauthn.js", "gate.js"), language=language, here=here)


def provider_return_page(config: Config, language: str = i18n.DEFAULT) -> str:
    """``/gate/federated``, where an identity provider sends the browser back: its script
    hands the answer to the sign-in page this tab came from (gate.js). Its switcher returns
    to the start page: this page's query is the provider's one-time answer."""
    title = i18n.translate(language, "Signing you in…")
    main = pages.render("federated.html", heading=title,
                        needs_script=i18n.translate(language, NEEDS_SCRIPT))
    return pages.page(title=title, main=main, assets=assets(config, None), scripts=("gate.js",),
                      language=language)


def error_page(config: Config, error: UntrustedRedirect,
               language: str = i18n.DEFAULT, here: str = "/") -> str:
    """The page of a problem before the redirect is trusted: plain words, a way back to the
    application when it is known (the code is for programs only)."""
    back = ("Return to the application", error.back_to) if error.back_to else None
    return pages.message_page(title=error.message, text=error.description, error=error.code,
                              back=back, assets=assets(config, None), language=language,
                              here=here)


def _application_home(application_id: str) -> str | None:
    """The origin of the application's first redirect URI: its own address to go back to
    (the back button after a sign-in lands on a spent sign-in link)."""
    try:
        uris = catalog.applications.oauth_config(
            catalog.applications.get_application(application_id)).get(
            "redirectUris") or []
    except NotFound:
        return None
    parts = urlsplit(uris[0]) if uris else None
    return f"{parts.scheme}://{parts.netloc}/" if parts and parts.scheme in ("http", "https") \
        else None


def signed_out_page(config: Config, *, account_url: str, application_id: str | None = None,
                    language: str = i18n.DEFAULT, here: str = "/") -> str:
    """The end of a logout, with a way on: the application the logout came from (its home),
    else the account page."""
    return pages.message_page(title="You are signed out",
                              text="You can close this window, or return to the application "
                                   "to sign in again.",
                              back=_way_on(application_id, account_url),
                              assets=assets(config, None), language=language, here=here)


def _way_on(application_id: str | None, account_url: str) -> tuple[str, str]:
    """(text, URL) of the way on from a logout: the application's home, else the account
    page (which signs in again)."""
    home = _application_home(application_id) if application_id else None
    return ("Return to the application", home) if home else ("Sign in again", account_url)


def logout_question_page(config: Config, *, action: str, confirmation: str,
                         parameters: dict[str, str], account_url: str,
                         application_id: str | None = None,
                         language: str = i18n.DEFAULT, here: str = "/") -> str:
    """"Sign out of <deployment>?": a logout no ID token vouches for waits for the person's
    own press (the form posts ``confirmation`` and the request's ``parameters`` back)."""
    def text(english: str, **values: str) -> str:
        return i18n.translate(language, english, **values)

    title = text("Sign out of {service}?", service=config.passkey.rp_name)
    main = pages.render(
        "logout.html", heading=title, action=action, confirmation=confirmation,
        explanation=text("An application or a link asks to sign you out. You will need to "
                         "sign in again to use the applications you signed in to here."),
        sign_out=text("Sign out"), stay=text("Stay signed in"),
        stay_url=_way_on(application_id, account_url)[1],
        **{name: parameters.get(name, "") for name in
           ("client_id", "post_logout_redirect_uri", "state", "ui_locales")})
    return pages.page(title=title, main=main, assets=assets(config, None), language=language,
                      here=here)
