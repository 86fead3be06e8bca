"""The process's long-lived objects, kept out of the cyclic garbage collector's way."""

from __future__ import annotations

import gc


def settle_heap() -> None:
    """Take every object alive now out of the cyclic garbage collector's way (gc.freeze).

    What exists once the app is built (modules, configuration, compiled statements; the MCP
    SDK once /mcp is first used) lives as long as the process, yet every full collection
    walked all of it again: served, that cost sign-ins and token requests several percent of
    their CPU (docs/performance.md). Objects are still freed by reference counting as before.
    """
    # PERF: not collected first. Loading makes lasting objects: of the ~128,000 alive when
    # the app is built, a collection found ~2,300 garbage (some 100s of KiB, now kept), and
    # it cost 35-70 ms of every start.
    gc.freeze()
