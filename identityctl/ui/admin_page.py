"""The admin console (``/admin``): a shell like the account page's, run by
``ui/static/admin.js`` and its area modules (``admin-users.js``, ``admin-records.js``).

The console is a public client of identityctl itself (``identityctl-admin``, authorization
code + PKCE) whose tokens are for the admin API only (RFC 8707 ``resource`` = the admin
API's audience). It keeps its access token in memory only: a reload signs in again through
``/oauth2/authorize``, which the browser's session answers without a page. Who may use it is
the admin API's answer (``/admin/api/v1/me``); the shell itself holds nothing secret.
"""

from __future__ import annotations

from identityctl import i18n
from identityctl.config import Config
from identityctl.oauth.discovery import AUTHORIZE_PATH, LOGOUT_PATH, PAR_PATH, TOKEN_PATH
from identityctl.services.accounts.account import ACCOUNT_CLIENT_ID
from identityctl.services.admin.console import ADMIN_CLIENT_ID
from identityctl.services.catalog.applications import application_templates
from identityctl.ui import pages
from identityctl.ui.account_page import ACCOUNT_PATH
from identityctl.ui.gate import assets

ADMIN_PATH = "/admin"
API_PATH = ADMIN_PATH + "/api/v1"
TITLE = "Administration"
#: The console's areas, in the order of its navigation: the fragment each opens -> its name.
AREAS = {"users": "Users", "applications": "Applications", "roles": "Roles",
         "providers": "Identity providers", "resources": "Resource servers",
         "webhooks": "Webhooks", "themes": "Themes", "flows": "Flows", "changes": "Changes",
         "audit": "Audit log", "operations": "Operations", "configuration": "Configuration"}


def page(config: Config, *, language: str = i18n.DEFAULT, here: str = "/") -> str:
    def text(english: str) -> str:
        return i18n.translate(language, english)

    static = assets(config, None)
    main = pages.render(
        "admin.html", static=static.static, heading=text(TITLE),
        skip=text("Skip to the content"), navigation=text("Administration areas"),
        sign_out=text("Sign out"), needs_script=text("This page needs JavaScript."),
        **{f"{area}_label": text(name) for area, name in AREAS.items()},
        client_id=ADMIN_CLIENT_ID, scope=f"openid profile {config.admin.required_scope}",
        resource=config.admin_audience, redirect_uri=config.base_url + ADMIN_PATH,
        authorize_url=config.base_url + AUTHORIZE_PATH, token_url=config.base_url + TOKEN_PATH,
        logout_url=config.base_url + LOGOUT_PATH, par_url=config.base_url + PAR_PATH,
        par_required=str(config.oauth.require_pushed_authorization_requests).lower(),
        api_url=config.base_url + API_PATH, account_url=config.base_url + ACCOUNT_PATH,
        templates=" ".join(application_templates()),
        built_in=f"{ACCOUNT_CLIENT_ID} {ADMIN_CLIENT_ID}")
    return pages.page(title=text(TITLE), main=main, assets=static, language=language, here=here,
                      scripts=("webauthn.js", "client-page.js", "admin.js", "admin-users.js",
                               "admin-records.js", "admin-changes.js", "admin-integrations.js",
                               "admin-design.js", "admin-configuration.js"))
