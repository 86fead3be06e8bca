"""Client ID Metadata Documents (the MCP authorization specification, 2025-11-25): a
``client_id`` that is an ``https`` URL names a JSON document, published by the client, that
describes it. The authorization server fetches it (services/outbound.py) and checks it here:
its ``client_id`` is that URL exactly, and it describes what a self-registered client may
be (oauth/registration.py: no secret, PKCE, https or loopback redirect URIs).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from identityctl.oauth.errors import InvalidClientMetadata
from identityctl.oauth.registration import ClientMetadata, validate_client_metadata

#: A document URL is stored as the client id (at most 255 characters in every database).
MAX_URL_LENGTH = 255


def is_document_url(client_id: str) -> bool:
    """Whether ``client_id`` names a client metadata document: an https URL with a path
    (not the bare origin), no fragment, short enough to be a client id."""
    if len(client_id) > MAX_URL_LENGTH or not client_id.startswith("https://"):
        return False
    try:
        parts = urlsplit(client_id)
        return bool(parts.hostname) and parts.path not in ("", "/") and not parts.fragment \
            and parts.username is None and parts.password is None
    except ValueError:
        return False


def validate_document(document: Any, *, url: str, allowed_scopes: tuple[str, ...],
                      default_scopes: tuple[str, ...] | None = None) -> ClientMetadata:
    """The client ``document`` (fetched from ``url``) describes, checked; else
    InvalidClientMetadata / InvalidRedirectUri saying why."""
    if not isinstance(document, dict):
        raise InvalidClientMetadata("The client metadata document is not a JSON object.")
    if document.get("client_id") != url:
        raise InvalidClientMetadata(f"The document's client_id {document.get('client_id')!r} "
                                    f"is not its URL {url!r}.", code="client_id_mismatch")
    described = {name: value for name, value in document.items() if name != "client_id"}
    return validate_client_metadata(described, allowed_scopes=allowed_scopes,
                                    default_scopes=default_scopes)
