"""The FIDO metadata (MDS3 BLOB) that passkey registrations are checked against: one row,
shared by every instance (services/accounts/passkeys/attestation.py keeps a parsed copy per
process under its version)."""

from __future__ import annotations

from dataclasses import dataclass

import peewee

from identityctl.store.db import transaction
from identityctl.store.models import AttestationMetadata, now

#: The one row's id.
_ROW = 1


@dataclass(slots=True)
class MetadataRecord:
    version: int
    blob: str
    #: Base64 of the DER root the BLOB was verified against.
    trust_root: str
    number: int
    next_update: str
    entries: int
    legal_header: str
    loaded_at: float

    def to_api(self) -> dict[str, object]:
        return {"version": self.version, "number": self.number,
                "nextUpdate": self.next_update, "entries": self.entries,
                "legalHeader": self.legal_header, "loadedAt": self.loaded_at}


def save_metadata(*, blob: str, trust_root: str, number: int, next_update: str, entries: int,
                  legal_header: str) -> MetadataRecord:
    """Replace the metadata, one version up from the one it replaces."""
    with transaction():
        current = metadata_version()
        version = (current or 0) + 1
        fields = {"version": version, "blob": blob, "trust_root": trust_root, "number": number,
                  "next_update": next_update, "entries": entries,
                  "legal_header": legal_header, "loaded_at": now()}
        if current is None:
            AttestationMetadata.insert(id=_ROW, **fields).execute()
        else:
            AttestationMetadata.update(**fields).where(AttestationMetadata.id == _ROW).execute()
    record = find_metadata()
    assert record is not None  # written just now
    return record


def metadata_version() -> int | None:
    """The version of the loaded metadata, None when none was loaded (one small row)."""
    row = (AttestationMetadata.select(AttestationMetadata.version)
           .where(AttestationMetadata.id == _ROW).tuples().first())
    return row[0] if row else None


def find_metadata() -> MetadataRecord | None:
    try:
        row = AttestationMetadata.get_by_id(_ROW)
    except peewee.DoesNotExist:
        return None
    return MetadataRecord(version=row.version, blob=row.blob, trust_root=row.trust_root,
                          number=row.number, next_update=row.next_update, entries=row.entries,
                          legal_header=row.legal_header, loaded_at=row.loaded_at)
