"""Resource servers: the team's own APIs (an MCP server, say) identityctl issues tokens for.

An administrator registers one by its RFC 8707 resource identifier (the URL clients name in
``resource``) and the scopes its tokens may carry. MCP clients then sign in to it exactly as
to identityctl's own ``/mcp``: they find identityctl in the server's protected resource
metadata (RFC 9728), register or present a client metadata document, and get tokens whose
``aud`` is that URL and whose scopes are that server's (oauth/resource_indicators.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from identityctl.errors import InvalidField, NotFound
from identityctl.oauth.errors import OAuthError
from identityctl.oauth.parameters import check_resources
from identityctl.oauth.resource_indicators import (
    IDENTITY_SCOPES,
    RESERVED_SCOPES,
    check_targets,
    scope_within_targets,
    token_audience,
)
from identityctl.services import audit
from identityctl.services.context import ServiceContext
from identityctl.services.directory.roles import checked_scopes
from identityctl.services.origin import RequestOrigin
from identityctl.store import resource_servers as store
from identityctl.store.resource_servers import ResourceServerRecord


def list_resource_servers() -> list[ResourceServerRecord]:
    return store.list_resource_servers()


def require_resource_server(id_or_identifier: str) -> ResourceServerRecord:
    found = store.find_resource_server(id_or_identifier)
    if found is None:
        raise NotFound(f"No resource server '{id_or_identifier}'.",
                       code="resource_server_not_found")
    return found


def register_resource_server(ctx: ServiceContext, *, identifier: str, scopes: Sequence[str],
                             name: str = "", origin: RequestOrigin) -> ResourceServerRecord:
    try:
        check_resources([identifier])
    except OAuthError as error:
        raise InvalidField("identifier", "must be an absolute URL without a fragment, as "
                           "clients send it in `resource`") from error
    if identifier in own_resources(ctx):
        raise InvalidField("identifier", "is one of identityctl's own resources")
    checked = _server_scopes(scopes)
    created = store.create_resource_server(identifier=identifier, name=name or identifier,
                                           scopes=checked)
    audit.record("resource_server.create", "success", origin=origin,
                 details={"identifier": identifier, "scopes": checked})
    return created


def update_resource_server(id_or_identifier: str, *, scopes: Sequence[str],
                           name: str | None = None, origin: RequestOrigin) -> ResourceServerRecord:
    """New scopes (and name, kept when None) for a registered server. Tokens already issued
    keep theirs until they expire; new ones, refreshed ones too, carry only scopes it still
    has."""
    found = require_resource_server(id_or_identifier)
    checked = _server_scopes(scopes)
    new_name = found.name if name is None else (name or found.identifier)
    store.update_resource_server(found.id, name=new_name, scopes=checked)
    audit.record("resource_server.update", "success", origin=origin, details={
        "identifier": found.identifier, "scopes": checked, "scopesBefore": found.scopes,
        **({"name": new_name, "nameBefore": found.name} if new_name != found.name else {})})
    return require_resource_server(found.id)


def _server_scopes(scopes: Sequence[str]) -> list[str]:
    checked = checked_scopes(scopes)
    if not checked or IDENTITY_SCOPES.intersection(checked):
        raise InvalidField("scopes", "must name the server's own scopes (at least one; "
                           f"not {', '.join(sorted(IDENTITY_SCOPES))}, which any token may "
                           "carry)")
    reserved = sorted(RESERVED_SCOPES.intersection(checked))
    if reserved:
        raise InvalidField("scopes", f"must not include {', '.join(reserved)}: "
                           f"{', '.join(sorted(RESERVED_SCOPES))} are identityctl's own",
                           code="scope_reserved")
    return checked


def remove_resource_server(id_or_identifier: str, *, origin: RequestOrigin) -> None:
    """Tokens are no longer issued for it, nor refreshed; those issued keep working until
    they expire."""
    found = require_resource_server(id_or_identifier)
    store.delete_resource_server(found.id)
    audit.record("resource_server.delete", "success", origin=origin,
                 details={"identifier": found.identifier})


def own_resources(ctx: ServiceContext) -> set[str]:
    """identityctl's own resources: its issuer (userinfo), its /mcp and its admin API when
    served."""
    own = {ctx.config.issuer}
    if ctx.config.mcp.enabled:
        own.add(ctx.config.mcp_audience)
    if ctx.config.admin.enabled:
        own.add(ctx.config.admin_audience)
    return own


def check_requested_resources(ctx: ServiceContext, resources: Sequence[str],
                              scope: Sequence[str]) -> None:
    """Refuse (``invalid_target`` / ``invalid_scope``) resources this service does not issue
    tokens for, and scopes a requested resource server does not define."""
    if not resources:  # PERF: most requests name no resource: no read
        return
    check_targets(resources, known=_known(ctx, resources), scope=scope)


def audience_for(ctx: ServiceContext, requested: Sequence[str], *,
                 authorized: Sequence[str], scope: Sequence[str]) -> list[str]:
    """The audience of a token a grant issues (``token_audience``): resources named at the
    token endpoint that the authorization did not name are checked as a request's are."""
    if not authorized:
        check_requested_resources(ctx, requested, scope)
    return token_audience(requested, authorized=authorized, issuer=ctx.config.issuer)


def scope_for_resources(ctx: ServiceContext, resources: Sequence[str],
                        scope: Sequence[str]) -> tuple[str, ...]:
    """``scope`` without what the requested resource servers no longer define (a refresh of
    a grant made before a server lost scopes); a server removed since is ``invalid_target``."""
    if not resources:
        return tuple(scope)
    return scope_within_targets(resources, known=_known(ctx, resources), scope=scope)


def _known(ctx: ServiceContext, resources: Sequence[str]) -> dict[str, frozenset[str] | None]:
    own = own_resources(ctx)
    known: dict[str, frozenset[str] | None] = dict.fromkeys(own)
    others = [resource for resource in resources if resource not in own]
    if others:
        known.update({server.identifier: frozenset(server.scopes)
                      for server in store.find_resource_servers(others)})
    return known


def registrable_scopes(ctx: ServiceContext) -> tuple[str, ...]:
    """What a client that describes itself may ask for: oauth.registration_scopes and every
    registered resource server's scopes (a token for a resource server carries its scopes
    only; who may grant them is up to roles)."""
    # RESERVED_SCOPES: not even from a server stored before they were refused.
    extra = sorted(store.all_scopes().difference(ctx.config.oauth.registration_scopes,
                                                 RESERVED_SCOPES))
    return (*ctx.config.oauth.registration_scopes, *extra)
