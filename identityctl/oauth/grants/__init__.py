"""The token endpoint's grants, one module per RFC grant (in the style of Authlib's grant
classes and fosite's handlers): each keeps its RFC's checks together, as plain functions over
plain values (no HTTP, no SQL), and names its ``GRANT_TYPE``.

:data:`GRANT_TYPES` is the registry: each grant registered once, in the order discovery lists
them. Discovery (``grant_types_supported``), the validation of an application's
``grantTypes`` (services/catalog/applications.py) and the token endpoint, which looks up the
grant's handler by its type (services/oauth/token_endpoint.py), all read it."""

from identityctl.oauth.grants import (
    authorization_code,
    client_credentials,
    device_code,
    refresh_token,
    token_exchange,
)

GRANT_TYPES: tuple[str, ...] = (
    authorization_code.GRANT_TYPE,
    refresh_token.GRANT_TYPE,
    client_credentials.GRANT_TYPE,
    device_code.GRANT_TYPE,
    token_exchange.GRANT_TYPE,
)
