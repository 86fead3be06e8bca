"""Who a test acts as when it calls a service directly (the services take an explicit
``RequestOrigin``; the audit log names this actor)."""

from identityctl.services.origin import RequestOrigin

TEST_ORIGIN = RequestOrigin(actor="admin")
