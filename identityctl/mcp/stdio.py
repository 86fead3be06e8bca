"""`identityctl mcp`: the MCP tool server over stdio, for assistants on the admin's machine.

No token: whoever can run the command can read the configuration and the database, so it acts
as the local admin (audited as `mcp:stdio`). Standard output is the protocol: logging goes to
standard error, and while the server runs the SDK points file descriptor 1 at standard error,
so a stray print cannot corrupt a message.
"""

from __future__ import annotations

import logging
import sys

from identityctl.config import Config
from identityctl.services.context import ServiceContext


def serve_stdio(config: Config) -> None:
    """Serve the tools on stdin/stdout until the client closes stdin. The store is connected."""
    from identityctl.mcp.tools import build_server

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    build_server(ServiceContext.for_config(config)).run("stdio")
