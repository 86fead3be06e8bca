"""Themes of the hosted pages: the grammar of their values and the stylesheet they become.

Pure logic (no HTTP, no store), below the services that store themes and the pages that
serve them, like ``passkey/``, ``flow/`` and ``oauth/``.
"""
