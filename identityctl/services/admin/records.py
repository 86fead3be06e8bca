"""What the admin API keeps besides people: applications, the audit log (paged and exported),
the deployment's operations at a glance, and its configuration as code.

Every change goes through the functions the CLI and the MCP tools call (catalog/applications,
admin/configuration), with the caller's actor (``admin:<user id>``, ``client:<client id>``)
in their audit events. Lists are paged by keyset,
never by offset: a page costs the same at the first page and the last, however long the list
(bench/admin_pages.py).
"""

from __future__ import annotations

import copy
import csv
import io
import json
import math
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from functools import cache
from typing import Any

from identityctl import __version__
from identityctl.errors import IdentityError, InvalidField
from identityctl.services import shapes
from identityctl.services.admin import configuration
from identityctl.services.admin.console import (
    AdminHolder,
    checked_position,
    encode_cursor,
)
from identityctl.services.catalog import applications as application_service
from identityctl.services.context import ServiceContext
from identityctl.services.delivery import webhooks
from identityctl.services.delivery.outbox import waiting_by_kind
from identityctl.store import audit as audit_store
from identityctl.store import catalog as catalog_store
from identityctl.store import db
from identityctl.store.audit import AuditFilter

#: An export reads the log this many events at a time (one keyset page each), so memory and
#: each statement stay small however much it holds.
EXPORT_CHUNK = 500
#: A browser sign-in: every hosted sign-in (passkey, password, upstream) starts a session.
SIGN_IN_EVENT = "session.start"
SIGN_IN_DAYS = 14
WEBHOOK_FAILURES = 10
DAY = 86400


# --- paging ---------------------------------------------------------------------------------


def _page(items: list[dict[str, Any]], limit: int,
          position: Callable[[dict[str, Any]], list[Any]]) -> dict[str, Any]:
    """``{items, next}`` from up to ``limit + 1`` rows: the extra one says a next page
    exists (``position``: where the page after a row starts)."""
    more = len(items) > limit
    items = items[:limit]
    return {"items": items, "next": encode_cursor(position(items[-1])) if more else None}


# --- applications ---------------------------------------------------------------------------


def applications_page(*, limit: int, after: list[Any] | None) -> dict[str, Any]:
    """Applications by name, a page at a time (``after``: the cursor's position)."""
    start = checked_position(after, str)
    rows = catalog_store.applications_after(start[0] if start else None, limit=limit + 1)
    return _page(rows, limit, lambda app: [app["name"]])


#: What a body may set of an application: its own fields, and some of its OAuth settings
#: (``redirectUris``, ``scopes``, ...) under ``oauth``; a new one names its ``template``.
_CHANGES: shapes.Shape = {
    **{field: None for field in ("name", "description", "themeId", "ouId", "authFlowId",
                                 "registrationFlowId", "isRegistrationFlowEnabled",
                                 "passkeyUpgrade", "allowedUserTypes", "passkeysOnly")},
    "oauth": {key: value for key, value in shapes.OAUTH_CONFIG.items() if key != "clientId"}}
_NEW: shapes.Shape = {**_CHANGES, "template": None}


def create_application(holder: AdminHolder,
                       body: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """A new application from a template (SPA, Server, Mobile, M2M, Device), named and with
    the redirect URIs it needs; its client secret (confidential clients), shown once."""
    shapes.check(body, _NEW)
    template = body.get("template")
    if not isinstance(template, str):
        raise InvalidField("template", f"must be one of "
                           f"{', '.join(application_service.TEMPLATES)}")
    template, document = application_service.template_named(template)
    # Without a theme the default theme applies; the placeholder is for JSON authors.
    document.pop("themeId", None)
    document = _merged(document, {key: value for key, value in body.items()
                                  if key != "template"})
    application_service.require_own_redirect_uri(template, document)
    return application_service.create_application(document, origin=holder.origin)


def update_application(holder: AdminHolder, app_id: str, body: dict[str, Any]) -> dict[str, Any]:
    """Change some of an application's fields (``oauth``: some of its OAuth settings); what
    the body leaves out stays as it is."""
    shapes.check(body, _CHANGES)
    current = application_service.require_application(app_id)
    return application_service.update_application(_merged(current, body), origin=holder.origin)


def delete_application(holder: AdminHolder, app_id: str) -> None:
    application_service.delete_application(app_id, origin=holder.origin)


def rotate_secret(holder: AdminHolder, app_id: str) -> str:
    """A new client secret for a confidential client, shown this once."""
    return application_service.regenerate_client_secret(app_id, origin=holder.origin)


def _merged(document: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """``document`` with the body's fields and OAuth settings (checked by :data:`_CHANGES`)
    over it; the application service validates the whole."""
    merged = copy.deepcopy(document)
    for key, value in body.items():
        if key != "oauth":
            merged[key] = value
        elif isinstance(value, dict):
            application_service.oauth_config(merged).update(value)
        else:
            raise InvalidField("oauth", "must be an object of OAuth settings")
    return merged


# --- the audit log --------------------------------------------------------------------------


def audit_filter(*, actor: str | None = None, subject: str | None = None,
                 event: str | None = None, since: str | None = None,
                 until: str | None = None) -> AuditFilter:
    """The filter ``?actor=&subject=&event=&since=&until=`` names (``subject``: the user the
    event is about; ``event``: a prefix; times: ISO 8601 or seconds since 1970)."""
    return AuditFilter(actor=actor or None, user_id=subject or None, event_prefix=event or None,
                       since=_moment(since, "since"), until=_moment(until, "until"))


def _moment(value: str | None, field: str) -> float | None:
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        if math.isfinite(seconds):
            return seconds
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidField(field, "must be a time in ISO 8601 (2026-01-31T12:00:00Z) or "
                           "seconds since 1970") from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def audit_page(wanted: AuditFilter, *, limit: int, after: list[Any] | None) -> dict[str, Any]:
    """The newest events first, a page at a time (``after``: the cursor's position)."""
    start = checked_position(after, float, int)
    rows = audit_store.page(wanted, after=(start[0], start[1]) if start else None,
                            limit=limit + 1)
    return _page(rows, limit, lambda event: [float(event["at"]), event["id"]])


def audit_events(wanted: AuditFilter) -> Iterator[dict[str, Any]]:
    """Every event the filter holds, newest first, read a keyset page at a time."""
    after: audit_store.Position | None = None
    while True:
        rows = audit_store.page(wanted, after=after, limit=EXPORT_CHUNK)
        yield from rows
        if len(rows) < EXPORT_CHUNK:
            return
        after = (rows[-1]["at"], rows[-1]["id"])


EXPORT_FORMATS = {"jsonl": "application/x-ndjson", "csv": "text/csv; charset=utf-8"}
CSV_COLUMNS = ("id", "at", "event", "outcome", "actor", "userId", "clientAddress",
               "requestId", "details")
#: A spreadsheet takes a cell starting with one of these for a formula (CSV injection,
#: OWASP): such a cell is written with a leading apostrophe, which shows it as text.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def export_format(value: str | None) -> str:
    chosen = value or "jsonl"
    if chosen not in EXPORT_FORMATS:
        raise InvalidField("format", f"must be one of {', '.join(EXPORT_FORMATS)}")
    return chosen


def exported(events: Iterable[dict[str, Any]], form: str) -> Iterator[bytes]:
    """The events as JSON lines or CSV (a header, then a row each), a line at a time."""
    if form == "jsonl":
        for event in events:
            yield (json.dumps(event, separators=(",", ":"), ensure_ascii=False)
                   + "\n").encode()
        return
    yield _csv_line(CSV_COLUMNS)
    for event in events:
        row = {**event, "at": datetime.fromtimestamp(event["at"], UTC).isoformat(),
               "details": json.dumps(event["details"], separators=(",", ":"),
                                     ensure_ascii=False)}
        yield _csv_line(_cell(row[column]) for column in CSV_COLUMNS)


def _cell(value: Any) -> str:
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(_FORMULA_STARTS) else text


def _csv_line(cells: Iterable[str]) -> bytes:
    line = io.StringIO()
    csv.writer(line).writerow(cells)
    return line.getvalue().encode()


# --- operations -----------------------------------------------------------------------------


def operations() -> dict[str, Any]:
    """What is running and how it is doing: version, health, the outbox's waiting messages
    by kind, sign-ins per day (UTC) over the last 14 days, the newest webhook failures."""
    try:
        db.check_health()
        health = "ok"
    except IdentityError as failure:
        health = failure.code
    today = int(time.time()) // DAY * DAY
    days = [today - DAY * back for back in range(SIGN_IN_DAYS - 1, -1, -1)]
    return {
        "version": __version__, "health": health, "outbox": waiting_by_kind(),
        "signInsPerDay": [
            {"day": datetime.fromtimestamp(day, UTC).date().isoformat(),
             "count": audit_store.count(SIGN_IN_EVENT, since=day, until=day + DAY)}
            for day in days],
        "webhookFailures": webhooks.deliveries(WEBHOOK_FAILURES, failed=True),
    }


# --- configuration as code ------------------------------------------------------------------

#: An export's forms and their media types (JSON is YAML too).
DOCUMENT_TYPES = {"json": "application/json", "yaml": "application/yaml"}
#: The media types a YAML document is sent as.
YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml")


@cache
def _yaml() -> tuple[Any, type, type]:
    """PyYAML, its loader and its dumper. PERF: imported with the first YAML document
    (~20 ms of every start otherwise)."""
    import yaml

    class Loader(yaml.SafeLoader):
        """YAML's safe subset without aliases: a few hundred bytes of anchors and aliases
        can stand for billions of nodes ("billion laughs"), so an alias is refused where it
        appears (what `export` writes never holds one)."""

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                alias = self.peek_event()
                raise yaml.composer.ComposerError(
                    None, None, f"the alias *{alias.anchor} is refused (aliases could make "
                    "a small document expand without bound); write the value out",
                    alias.start_mark)
            return super().compose_node(parent, index)

    class Dumper(yaml.SafeDumper):
        """Writes a value used twice out twice, never as an anchor and alias (which
        `apply` refuses)."""

        def ignore_aliases(self, data: Any) -> bool:
            return True

    return yaml, Loader, Dumper


def document_text(document: Any, form: str = "yaml") -> str:
    """A configuration document as ``form`` (yaml or json) text, as `export` writes it."""
    if form == "json":
        return json.dumps(document, indent=2) + "\n"
    yaml, _, dumper = _yaml()
    return yaml.dump(document, Dumper=dumper, sort_keys=False, allow_unicode=True,
                     width=100)


def document_form(value: str | None) -> str:
    """``?format=`` of an export: yaml or json (the default)."""
    chosen = value or "json"
    if chosen not in DOCUMENT_TYPES:
        raise InvalidField("format", f"must be one of {', '.join(DOCUMENT_TYPES)}")
    return chosen


def parsed_document(text: bytes | str, source: str = "The document") -> Any:
    """A YAML (or JSON, which is YAML) document's value, without aliases; YAML's dates and
    other non-JSON scalars become text, as the API would see them. Anything else is
    ``malformed_document``, naming ``source`` and the line."""
    yaml, loader, _ = _yaml()
    try:
        return json.loads(json.dumps(yaml.load(text, Loader=loader), default=str))
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" at line {where.line + 1}" if where else ""
        raise IdentityError(f"{source} is not valid YAML{line}: "
                            f"{getattr(exc, 'problem', None) or exc}",
                            code="malformed_document") from None
    except RecursionError:
        raise IdentityError(f"{source} nests too deeply.", code="malformed_document") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise IdentityError(f"{source} is not a valid document: {exc}",
                            code="malformed_document") from None


def sent_document(sent: Any) -> Any:
    """The document of a JSON body: the value itself, or, for a JSON string, the document
    whose text (YAML or JSON) it holds: what the console sends of a file or a paste, which
    it does not parse itself."""
    return parsed_document(sent) if isinstance(sent, str) else sent


def configuration_plan(ctx: ServiceContext, holder: AdminHolder, document: object
                       ) -> dict[str, Any]:
    """What applying ``document`` would change (``identityctl apply --dry-run``)."""
    changes = configuration.apply(ctx, document, dry_run=True, origin=holder.origin,
                                  from_host=False)
    return {"dryRun": True, "changes": [change.to_api() for change in changes]}


def configuration_apply(ctx: ServiceContext, holder: AdminHolder,
                        document: object) -> dict[str, Any]:
    """Make the deployment match ``document`` (``identityctl apply``)."""
    changes = configuration.apply(ctx, document, origin=holder.origin, from_host=False)
    return {"dryRun": False, "changes": [change.to_api() for change in changes]}
