"""The account page (``/account``), the page another device opens to add a passkey
(``/account/enrol``) and the page where a person approves a device's sign-in (``/device``,
RFC 8628): shells like the gate's, run by ``ui/static/account.js``.

The page is a public client of identityctl itself (``identityctl-account``, authorization
code + PKCE). It keeps its access token in memory only: a reload signs in again through
``/oauth2/authorize``, which the browser's session answers without a page (single
sign-on). No token is ever stored in the browser.
"""

from __future__ import annotations

from identityctl import i18n
from identityctl.config import Config
from identityctl.oauth.discovery import (
    AUTHORIZE_PATH,
    DEVICE_PATH,
    LOGOUT_PATH,
    PAR_PATH,
    TOKEN_PATH,
)
from identityctl.services.accounts.account import ACCOUNT_CLIENT_ID, ACCOUNT_SCOPE
from identityctl.ui import pages
from identityctl.ui.gate import assets

ACCOUNT_PATH = "/account"


#: The page's mode -> its title (the device page signs in back to itself).
MODES = {"account": "Your account", "enrol": "Add a passkey", "device": "Sign in on a device"}


def redirect_uri(config: Config, mode: str = "account") -> str:
    return config.base_url + (DEVICE_PATH if mode == "device" else ACCOUNT_PATH)


def page(config: Config, *, mode: str = "account", language: str = i18n.DEFAULT,
         here: str = "/") -> str:
    title = i18n.translate(language, MODES[mode])
    main = pages.render(
        "account.html", mode=mode, heading=title,
        needs_script=i18n.translate(language, "This page needs JavaScript."),
        client_id=ACCOUNT_CLIENT_ID, scope=f"openid profile email {ACCOUNT_SCOPE}",
        redirect_uri=redirect_uri(config, mode), authorize_url=config.base_url + AUTHORIZE_PATH,
        token_url=config.base_url + TOKEN_PATH, logout_url=config.base_url + LOGOUT_PATH,
        par_url=config.base_url + PAR_PATH,
        par_required=str(config.oauth.require_pushed_authorization_requests).lower(),
        api_url=config.base_url + ACCOUNT_PATH + "/api")
    return pages.page(title=title, main=main, assets=assets(config, None),
                      scripts=("webauthn.js", "client-page.js", "account.js"), language=language,
                      here=here)
