"""`identityctl passkey`: list, rename and delete a user's passkeys; load the FIDO metadata
that registrations are checked against (`passkey metadata load`).

Registering a passkey needs a browser (or the user's authenticator), so it is not a CLI
command; an admin lets it happen with a token: `identityctl token --scope system`.
"""

from __future__ import annotations

from pathlib import Path

import typer

from identityctl.cli.common import (
    ORIGIN,
    Session,
    YesOption,
    command,
    confirm_and_delete,
    end_sessions,
    read_regular_file,
    when,
)
from identityctl.cli.output import JsonOption, done, show_record, show_table
from identityctl.services.origin import RequestOrigin

passkey_app = typer.Typer(help="A user's passkeys (WebAuthn credentials): list, rename, delete; "
                          "the FIDO metadata registrations are checked against.",
                          no_args_is_help=True)
metadata_app = typer.Typer(help="The FIDO metadata (MDS3 BLOB) that passkey.metadata checks "
                           "registrations against.", no_args_is_help=True)
passkey_app.add_typer(metadata_app, name="metadata")

UserArgument = typer.Argument(..., help="User id or username.")
CredentialArgument = typer.Argument(..., metavar="CRED_ID",
                                    help="Credential id (Base64URL, as `passkey list` shows).")
#: A Base64URL credential id may start with "-" (one in 64): taken as the argument it is,
#: not refused as an unknown option.
_ID_MAY_START_WITH_DASH = {"ignore_unknown_options": True}


@command(passkey_app, "list")
def passkey_list(user: str = UserArgument, as_json: bool = JsonOption) -> None:
    """Show the passkeys of USER, oldest first. Example:

        identityctl passkey list alice
    """
    from identityctl.services.accounts.passkeys import admin

    Session.connected()
    records = [record.to_api() for record in admin.list_credentials(user)]
    rows = [{**record, "created": when(record["createdAt"]),
             "lastUsed": when(record["lastUsedAt"]),
             "synced": "yes" if record["backupEligible"] else "no"} for record in records]
    show_table(rows, [("credentialId", "Credential id"), ("name", "Name"),
                      ("created", "Created"), ("lastUsed", "Last used"),
                      ("synced", "Synced"), ("signCount", "Counter")],
               title="Passkeys", as_json=as_json, json_data=records)


@command(passkey_app, "rename", context_settings=_ID_MAY_START_WITH_DASH)
def passkey_rename(user: str = UserArgument, credential_id: str = CredentialArgument,
                   name: str = typer.Argument(..., help="New name (at most 64 characters)."),
                   as_json: bool = JsonOption) -> None:
    """Give one of USER's passkeys a new NAME."""
    from identityctl.services.accounts.passkeys import admin

    Session.connected()
    record = admin.rename_credential(user, credential_id, name, origin=ORIGIN)
    done(f"renamed passkey {credential_id} to {record.name!r}", as_json=as_json,
         data=record.to_api())


@command(passkey_app, "delete", context_settings=_ID_MAY_START_WITH_DASH)
def passkey_delete(user: str = UserArgument, credential_id: str = CredentialArgument,
                   yes: bool = YesOption, as_json: bool = JsonOption) -> None:
    """Remove one of USER's passkeys; it can no longer sign in, and the user's sessions
    end (it may have been lost; asks first unless --yes)."""
    from identityctl.services.accounts.passkeys import admin

    Session.connected()

    def delete(credential: str, *, origin: RequestOrigin) -> None:
        admin.delete_credential(user, credential, origin=origin)
        end_sessions(user, "passkey removed")

    confirm_and_delete(f"passkey {credential_id} of {user}", credential_id, delete, yes=yes,
                       as_json=as_json, shown={"user": user})


@command(metadata_app, "load")
def metadata_load(
        blob: Path = typer.Argument(..., exists=True, dir_okay=False, metavar="FILE",
                                    help="The BLOB as downloaded from the FIDO Metadata "
                                         "Service (a JWS)."),
        trust_root: Path | None = typer.Option(
            None, "--trust-root", exists=True, dir_okay=False,
            help="Verify against this root certificate (PEM or DER) instead of the FIDO "
                 "Alliance's shipped with identityctl (tests, private metadata)."),
        as_json: bool = JsonOption) -> None:
    """Verify FILE's signature and certificate chain, and make it the metadata every
    instance checks registrations against. Example:

        curl -sLo blob.jwt https://mds3.fidoalliance.org/
        identityctl passkey metadata load blob.jwt
    """
    from identityctl.passkey.attestation import MAX_BLOB_BYTES, MAX_TRUST_ROOT_BYTES
    from identityctl.services.accounts.passkeys import attestation

    # At most what a BLOB (a certificate) may hold: a device, a pipe or an oversized file is
    # refused naming it, before anything is parsed.
    read_blob = read_regular_file(blob, limit=MAX_BLOB_BYTES, code="metadata_invalid")
    root = read_regular_file(trust_root, limit=MAX_TRUST_ROOT_BYTES,
                             code="metadata_trust_root_invalid") if trust_root else None
    Session.connected()
    record = attestation.load_metadata(read_blob, trust_root=root, origin=ORIGIN)
    show_record(record.to_api(), title="FIDO metadata loaded", as_json=as_json)


@command(metadata_app, "show")
def metadata_show(as_json: bool = JsonOption) -> None:
    """Show the loaded FIDO metadata: its number, entries, next update and legal header."""
    from identityctl.services.accounts.passkeys import attestation

    Session.connected()
    record = attestation.loaded_metadata()
    if record is None:
        done("no FIDO metadata is loaded", as_json=as_json, data={"loaded": False})
        return
    show_record(record.to_api(), title="FIDO metadata", as_json=as_json)
