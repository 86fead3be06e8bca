"""Who acts and from where: the value every service that changes something is given.

An adapter builds one per request (server/middleware.py for HTTP, the MCP tools from the
SDK's request, the CLI once per process) and passes it down explicitly; the audit log, the
throttles and the webhooks read the actor, the client address and the request id from it, never
from a context variable.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True, slots=True)
class RequestOrigin:
    #: Who acts, as the audit log names them: ``cli``, ``mcp:<subject>``, ``admin:<userId>``,
    #: ``client:<clientId>``, a user id, a client id...; empty while nobody is known yet.
    actor: str = ""
    #: The client's address (X-Forwarded-For from a trusted proxy); empty off the network.
    address: str = ""
    #: The request's id (its X-Request-ID and log lines say the same); empty off the network.
    request_id: str = ""

    def acting_as(self, actor: str) -> RequestOrigin:
        """The same request, acting for ``actor`` (known only once a sign-in or a client
        authentication has said who it is)."""
        return self if actor == self.actor else replace(self, actor=actor)
