"""The browser's JSON form of a credential, read into bytes.

Browsers send binary fields as unpadded Base64URL (`PublicKeyCredential.toJSON()`); older
helper libraries pad them or use standard Base64. All three are accepted, as the reference
system does; anything else is a 400 naming the field. The result is re-encoded canonically
so py_webauthn (which only reads unpadded Base64URL) sees one form.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from identityctl.errors import BadRequest, InvalidField, MissingField

_BASE64_TEXT = re.compile(r"^[A-Za-z0-9+/_-]*={0,2}$")
#: Base64URL's two letters as standard Base64's (the other alphabet is left as it is).
_TO_STANDARD = bytes.maketrans(b"-_", b"+/")
#: Fields of `publicKeyCredential.response` per ceremony: (name, required).
_RESPONSE_FIELDS = {
    "registration": (("clientDataJSON", True), ("attestationObject", True)),
    "authentication": (("clientDataJSON", True), ("authenticatorData", True),
                       ("signature", True), ("userHandle", False)),
}
CREDENTIAL_FIELD = "publicKeyCredential"


def encode(data: bytes) -> str:
    """Unpadded Base64URL, the WebAuthn JSON encoding."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def decode(text: str, *, field: str) -> bytes:
    """Bytes of a Base64URL (padded or not) or standard Base64 string in ``field``."""
    if not isinstance(text, str):
        raise InvalidField(field, "must be a Base64URL string")
    unpadded = text.rstrip("=")
    if not _BASE64_TEXT.match(text) or len(unpadded) % 4 == 1:
        raise _malformed(field)
    try:
        return binascii.a2b_base64(unpadded.encode("ascii").translate(_TO_STANDARD)
                                   + b"=" * (-len(unpadded) % 4))
    except (binascii.Error, ValueError):
        raise _malformed(field) from None


def _malformed(field: str) -> BadRequest:
    return InvalidField(field, "is not valid Base64URL (or Base64)", code="malformed_base64url")


@dataclass(slots=True)
class CredentialResponse:
    """A `PublicKeyCredential` as bytes; ``fields`` holds the response's binary members."""

    credential_id: bytes
    type: str
    fields: dict[str, bytes]
    transports: tuple[str, ...]
    authenticator_attachment: str | None

    def to_json(self) -> dict[str, Any]:
        """The canonical `toJSON()` form py_webauthn parses."""
        credential_id = encode(self.credential_id)
        body: dict[str, Any] = {
            "id": credential_id, "rawId": credential_id, "type": self.type,
            "response": {name: encode(value) for name, value in self.fields.items()},
        }
        if self.transports:
            body["response"]["transports"] = list(self.transports)
        return body


def read_credential(credential: dict[str, Any], *, ceremony: str) -> CredentialResponse:
    """Check the shape of a credential sent for ``ceremony`` and decode its binary fields.

    ``rawId`` is optional (the spec's request names only ``id``); when present it must
    name the same bytes as ``id``.
    """
    if not isinstance(credential, dict):
        raise InvalidField(CREDENTIAL_FIELD, "must be an object")
    prefix = CREDENTIAL_FIELD + "."
    credential_id = _required_bytes(credential, "id", prefix)
    raw_id = credential.get("rawId")
    if raw_id is not None and raw_id != credential["id"] and \
            decode(raw_id, field=prefix + "rawId") != credential_id:
        raise InvalidField(prefix + "rawId", "must encode the same bytes as id",
                           code="credential_id_mismatch")
    kind = credential.get("type")
    if kind is None:
        raise MissingField(prefix + "type")
    if kind != "public-key":
        raise InvalidField(prefix + "type", f"must be 'public-key', got {kind!r}",
                           code="invalid_credential_type")
    response = credential.get("response")
    if response is None:
        raise MissingField(prefix + "response")
    if not isinstance(response, dict):
        raise InvalidField(prefix + "response", "must be an object")
    fields = {}
    for name, required in _RESPONSE_FIELDS[ceremony]:
        if required or response.get(name) not in (None, ""):
            fields[name] = _required_bytes(response, name, prefix + "response.")
    return CredentialResponse(
        credential_id=credential_id, type=kind, fields=fields,
        transports=_transports(response.get("transports"), prefix + "response.transports"),
        authenticator_attachment=_attachment(credential.get("authenticatorAttachment")))


#: How a ceremony's finish reads the credential, given the ceremony, from the shape its
#: caller received it in: the REST API's PublicKeyCredential JSON (:func:`json_credential`)
#: or a flow step's flat inputs (:func:`flow_credential`). The finish calls it inside its
#: audited, throttled attempt, so a malformed credential counts as the attempt it is.
CredentialReader = Callable[[str], CredentialResponse]


def json_credential(credential: dict[str, Any]) -> CredentialReader:
    """The reader of a ``PublicKeyCredential.toJSON()`` body member (``credential``)."""
    return lambda ceremony: read_credential(credential, ceremony=ceremony)


def flow_credential(inputs: dict[str, Any]) -> CredentialReader:
    """The reader of a flow step's inputs: ``credentialId`` and the response's members by
    name (``clientDataJSON``, ``authenticatorData``, ...), each Base64URL, and the
    registration's ``transports`` (``getTransports()`` joined by commas)."""

    def read(ceremony: str) -> CredentialResponse:
        credential_id = _required_bytes(inputs, "credentialId", "")
        fields = {name: _required_bytes(inputs, name, "")
                  for name, required in _RESPONSE_FIELDS[ceremony]
                  if required or inputs.get(name) not in (None, "")}
        listed = inputs.get("transports")
        transports = listed.split(",") if isinstance(listed, str) and listed else None
        return CredentialResponse(credential_id=credential_id, type="public-key", fields=fields,
                                  transports=_transports(transports, "transports"),
                                  authenticator_attachment=None)

    return read


def _required_bytes(container: dict[str, Any], name: str, prefix: str) -> bytes:
    value = container.get(name)
    if value is None or value == "":
        raise MissingField(prefix + name)
    return decode(value, field=prefix + name)


def _transports(value: Any, field: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InvalidField(field, "must be a list of strings")
    # Hints only, stored to fill allowCredentials later; unknown future values are kept.
    return tuple(dict.fromkeys(item for item in value if item and len(item) <= 32))[:8]


def _attachment(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
