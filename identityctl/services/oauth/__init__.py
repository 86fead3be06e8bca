"""The OAuth 2.0 / OpenID Connect provider's services, one module per endpoint group.

- ``discovery``: the JWKS and the provider metadata.
- ``clients``: client authentication at the token, revocation and introspection endpoints.
- ``authorization``: ``/oauth2/authorize`` and the hand-off from the hosted sign-in.
- ``token_endpoint``: ``/oauth2/token``; the grants' rules are in ``identityctl.oauth.grants``.
- ``revocation``: ending a grant (RFC 7009, and a grant's end on replay or logout).
- ``resource_access``: userinfo and introspection (RFC 7662).
- ``logout``: RP-Initiated Logout.

Protocol rules live in ``identityctl.oauth`` (pure); these modules read the store, call the
rule, write, and audit. Docs: docs/oauth.md.
"""
