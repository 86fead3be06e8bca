"""Administration of a user's passkeys (the CLI): list, rename and delete credentials."""

from __future__ import annotations

from identityctl.errors import MissingField
from identityctl.services import audit
from identityctl.services.accounts.passkeys.ceremonies import valid_credential_name
from identityctl.services.directory.users import require_user
from identityctl.services.origin import RequestOrigin
from identityctl.store import passkeys as store


def list_credentials(id_or_username: str) -> list[store.PasskeyRecord]:
    return store.list_credentials(require_user(id_or_username).id)


def rename_credential(id_or_username: str, credential_id: str, name: str, *,
                      origin: RequestOrigin) -> store.PasskeyRecord:
    user = require_user(id_or_username)
    new_name = valid_credential_name(name, field="name")
    if new_name is None:
        raise MissingField("name", "The new name must not be blank.")
    record = store.rename_credential(user.id, credential_id, new_name)
    audit.record("passkey.rename", "success", origin=origin, user_id=user.id,
                 details={"credentialId": credential_id})
    return record


def delete_credential(id_or_username: str, credential_id: str, *, origin: RequestOrigin) -> None:
    user = require_user(id_or_username)
    store.delete_credential(user.id, credential_id)
    audit.record("passkey.delete", "success", origin=origin, user_id=user.id,
                 details={"credentialId": credential_id})
