"""The OAuth 2.0 / OpenID Connect provider's endpoints, one module per endpoint group.

- ``discovery``: the JWKS and the provider metadata.
- ``authorization``: ``/oauth2/authorize`` and the hand-off from the hosted sign-in.
- ``pushed_requests``: pushed authorization requests (RFC 9126).
- ``device``: the device authorization grant (RFC 8628).
- ``request_checks``: which checks run at authorize, the push and the device request.
- ``token_endpoint``: ``/oauth2/token``, a handler per grant of the registry
  (``identityctl.oauth.grants``, where the grants' rules are).
- ``registration``: dynamic client registration (RFC 7591).
- ``resource_access``: userinfo and introspection (RFC 7662).
- ``logout``: RP-Initiated Logout.

Clients, their authentication, grants, revocation and the bearer check are the room below
(``services.clients``). Protocol rules live in ``identityctl.oauth`` (pure); these modules
read the store, call the rule, write, and audit. Docs: docs/oauth.md.
"""
