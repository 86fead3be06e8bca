"""The process's long-lived objects, kept out of the cyclic garbage collector's way."""

from __future__ import annotations

import gc


def settle_heap() -> None:
    """Take every object alive now out of the cyclic garbage collector's way (gc.freeze).

    What exists once the app is built (modules, configuration, compiled statements; the MCP
    SDK once /mcp is first used) lives as long as the process, yet every full collection
    walked all of it again: served, that cost sign-ins and token requests several percent of
    their CPU (docs/performance.md). Collected first, so no garbage is frozen with it; objects
    are still freed by reference counting as before.
    """
    gc.collect()
    gc.freeze()
