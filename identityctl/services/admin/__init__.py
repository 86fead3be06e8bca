"""The deployment as a whole: its first run (``bootstrap``), configuration as code
(``configuration``), backups and restores (``backups``) and its signing keys (``keys``).

The top room of services/: it may call every other room, and none calls it.
"""
