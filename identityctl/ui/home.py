"""``{base_url}/``: what is running, for the person who just started it (no script)."""

from __future__ import annotations

from identityctl import __version__, i18n
from identityctl.config import Config
from identityctl.oauth.discovery import OPENID_CONFIGURATION_PATH
from identityctl.ui import pages
from identityctl.ui.gate import assets


def page(config: Config, *, healthy: bool, language: str = i18n.DEFAULT,
         here: str = "/") -> str:
    def text(english: str) -> str:
        return i18n.translate(language, english)

    main = pages.render(
        "home.html", version=__version__, base=config.base_url,
        heading=text("identityctl is running"),
        about=text("A passkey-first identity service: hosted sign-in, OAuth 2.0 and OpenID "
                   "Connect, and an MCP server for AI assistants."),
        health_label=text("Health"), discovery_label=text("Discovery"),
        accounts_label=text("Accounts"), try_label=text("Try signing in"),
        add_heading=text("Add an application"),
        then=text("Then point its OpenID Connect library at the discovery address above."),
        health=text("ok" if healthy else "the database does not answer"),
        discovery=config.issuer + OPENID_CONFIGURATION_PATH,
        mcp=config.mcp_audience if config.mcp.enabled else text("off (mcp.enabled = false)"))
    return pages.page(title="identityctl", main=main, assets=assets(config, None),
                      language=language, here=here)
