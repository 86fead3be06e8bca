"""The FIDO metadata (MDS3 BLOB) that passkey registrations are checked against: one row,
shared by every instance (services/accounts/passkeys/attestation.py keeps a parsed copy per
process under its version)."""

from __future__ import annotations

from dataclasses import dataclass

import peewee
from peewee import EXCLUDED

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
    """Replace the metadata, one version up from the one it replaces. The version is raised
    by the statement itself, so two loads at once never share one version."""
    fields = {AttestationMetadata.blob: blob, AttestationMetadata.trust_root: trust_root,
              AttestationMetadata.number: number, AttestationMetadata.next_update: next_update,
              AttestationMetadata.entries: entries,
              AttestationMetadata.legal_header: legal_header,
              AttestationMetadata.loaded_at: now()}
    with transaction():
        (AttestationMetadata.insert({AttestationMetadata.id: _ROW,
                                     AttestationMetadata.version: 1, **fields})
         .on_conflict(conflict_target=[AttestationMetadata.id], update={
             AttestationMetadata.version: AttestationMetadata.version + 1,
             **{field: EXCLUDED[field.column_name] for field in fields}})
         .execute())
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
