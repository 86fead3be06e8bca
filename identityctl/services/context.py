"""What services share at run time: configuration and the token service.

Built once per process (server, CLI, MCP stdio) and passed in; it holds no per-request
state, so any number of instances can serve the same store.
"""

from __future__ import annotations

from dataclasses import dataclass

from identityctl.config import Config
from identityctl.services.tokens import TokenService


@dataclass(frozen=True, slots=True)
class ServiceContext:
    config: Config
    tokens: TokenService

    @classmethod
    def for_config(cls, config: Config) -> ServiceContext:
        return cls(config=config, tokens=TokenService(config.issuer))
