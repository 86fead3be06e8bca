"""Which authenticators may register: the AAGUID lists, and FIDO metadata (MDS3) BLOBs
verified with fido2 against a test root standing in for the FIDO Alliance's."""

from __future__ import annotations

import datetime
import secrets

import pytest
from cryptography import x509

from identityctl.passkey.attestation import (
    AuthenticatorPolicy,
    AuthenticatorRefused,
    MetadataError,
    check_authenticator,
    ensure_current,
    fido_root,
    metadata_verifier,
    read_metadata,
)
from tests.support.attestation import (
    LEGAL_HEADER,
    Authority,
    attestation_certificate,
    blob_signer,
    entry,
    metadata_blob,
    root_ca,
)
from tests.support.authenticator import SoftAuthenticator, b64url, b64url_decode

TODAY = datetime.date.today()
KEY = "11111111-2222-3333-4444-555555555555"
OTHER = "66666666-7777-8888-9999-000000000000"


@pytest.fixture(scope="module")
def fido() -> Authority:
    return root_ca()


@pytest.fixture(scope="module")
def make_root() -> Authority:
    """The root of the test key maker's attestation certificates."""
    return root_ca("Test Keys Attestation Root")


def _blob(fido: Authority, *entries: dict, next_update: datetime.date | None = None) -> bytes:
    return metadata_blob(blob_signer(fido), list(entries), next_update=next_update)


def test_a_blob_signed_under_the_root_is_read_with_its_entries(
        fido: Authority, make_root: Authority) -> None:
    payload = read_metadata(_blob(fido, entry(KEY, make_root)), trust_root=fido.der)
    ensure_current(payload, today=TODAY)
    assert payload.legal_header == LEGAL_HEADER and payload.no == 1
    assert [str(found.aaguid) for found in payload.entries] == [KEY]


def test_a_blob_with_a_bad_signature_another_root_or_a_past_next_update_is_refused(
        fido: Authority, make_root: Authority) -> None:
    blob = _blob(fido, entry(KEY, make_root))
    message, signature = blob.rsplit(b".", 1)
    flipped = bytearray(b64url_decode(signature.decode()))
    flipped[0] ^= 1
    for bad, trust_root in ((message + b"." + b64url(bytes(flipped)).encode(), fido.der),
                            (blob, root_ca("Another Root").der)):
        with pytest.raises(MetadataError) as refused:
            read_metadata(bad, trust_root=trust_root)
        assert refused.value.code == "metadata_untrusted"
    stale = _blob(fido, entry(KEY, make_root), next_update=TODAY - datetime.timedelta(days=1))
    with pytest.raises(MetadataError) as refused:
        ensure_current(read_metadata(stale, trust_root=fido.der), today=TODAY)
    assert refused.value.code == "metadata_expired"
    with pytest.raises(MetadataError) as refused:
        read_metadata(b"not a blob", trust_root=fido.der)
    assert refused.value.code == "metadata_invalid"


def test_the_shipped_root_is_the_fido_alliances_globalsign_r3() -> None:
    root = x509.load_der_x509_certificate(fido_root())
    assert root.subject.rfc4514_string() == \
        "CN=GlobalSign,O=GlobalSign,OU=GlobalSign Root CA - R3"


def _registration(authenticator: SoftAuthenticator) -> tuple[bytes, bytes]:
    """An attestation object and clientDataJSON, as a browser would send them."""
    options = {"rp": {"id": "localhost"}, "user": {"id": b64url(secrets.token_bytes(16))},
               "challenge": b64url(secrets.token_bytes(32))}
    made = authenticator.create(options, origin="http://localhost")["response"]
    return (b64url_decode(made["attestationObject"]), b64url_decode(made["clientDataJSON"]))


def _check(aaguid: str, authenticator: SoftAuthenticator, *, policy: AuthenticatorPolicy,
           blob: bytes | None = None, fido: Authority | None = None) -> None:
    attestation_object, client_data = _registration(authenticator)
    verifier = metadata_verifier(read_metadata(blob, trust_root=fido.der)) \
        if blob and fido else None
    check_authenticator(aaguid=aaguid, attestation_object=attestation_object,
                        client_data_json=client_data, policy=policy, verifier=verifier)


def _refusal(aaguid: str, authenticator: SoftAuthenticator, **arguments: object) -> dict:
    with pytest.raises(AuthenticatorRefused) as refused:
        _check(aaguid, authenticator, **arguments)  # type: ignore[arg-type]
    assert refused.value.code == "authenticator_not_allowed" and refused.value.status == 403
    return refused.value.details


def _key(aaguid: str, root: Authority | None) -> SoftAuthenticator:
    """A key of make ``aaguid``: attested under ``root``, or self-attested without one."""
    return SoftAuthenticator(attestation="packed", aaguid=bytes.fromhex(aaguid.replace("-", "")),
                             attestation_certificate=attestation_certificate(root, aaguid)
                             if root else None)


def test_the_aaguid_lists_allow_and_deny_by_the_authenticators_word() -> None:
    allow = AuthenticatorPolicy(allow=frozenset({KEY}))
    _check(KEY, _key(KEY, None), policy=allow)
    assert _refusal(OTHER, _key(OTHER, None), policy=allow)["reason"] == "not_allowed"
    deny = AuthenticatorPolicy(deny=frozenset({KEY}))
    _check(OTHER, _key(OTHER, None), policy=deny)
    assert _refusal(KEY, _key(KEY, None), policy=deny)["reason"] == "denied"


def test_metadata_lets_only_a_key_whose_chain_ends_at_its_entrys_roots_register(
        fido: Authority, make_root: Authority) -> None:
    policy = AuthenticatorPolicy(metadata_required=True)
    blob = _blob(fido, entry(KEY, make_root))
    _check(KEY, _key(KEY, make_root), policy=policy, blob=blob, fido=fido)
    for aaguid, key, reason in (
            (OTHER, _key(OTHER, make_root), "not_in_metadata"),
            (KEY, _key(KEY, None), "attestation_untrusted"),  # self attestation proves nothing
            (KEY, _key(KEY, root_ca("Counterfeit Keys")), "attestation_untrusted"),
            (KEY, SoftAuthenticator(aaguid=bytes.fromhex(KEY.replace("-", ""))),
             "attestation_untrusted")):  # "none": no attestation at all
        assert _refusal(aaguid, key, policy=policy, blob=blob, fido=fido) == {
            "reason": reason, "aaguid": aaguid}


@pytest.mark.parametrize("status", ["REVOKED", "ATTESTATION_KEY_COMPROMISE",
                                    "USER_VERIFICATION_BYPASS"])
def test_a_status_report_of_revocation_or_compromise_refuses_the_make(
        fido: Authority, make_root: Authority, status: str) -> None:
    blob = _blob(fido, entry(KEY, make_root, statuses=("FIDO_CERTIFIED", status)))
    assert _refusal(KEY, _key(KEY, make_root), policy=AuthenticatorPolicy(
        metadata_required=True), blob=blob, fido=fido) == {
        "reason": "status", "aaguid": KEY, "status": status}

