"""``{base_url}/``: what is running, for the person who just started it (no script)."""

from __future__ import annotations

from identityctl import __version__
from identityctl.config import Config
from identityctl.oauth.discovery import OPENID_CONFIGURATION_PATH
from identityctl.ui import pages
from identityctl.ui.gate import assets


def page(config: Config, *, healthy: bool) -> str:
    main = pages.render(
        "home.html", version=__version__, base=config.base_url,
        health="ok" if healthy else "the database does not answer",
        discovery=config.issuer + OPENID_CONFIGURATION_PATH,
        mcp=config.mcp_audience if config.mcp.enabled else "off (mcp.enabled = false)")
    return pages.page(title="identityctl", main=main, assets=assets(config, None))
