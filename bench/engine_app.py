"""The WSGI app `identityctl serve` runs, built for another WSGI server (bench/engines.py).

The deployment is the one $IDENTITYCTL_CONFIG names. The store is opened (and migrated) and
seeded as `serve` does at start, and the app is `identityctl.server.runtime.served_app`, the
one waitress serves; the outbox's delivery thread is not started (the benches that use this
module ask for tokens, which deliver nothing).

    IDENTITYCTL_CONFIG=deployment/config.toml \\
        .venv/bin/granian --interface wsgi --working-dir . bench.engine_app:app
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from identityctl import logs
from identityctl.config import load_config, resolve_config_path
from identityctl.server.heap import settle_heap
from identityctl.server.runtime import served_app
from identityctl.services import outbound
from identityctl.services.admin.bootstrap import open_store, seed
from identityctl.services.context import ServiceContext


def build() -> Callable[..., Any]:
    """The served app of the deployment $IDENTITYCTL_CONFIG names, as `serve` builds it."""
    config = load_config(resolve_config_path(None))
    logs.configure(config.server.log_format)
    open_store(config)
    seed(config)
    outbound.configure(config)
    served = served_app(config, ServiceContext.for_config(config))
    settle_heap()
    return served


app = build()
