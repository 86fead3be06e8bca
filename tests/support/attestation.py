"""A test FIDO world: a root CA standing in for the FIDO Alliance's, the certificate that
signs a metadata BLOB, a make's attestation certificate, and MDS3 BLOBs (a JWS, RS256 with
the signer in ``x5c``, as the FIDO Metadata Service signs them) made of entries."""

from __future__ import annotations

import base64
import datetime
import uuid
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from tests.support.authenticator import AttestationCertificate

#: id-fido-gen-ce-aaguid: the AAGUID an attestation certificate is for.
FIDO_AAGUID_EXTENSION = x509.ObjectIdentifier("1.3.6.1.4.1.45724.1.1.4")
LEGAL_HEADER = "Test metadata: no FIDO Alliance terms apply."
Key = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


def _name(common_name: str, *, unit: str | None = None) -> x509.Name:
    parts = [x509.NameAttribute(NameOID.COUNTRY_NAME, "DE"),
             x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Test Keys Inc."),
             x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if unit:
        parts.insert(2, x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, unit))
    return x509.Name(parts)


@dataclass(frozen=True)
class Authority:
    """A certificate and its key; a CA when it issues others."""

    key: Key
    certificate: x509.Certificate

    @property
    def der(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.DER)

    @property
    def pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    def issue(self, subject: x509.Name, key: Key, *, ca: bool = False,
              extensions: tuple[x509.ExtensionType, ...] = ()) -> Authority:
        now = datetime.datetime.now(datetime.UTC)
        builder = (x509.CertificateBuilder().subject_name(subject)
                   .issuer_name(self.certificate.subject).public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(days=1))
                   .not_valid_after(now + datetime.timedelta(days=365))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        for extension in extensions:
            builder = builder.add_extension(extension, critical=False)
        return Authority(key, builder.sign(self.key, hashes.SHA256()))


def root_ca(name: str = "Test FIDO Root") -> Authority:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = _name(name)
    now = datetime.datetime.now(datetime.UTC)
    certificate = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(days=1))
                   .not_valid_after(now + datetime.timedelta(days=3650))
                   .add_extension(x509.BasicConstraints(ca=True, path_length=None),
                                  critical=True)
                   .sign(key, hashes.SHA256()))
    return Authority(key, certificate)


def blob_signer(root: Authority) -> Authority:
    """The certificate a metadata BLOB is signed with (RSA, as the FIDO service's)."""
    return root.issue(_name("Test MDS signer"),
                      rsa.generate_private_key(public_exponent=65537, key_size=2048))


def attestation_certificate(root: Authority, aaguid: str) -> AttestationCertificate:
    """A make's attestation certificate for ``aaguid`` (WebAuthn §8.2.1's requirements),
    issued by ``root``; x5c holds the leaf alone."""
    value = b"\x04\x10" + uuid.UUID(aaguid).bytes  # an OCTET STRING in the extension
    leaf = root.issue(_name("Test Key Batch 1", unit="Authenticator Attestation"),
                      ec.generate_private_key(ec.SECP256R1()),
                      extensions=(x509.UnrecognizedExtension(FIDO_AAGUID_EXTENSION, value),))
    return AttestationCertificate(private_key=leaf.key, chain=(leaf.der,))  # type: ignore[arg-type]


def entry(aaguid: str, attestation_root: Authority, *,
          statuses: tuple[str, ...] = ("FIDO_CERTIFIED",)) -> dict[str, Any]:
    """One MDS3 entry: the make ``aaguid``, whose attestations chain to ``attestation_root``."""
    return {
        "aaguid": aaguid, "timeOfLastStatusChange": "2026-01-01",
        "statusReports": [{"status": status, "effectiveDate": "2026-01-01"}
                          for status in statuses],
        "metadataStatement": {
            "description": "Test Key", "aaguid": aaguid, "authenticatorVersion": 1,
            "schema": 3, "upv": [{"major": 1, "minor": 1}], "attestationTypes": ["basic_full"],
            "userVerificationDetails": [[{"userVerificationMethod": "presence_internal"}]],
            "keyProtection": ["hardware"], "matcherProtection": ["on_chip"],
            "attachmentHint": ["external"], "tcDisplay": [],
            "attestationRootCertificates": [base64.b64encode(attestation_root.der).decode()]}}


def metadata_blob(signer: Authority, entries: list[dict[str, Any]], *,
                  next_update: datetime.date | None = None, number: int = 1) -> bytes:
    """An MDS3 BLOB of ``entries`` signed by ``signer`` (next update: in a month)."""
    payload = {"legalHeader": LEGAL_HEADER, "no": number,
               "nextUpdate": (next_update or datetime.date.today()
                              + datetime.timedelta(days=30)).isoformat(),
               "entries": entries}
    return jwt.encode(payload, signer.key, algorithm="RS256",
                      headers={"x5c": [base64.b64encode(signer.der).decode()]}).encode()
