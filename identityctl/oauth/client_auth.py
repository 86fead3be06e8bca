"""Which client a token-endpoint request claims to be, and how it authenticates (RFC 6749 §2.3).

Reading the credentials is protocol; checking the secret against its stored hash is the
service's business.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from urllib.parse import unquote_plus

from identityctl.oauth.client_assertion import ASSERTION_TYPE, asserted_client_id
from identityctl.oauth.errors import InvalidClient, InvalidRequest
from identityctl.oauth.parameters import Parameters

BASIC = "client_secret_basic"
POST = "client_secret_post"
PRIVATE_KEY_JWT = "private_key_jwt"
NONE = "none"
METHODS = (BASIC, POST, PRIVATE_KEY_JWT, NONE)
#: The methods of a confidential client, which has a secret or keys.
AUTHENTICATED = (BASIC, POST, PRIVATE_KEY_JWT)
#: The methods whose credential is a client secret.
SECRET_METHODS = (BASIC, POST)
REALM = "identityctl"


@dataclass
class PresentedClient:
    """The client id a request names, the secret or assertion it shows (if any) and the
    method used."""

    client_id: str
    client_secret: str | None
    method: str
    assertion: str | None = None

    def refuse(self, description: str, *, code: str = "invalid_client") -> InvalidClient:
        """401 invalid_client; with Basic, the challenge RFC 6749 §5.2 requires."""
        headers = {"WWW-Authenticate": f'Basic realm="{REALM}"'} if self.method == BASIC else {}
        return InvalidClient(description, code=code, headers=headers)


def _basic_credentials(authorization: str) -> tuple[str, str]:
    encoded = authorization.partition(" ")[2]
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        decoded = ""
    client_id, colon, secret = decoded.partition(":")
    if not colon or not client_id:
        raise InvalidClient("The Basic credentials are not base64(client_id:client_secret).",
                            code="malformed_client_credentials",
                            headers={"WWW-Authenticate": f'Basic realm="{REALM}"'})
    # RFC 6749 §2.3.1: both halves are form-urlencoded before they are joined.
    return unquote_plus(client_id), unquote_plus(secret)


def presented_client(*, authorization: str | None, parameters: Parameters) -> PresentedClient:
    """The client of a token, revocation or introspection request.

    One method per request (RFC 6749 §2.3): Basic credentials and a ``client_secret``
    parameter together are refused.
    """
    body_client_id = parameters.get("client_id")
    body_secret = parameters.get("client_secret")
    basic = bool(authorization) and authorization.split(" ", 1)[0].lower() == "basic"
    if parameters.get("client_assertion") or parameters.get("client_assertion_type"):
        return _asserted_client(parameters, body_client_id,
                                other_method=basic or body_secret is not None)
    if authorization and authorization.split(" ", 1)[0].lower() == "basic":
        if body_secret is not None:
            raise InvalidRequest("Send the client secret either in the Authorization header "
                                 "or in the body, not both.", code="multiple_client_auth")
        client_id, secret = _basic_credentials(authorization)
        if body_client_id is not None and body_client_id != client_id:
            raise InvalidRequest("client_id in the body differs from the Basic credentials.",
                                 code="client_id_mismatch")
        return PresentedClient(client_id=client_id, client_secret=secret, method=BASIC)
    if body_client_id is None:
        raise InvalidClient("Authenticate the client: HTTP Basic, or client_id (and "
                            "client_secret) in the body.", code="client_auth_missing")
    if body_secret is not None:
        return PresentedClient(client_id=body_client_id, client_secret=body_secret, method=POST)
    return PresentedClient(client_id=body_client_id, client_secret=None, method=NONE)


def _asserted_client(parameters: Parameters, body_client_id: str | None, *,
                     other_method: bool) -> PresentedClient:
    """RFC 7521 §4.2: client_assertion_type and client_assertion (client_id optional)."""
    if other_method:
        raise InvalidRequest("Authenticate the client one way: a client assertion, or a "
                             "secret, not both.", code="multiple_client_auth")
    if parameters.get("client_assertion_type") != ASSERTION_TYPE:
        raise InvalidClient(f"client_assertion_type must be {ASSERTION_TYPE}.",
                            code="client_assertion_type_unsupported")
    assertion = parameters.get("client_assertion")
    if not assertion:
        raise InvalidClient("client_assertion is missing.", code="client_assertion_invalid")
    client_id = asserted_client_id(assertion)
    if body_client_id is not None and body_client_id != client_id:
        raise InvalidRequest("client_id in the body differs from the client assertion's sub.",
                             code="client_id_mismatch")
    return PresentedClient(client_id=client_id, client_secret=None, method=PRIVATE_KEY_JWT,
                           assertion=assertion)


def check_method(presented: PresentedClient, *, registered_method: str) -> None:
    """The client must authenticate the way it was registered to (no silent downgrade)."""
    if presented.method != registered_method:
        raise presented.refuse(f"This client authenticates with {registered_method}, "
                               f"not {presented.method}.", code="client_auth_method_mismatch")
