"""Configuration as code: the deployment's configuration as one document (``export``), and
making a deployment match such a document (``apply``). docs/configuration-as-code.md.

The document names things by handle, name or client id, never by row id, so it moves
between deployments. A secret is a reference, ``{"env": NAME}`` or ``{"file": PATH}``,
resolved where the document is applied; a secret itself is never written into it.

``apply`` runs every change in one transaction through the service functions the CLI and
the MCP tools use (their validation, audit events and caches), so a document that fails
anywhere changes nothing. A dry run is that same transaction rolled back: it reports what
would change, with every check run. An update that would leave an entry's export as it was
is rolled back to its savepoint, so applying a document twice writes nothing the second time.

Only the sections a document holds are managed: within one, an entry the document does not
list is deleted, except the records every deployment is seeded with (they would come back at
the next start), which may be changed but are kept.
"""

from __future__ import annotations

import os
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from identityctl.errors import BadRequest, IdentityError, InvalidField
from identityctl.services import catalog, shapes
from identityctl.services.accounts import account, federation
from identityctl.services.admin import bootstrap
from identityctl.services.clients import resource_servers
from identityctl.services.context import ServiceContext
from identityctl.services.directory import roles
from identityctl.services.directory import users as directory
from identityctl.services.origin import RequestOrigin
from identityctl.store import db

API_VERSION = "identityctl/v1"
KIND = "Configuration"
#: The document's sections, in the order they are created and updated (a later section may
#: name an entry of an earlier one); deletions run in the reverse order.
SECTIONS = ("themes", "flows", "organizationUnits", "userTypes", "roles",
            "resourceServers", "identityProviders", "applications")
#: Applications the service made for itself or that registered themselves: not configuration.
_SERVICE_MARKS = ("selfRegistered", "clientDocument")


@dataclass(frozen=True, slots=True)
class Change:
    """One entry created, updated or deleted; ``before``/``after`` as the document shows it."""

    section: str
    key: str
    action: str  # "create" | "update" | "delete"
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    #: The entry's secret changes too (a document shows only its reference).
    secret_changed: bool = False

    def to_api(self) -> dict[str, Any]:
        return {"section": self.section, "key": self.key, "action": self.action,
                "before": self.before, "after": self.after,
                "secretChanged": self.secret_changed}


# --- secrets by reference -------------------------------------------------------------------


def secret_reference(value: object, field: str) -> dict[str, str]:
    """A checked reference: exactly one of ``env`` (a variable name) or ``file`` (a path)."""
    if (isinstance(value, dict) and len(value) == 1
            and isinstance(next(iter(value.values())), str)):
        (source, name), = value.items()
        if source == "env" and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            return {"env": name}
        if source == "file" and name:
            return {"file": name}
    raise InvalidField(field, "must be a reference, {env: VARIABLE} or {file: PATH}; a secret "
                       "is never written into the document", code="secret_not_a_reference")


def resolve_secret(reference: dict[str, str]) -> str | None:
    """The secret a reference names, or None when that variable or file is not there."""
    if "env" in reference:
        return os.environ.get(reference["env"]) or None
    try:
        return Path(reference["file"]).read_text().strip() or None
    except OSError:
        return None


def _default_reference(prefix: str, key: str) -> dict[str, str]:
    """Where a secret made by the service (not by a document) is expected when applied."""
    return {"env": f"IDENTITYCTL_{prefix}_{re.sub(r'[^A-Z0-9]', '_', key.upper())}"}


def _required_secret(reference: dict[str, str], field: str) -> str:
    secret = resolve_secret(reference)
    if secret is None:
        raise InvalidField(field, f"{_source(reference)} is not set; a new entry needs its "
                           "secret", code="secret_unresolved")
    return secret


def _source(reference: dict[str, str]) -> str:
    return (f"the environment variable {reference['env']}" if "env" in reference
            else f"the file {reference['file']}")


# --- sections -------------------------------------------------------------------------------

#: Who the audit log names for what ``identityctl apply`` (the host's operator) changes.
APPLY = RequestOrigin(actor="apply")


class Section(ABC):
    """How one kind of record reads as document entries and is made to match one."""

    name: str = ""
    #: Who the audit events of its changes name (``identityctl apply``, an admin's API call).
    origin: RequestOrigin = APPLY
    #: Entries every deployment is seeded with: never deleted (the next start would bring
    #: them back), though they may be changed.
    built_in: frozenset[str] = frozenset()

    @abstractmethod
    def key(self, entry: dict[str, Any]) -> str:
        """What names the entry in the document (a handle, a name, a client id)."""

    @abstractmethod
    def entries(self) -> dict[str, dict[str, Any]]:
        """The deployment's entries by key, as the document shows them."""

    @abstractmethod
    def create(self, entry: dict[str, Any]) -> None:
        """Make the entry, through the service that makes such records."""

    @abstractmethod
    def update(self, key: str, entry: dict[str, Any]) -> None:
        """Make the record named ``key`` what the entry says."""

    @abstractmethod
    def delete(self, key: str) -> None:
        """Delete the record named ``key``."""

    def ordered(self, entries: dict[str, dict[str, Any]]) -> list[str]:
        """The keys in the order they may be created (and, reversed, deleted)."""
        return list(entries)

    def changes_outside(self, key: str, entry: dict[str, Any]) -> bool:
        """Whether applying ``entry`` changes something its export does not show (a secret)."""
        return False

    def replace_secret(self, key: str, entry: dict[str, Any]) -> None:
        """Give the entry the secret its reference names (when :meth:`changes_outside`).
        A section whose update takes the secret itself (identity providers) has done so."""
        return None

    def secret(self, entry: dict[str, Any]) -> dict[str, str] | None:
        """The reference to the entry's secret, if it has one."""
        return None


def _without(record: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {key: value for key, value in record.items() if key not in keys}


class Themes(Section):
    name = "themes"
    built_in = frozenset({"default"})

    def key(self, entry: dict[str, Any]) -> str:
        return _text(entry, "handle")

    def entries(self) -> dict[str, dict[str, Any]]:
        return {theme["handle"]: {"handle": theme["handle"],
                                  "displayName": theme["displayName"],
                                  "description": theme["description"],
                                  "theme": theme["theme"]}
                for theme in catalog.themes.list_themes()}

    def create(self, entry: dict[str, Any]) -> None:
        catalog.themes.create_theme(
            handle=self.key(entry), display_name=_text(entry, "displayName"),
                             description=entry.get("description") or "",
                             theme=entry.get("theme") or {}, origin=self.origin)

    def update(self, key: str, entry: dict[str, Any]) -> None:
        catalog.themes.update_theme(key, origin=self.origin, display_name=_text(entry,
                                                                                "displayName"),
                             description=entry.get("description") or "",
                             theme=entry.get("theme") or {})

    def delete(self, key: str) -> None:
        catalog.themes.delete_theme(key, origin=self.origin)


class Flows(Section):
    name = "flows"

    def __init__(self) -> None:
        self.built_in = frozenset(f"{flow['flowType']}/{flow['handle']}"
                                  for flow in bootstrap.default_flow_documents(""))

    def key(self, entry: dict[str, Any]) -> str:
        return f"{_text(entry, 'flowType')}/{_text(entry, 'handle')}"

    def entries(self) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        for flow in _all_flows():
            entry = {"handle": flow["handle"], "flowType": flow["flowType"],
                     "name": flow["name"], "nodes": flow["nodes"]}
            found[self.key(entry)] = entry
        return found

    def create(self, entry: dict[str, Any]) -> None:
        catalog.flows.create_flow(_without(entry, "id"), origin=self.origin)

    def update(self, key: str, entry: dict[str, Any]) -> None:
        flow_type, handle = key.split("/", 1)
        current = catalog.flows.require_flow_by_handle(handle, flow_type)
        catalog.flows.update_flow(current["id"], name=_text(entry, "name"),
                            nodes=entry.get("nodes") or [], origin=self.origin)

    def delete(self, key: str) -> None:
        flow_type, handle = key.split("/", 1)
        catalog.flows.delete_flow(handle, flow_type=flow_type, origin=self.origin)


class OrganizationUnits(Section):
    name = "organizationUnits"
    built_in = frozenset({directory.DEFAULT_OU})

    def key(self, entry: dict[str, Any]) -> str:
        return _text(entry, "handle")

    def entries(self) -> dict[str, dict[str, Any]]:
        units = directory.list_ous()
        handles = {unit["id"]: unit["handle"] for unit in units}
        # ``passkeysOnly`` is written only where it holds: most documents never name it.
        return {unit["handle"]: {"handle": unit["handle"], "name": unit["name"],
                                 "description": unit["description"],
                                 "parent": handles.get(unit["parent"]),
                                 **({"passkeysOnly": True} if unit["passkeysOnly"] else {})}
                for unit in units}

    def ordered(self, entries: dict[str, dict[str, Any]]) -> list[str]:
        """Parents before their children (a parent outside ``entries`` exists already)."""
        placed: list[str] = []

        def place(handle: str, path: tuple[str, ...]) -> None:
            if handle in placed or handle not in entries:
                return
            if handle in path:
                raise InvalidField(f"organizationUnits[{handle}].parent",
                                   "would place the unit inside itself", code="ou_cycle")
            parent = entries[handle].get("parent")
            if parent is not None and not isinstance(parent, str):
                raise InvalidField(f"organizationUnits[{handle}].parent",
                                   "must be a unit's handle (text) or null")
            if parent:
                place(parent, (*path, handle))
            placed.append(handle)

        for handle in entries:
            place(handle, ())
        return placed

    def create(self, entry: dict[str, Any]) -> None:
        directory.create_ou(handle=self.key(entry), name=_text(entry, "name"),
                            description=entry.get("description") or "",
                            parent=entry.get("parent") or None,
                            passkeys_only=_flag(entry, "passkeysOnly"), origin=self.origin)

    def update(self, key: str, entry: dict[str, Any]) -> None:
        directory.update_ou(key, origin=self.origin, name=_text(entry, "name"),
                            description=entry.get("description") or "",
                            parent=entry.get("parent") or None,
                            passkeys_only=_flag(entry, "passkeysOnly"))

    def delete(self, key: str) -> None:
        directory.delete_ou(key, origin=self.origin)


class UserTypes(Section):
    name = "userTypes"
    built_in = frozenset({directory.DEFAULT_USER_TYPE})

    def key(self, entry: dict[str, Any]) -> str:
        return _text(entry, "name")

    def entries(self) -> dict[str, dict[str, Any]]:
        handles = {unit["id"]: unit["handle"] for unit in directory.list_ous()}
        return {kind["name"]: {"name": kind["name"], "ou": handles.get(kind["ouId"]),
                               "allowSelfRegistration": kind["allowSelfRegistration"],
                               "schema": kind["schema"]}
                for kind in directory.list_user_types()}

    def create(self, entry: dict[str, Any]) -> None:
        directory.create_user_type(name=self.key(entry),
                                   ou=entry.get("ou") or directory.DEFAULT_OU,
                                   allow_self_registration=_flag(entry,
                                                                 "allowSelfRegistration"),
                                   schema=entry.get("schema") or {}, origin=self.origin)

    def update(self, key: str, entry: dict[str, Any]) -> None:
        directory.update_user_type(key, ou=entry.get("ou") or directory.DEFAULT_OU,
                                   allow_self_registration=_flag(entry,
                                                                 "allowSelfRegistration"),
                                   schema=entry.get("schema") or {}, origin=self.origin)

    def delete(self, key: str) -> None:
        directory.delete_user_type(key, origin=self.origin)


class Roles(Section):
    name = "roles"
    built_in = frozenset({roles.ADMIN_ROLE})

    def key(self, entry: dict[str, Any]) -> str:
        return _text(entry, "name")

    def entries(self) -> dict[str, dict[str, Any]]:
        return {role.name: {"name": role.name, "description": role.description,
                            "scopes": role.scopes}
                for role in roles.list_roles()}

    def create(self, entry: dict[str, Any]) -> None:
        roles.create_role(name=self.key(entry), scopes=_texts(entry, "scopes"),
                          description=entry.get("description") or "", origin=self.origin)

    def update(self, key: str, entry: dict[str, Any]) -> None:
        roles.update_role(key, scopes=_texts(entry, "scopes"),
                          description=entry.get("description") or "", origin=self.origin)

    def delete(self, key: str) -> None:
        roles.delete_role(key, origin=self.origin)


class ResourceServers(Section):
    """The team's own APIs, by their resource identifier (RFC 8707)."""

    name = "resourceServers"

    def __init__(self, ctx: ServiceContext) -> None:
        self.ctx = ctx

    def key(self, entry: dict[str, Any]) -> str:
        return _text(entry, "identifier")

    def entries(self) -> dict[str, dict[str, Any]]:
        return {server.identifier: {"identifier": server.identifier, "name": server.name,
                                    "scopes": server.scopes}
                for server in resource_servers.list_resource_servers()}

    def create(self, entry: dict[str, Any]) -> None:
        resource_servers.register_resource_server(
            self.ctx, identifier=self.key(entry), scopes=_texts(entry, "scopes"),
            name=entry.get("name") or "", origin=self.origin)

    def update(self, key: str, entry: dict[str, Any]) -> None:
        resource_servers.update_resource_server(key, scopes=_texts(entry, "scopes"),
                                                name=entry.get("name") or "", origin=self.origin)
        # (no name in the document: the URL, as create makes it)

    def delete(self, key: str) -> None:
        resource_servers.remove_resource_server(key, origin=self.origin)


class IdentityProviders(Section):
    name = "identityProviders"
    _prefix = "IDP_SECRET"

    def __init__(self, ctx: ServiceContext) -> None:
        self.ctx = ctx

    def key(self, entry: dict[str, Any]) -> str:
        return _text(entry, "handle")

    def entries(self) -> dict[str, dict[str, Any]]:
        return {provider.handle: {
            **federation.provider_settings(provider),
            "clientSecret": provider.settings.get("clientSecretRef")
            or _default_reference(self._prefix, provider.handle)}
            for provider in federation.list_providers()}

    def _arguments(self, entry: dict[str, Any]) -> dict[str, Any]:
        return {"client_id": _text(entry, "clientId"), "name": entry.get("name") or "",
                "issuer": entry.get("issuer") or "", "tenant": entry.get("tenant") or "",
                "scopes": _texts(entry, "scopes") or None,
                "mapping": dict(entry.get("mapping") or {}),
                "api_url": entry.get("apiUrl") or "", "web_url": entry.get("webUrl") or "",
                "discovery_url": entry.get("discoveryUrl") or "",
                "secret_ref": self.secret(entry)}

    def secret(self, entry: dict[str, Any]) -> dict[str, str]:
        return secret_reference(entry.get("clientSecret"), "clientSecret")

    def create(self, entry: dict[str, Any]) -> None:
        federation.add_provider(
            self.ctx, kind=_text(entry, "kind"), handle=self.key(entry),
            client_secret=_required_secret(self.secret(entry), "clientSecret"),
            **self._arguments(entry), origin=self.origin)

    def update(self, key: str, entry: dict[str, Any]) -> None:
        current = federation.require_provider(key)
        if entry.get("kind") != current.kind:
            raise InvalidField("kind", f"is {current.kind}; remove the provider and add it "
                               "anew to change its kind")
        federation.update_provider(
            key, client_secret=resolve_secret(self.secret(entry)) or current.client_secret,
            **self._arguments(entry), origin=self.origin)

    def changes_outside(self, key: str, entry: dict[str, Any]) -> bool:
        secret = resolve_secret(self.secret(entry))
        return secret is not None and secret != federation.require_provider(key).client_secret

    def delete(self, key: str) -> None:
        federation.remove_provider(key, origin=self.origin)


class Applications(Section):
    """Applications the admin made (not the account page's, nor a client that registered
    itself), by client id; a confidential one's secret by reference."""

    name = "applications"
    _prefix = "CLIENT_SECRET"

    def key(self, entry: dict[str, Any]) -> str:
        clients = [config.get("clientId") for config in _oauth_configs(entry)]
        if len(clients) != 1 or not isinstance(clients[0], str) or not clients[0]:
            raise InvalidField("inboundAuthConfig[0].config.clientId", "is required: it "
                               "names the application in the document")
        return clients[0]

    def entries(self) -> dict[str, dict[str, Any]]:
        themes = {theme["id"]: theme["handle"] for theme in catalog.themes.list_themes()}
        flows = {flow["id"]: flow["handle"] for flow in _all_flows()}
        units = {unit["id"]: unit["handle"] for unit in directory.list_ous()}
        found: dict[str, dict[str, Any]] = {}
        for application in catalog.applications.list_applications():
            config = catalog.applications.oauth_config(application)
            if config["clientId"] == account.ACCOUNT_CLIENT_ID or any(
                    config.get(mark) for mark in _SERVICE_MARKS):
                continue
            entry = {
                **_without(application, "id", "createdAt", "updatedAt", "inboundAuthConfig"),
                "ouId": units.get(application["ouId"]),
                "themeId": themes.get(application["themeId"]),
                "authFlowId": flows.get(application["authFlowId"]),
                "registrationFlowId": flows.get(application["registrationFlowId"]),
                "inboundAuthConfig": [{"type": "oauth2",
                                       "config": _without(config, "secretRef")}]}
            if catalog.applications.has_client_secret(config):
                entry["clientSecret"] = config.get("secretRef") or _default_reference(
                    self._prefix, config["clientId"])
            found[config["clientId"]] = entry
        return found

    def secret(self, entry: dict[str, Any]) -> dict[str, str] | None:
        if not any(catalog.applications.has_client_secret(config)
                   for config in _oauth_configs(entry)):
            if "clientSecret" in entry:
                raise InvalidField("clientSecret", "this client has no secret (it is public, "
                                   "or authenticates with its keys)")
            return None
        return secret_reference(entry.get("clientSecret"), "clientSecret")

    def create(self, entry: dict[str, Any]) -> None:
        reference = self.secret(entry)
        catalog.applications.create_application(
            _without(entry, "clientSecret", "id"), origin=self.origin,
            marks={"secretRef": reference} if reference else None,
            client_secret=_required_secret(reference, "clientSecret") if reference else None)

    def update(self, key: str, entry: dict[str, Any]) -> None:
        reference = self.secret(entry)
        current = catalog.applications.require_application_by_client_id(key)
        catalog.applications.update_application(
            {**_without(entry, "clientSecret"), "id": current["id"]},
                                   origin=self.origin,
                                   marks={"secretRef": reference} if reference else None)

    def replace_secret(self, key: str, entry: dict[str, Any]) -> None:
        catalog.applications.regenerate_client_secret(key, origin=self.origin,
                                         secret=resolve_secret(self.secret(entry) or {}))

    def changes_outside(self, key: str, entry: dict[str, Any]) -> bool:
        reference = self.secret(entry)
        secret = resolve_secret(reference) if reference else None
        return secret is not None and not catalog.applications.client_secret_matches(
            catalog.applications.require_application_by_client_id(key), secret)

    def delete(self, key: str) -> None:
        catalog.applications.delete_application(key, origin=self.origin)


def sections(ctx: ServiceContext, *, origin: RequestOrigin = Section.origin) -> list[Section]:
    every = [Themes(), Flows(), OrganizationUnits(), UserTypes(), Roles(), ResourceServers(ctx),
             IdentityProviders(ctx), Applications()]
    for section in every:
        section.origin = origin
    return every


# --- export and apply -----------------------------------------------------------------------


def export(ctx: ServiceContext, *, only: Iterable[str] = ()) -> dict[str, Any]:
    """The deployment's configuration as one document (``only``: just these sections)."""
    wanted = set(only) or set(SECTIONS)
    unknown = wanted - set(SECTIONS)
    if unknown:
        raise InvalidField("section", f"{', '.join(sorted(unknown))}: not one of "
                           f"{', '.join(SECTIONS)}")
    document: dict[str, Any] = {"apiVersion": API_VERSION, "kind": KIND}
    for section in sections(ctx):
        if section.name in wanted:
            entries = section.entries()
            document[section.name] = [entries[key] for key in
                                      section.ordered(dict(sorted(entries.items())))]
    return document


class _DryRun(Exception):
    """Raised to roll back the whole transaction of a dry run."""


class _Unchanged(Exception):
    """Raised to roll back the savepoint of an update that changed nothing."""


def apply(ctx: ServiceContext, document: object, *, dry_run: bool = False,
          origin: RequestOrigin, from_host: bool = True) -> list[Change]:
    """Make the deployment match ``document``, in one transaction; the changes made (or, with
    ``dry_run``, that would be made: the transaction is rolled back), audited as ``origin``'s.

    ``from_host``: the document comes from the host's own operator (the CLI). One that came
    over the network (the admin API, a proposed change) may name no file and only the
    service's own secret variables (:func:`_check_remote_references`)."""
    wanted = _checked_document(ctx, document)
    if not from_host:
        _check_remote_references(ctx, wanted)
    changes: list[Change] = []
    try:
        with db.transaction():
            changes = list(_apply(ctx, wanted, origin))
            if dry_run:
                raise _DryRun
    except _DryRun:
        pass
    return changes


def _apply(ctx: ServiceContext, wanted: dict[str, dict[str, dict[str, Any]]],
           origin: RequestOrigin) -> Iterator[Change]:
    managed = [section for section in sections(ctx, origin=origin) if section.name in wanted]
    _check_new_secrets(managed, wanted)
    deletions: list[tuple[Section, list[str]]] = []
    for section in managed:
        entries = wanted[section.name]
        current = section.entries()
        for key in section.ordered(entries):
            with _naming(section.name, key):
                change = _create_or_update(section, key, entries[key], current.get(key))
            if change:
                yield change
        gone = [key for key in current if key not in entries and key not in section.built_in]
        deletions.append((section, list(reversed(section.ordered(
            {key: current[key] for key in gone})))))
    for section, gone in reversed(deletions):
        current = section.entries()
        for key in gone:
            with _naming(section.name, key):
                section.delete(key)
            yield Change(section.name, key, "delete", current[key], None)


#: The environment variables a document from the network may name: those the service itself
#: expects secrets in (``_default_reference``), never the host's others.
REMOTE_REFERENCE = re.compile(r"IDENTITYCTL_(CLIENT|IDP)_SECRET_[A-Z0-9_]+")


def _check_remote_references(ctx: ServiceContext,
                             wanted: dict[str, dict[str, dict[str, Any]]]) -> None:
    """A document from the network reads no file of the host and none of its environment
    but the service's own secret variables: else its author could copy a host secret (a
    signing key, the database's password) into an entry whose secret is sent elsewhere."""
    for section in sections(ctx):
        if section.name not in wanted:
            continue
        current = section.entries()
        for key, entry in wanted[section.name].items():
            with _naming(section.name, key):
                reference = section.secret(entry)
                # One the host's operator set, unchanged, is theirs: not this document's.
                kept = key in current and section.secret(current[key]) == reference
            if reference and not kept and not REMOTE_REFERENCE.fullmatch(
                    reference.get("env", "")):
                raise InvalidField(
                    f"{section.name}[{key}].clientSecret", "a document sent over the network "
                    "may name only a variable IDENTITYCTL_CLIENT_SECRET_* or "
                    "IDENTITYCTL_IDP_SECRET_*; set other secrets with `identityctl apply` on "
                    "the host", code="secret_reference_not_allowed")


def _check_new_secrets(managed: list[Section],
                       wanted: dict[str, dict[str, dict[str, Any]]]) -> None:
    """Every new entry's secret can be read: else one error naming each one missing, so an
    operator sets them all at once."""
    missing: list[str] = []
    for section in managed:
        current = section.entries()
        for key, entry in wanted[section.name].items():
            with _naming(section.name, key):
                reference = section.secret(entry) if key not in current else None
            if reference and resolve_secret(reference) is None:
                missing.append(f"{_source(reference)} ({section.name}[{key}])")
    if missing:
        raise InvalidField("clientSecret", "a new entry needs its secret, and these are not "
                           f"set: {'; '.join(missing)}", code="secret_unresolved")


def _create_or_update(section: Section, key: str, entry: dict[str, Any],
                      before: dict[str, Any] | None) -> Change | None:
    if before is None:
        section.create(entry)
        return Change(section.name, key, "create", None, section.entries()[key])
    outside = section.changes_outside(key, entry)
    if entry == before and not outside:  # PERF: as exported: no write, no provider fetch
        return None
    after: dict[str, Any] = {}
    try:
        with db.savepoint():
            section.update(key, entry)
            if outside:
                section.replace_secret(key, entry)
            after = section.entries()[key]
            if after == before and not outside:
                raise _Unchanged
    except _Unchanged:
        return None
    return Change(section.name, key, "update", before, after, secret_changed=outside)


class _naming:  # used as a function: ``with _naming(section, key):``
    """An error applying an entry says which entry (the service's message names the field)."""

    __slots__ = ("_where",)

    def __init__(self, section: str, key: str) -> None:
        self._where = f"{section}[{key}]"

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: Any) -> None:
        if isinstance(error, IdentityError) and not error.description.startswith(self._where):
            error.description = f"{self._where}: {error.description or error.message}"
            error.args = (error.description,)


def _checked_document(ctx: ServiceContext,
                      document: object) -> dict[str, dict[str, dict[str, Any]]]:
    """The document's sections as {section: {key: entry}}, its shape checked."""
    if not isinstance(document, dict):
        raise BadRequest("The document must be a mapping of sections.",
                         code="malformed_document")
    if document.get("apiVersion") != API_VERSION or document.get("kind") != KIND:
        raise InvalidField("apiVersion", f"this document needs apiVersion: {API_VERSION} and "
                           f"kind: {KIND} (as `identityctl export` writes)",
                           code="malformed_document")
    # Every key no section knows, at any depth, is named at once (with the key meant):
    # the services would drop it, and the dry run propose the real key's default.
    unknown = shapes.unknown_keys(document, {"apiVersion": None, "kind": None,
                                             **dict.fromkeys(SECTIONS)})
    by_name = {section.name: section for section in sections(ctx)}
    wanted: dict[str, dict[str, dict[str, Any]]] = {}
    for name in SECTIONS:
        if name not in document:
            continue
        entries = document[name] or []
        if not isinstance(entries, list):
            raise InvalidField(name, "must be a list of entries", code="malformed_document")
        keyed: dict[str, dict[str, Any]] = {}
        for index, entry in enumerate(entries):
            with _naming(name, str(index)):
                if not isinstance(entry, dict):
                    raise InvalidField(f"{name}[{index}]", "must be a mapping",
                                       code="malformed_document")
                key = by_name[name].key(entry)
                if key in keyed:
                    raise InvalidField(f"{name}[{index}]", f"{key!r} is listed twice",
                                       code="duplicate_entry")
                keyed[key] = entry
            unknown += shapes.unknown_keys(entry, shapes.CONFIGURATION[name], f"{name}[{key}]")
        wanted[name] = keyed
    shapes.refuse(unknown)
    return wanted


# --- small readers --------------------------------------------------------------------------


def _text(entry: dict[str, Any], field: str) -> str:
    value = entry.get(field)
    if not isinstance(value, str) or not value:
        raise InvalidField(field, "is required (text)")
    return value


def _texts(entry: dict[str, Any], field: str) -> list[str]:
    value = entry.get(field) or []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InvalidField(field, "must be a list of text")
    return value


def _flag(entry: dict[str, Any], field: str) -> bool:
    value = entry.get(field, False)
    if not isinstance(value, bool):
        raise InvalidField(field, "must be true or false")
    return value


def _oauth_configs(entry: dict[str, Any]) -> list[dict[str, Any]]:
    blocks = entry.get("inboundAuthConfig") or []
    if not isinstance(blocks, list):
        raise InvalidField("inboundAuthConfig", "must be a list")
    return [block["config"] if isinstance(block.get("config"), dict) else {}
            for block in blocks if isinstance(block, dict) and block.get("type") == "oauth2"]


def _all_flows() -> list[dict[str, Any]]:
    return catalog.flows.list_flows(limit=None)[1]
