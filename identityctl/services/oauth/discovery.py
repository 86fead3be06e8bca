"""The provider's published keys and metadata (OIDC Discovery, RFC 8414)."""

from __future__ import annotations

from typing import Any

from identityctl.oauth.discovery import provider_metadata
from identityctl.services.context import ServiceContext
from identityctl.store import keys as key_store


def jwks() -> dict[str, Any]:
    """The published keys, read from the store on each request (not the signer's cache), so
    a key rotated on any instance is published everywhere at once."""
    return {"keys": [key.public_jwk for key in key_store.published_keys()]}


def metadata(ctx: ServiceContext) -> dict[str, Any]:
    """OIDC discovery / RFC 8414 metadata; signing algorithms are those of the JWKS keys."""
    algorithms = sorted({key["alg"] for key in jwks()["keys"]})
    return provider_metadata(issuer=ctx.config.issuer, base_url=ctx.config.base_url,
                             signing_algorithms=algorithms,
                             registration=ctx.config.oauth.dynamic_registration != "off",
                             client_documents=ctx.config.oauth.client_documents,
                             par_required=ctx.config.oauth.require_pushed_authorization_requests)
