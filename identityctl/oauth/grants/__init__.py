"""The token endpoint's grants, one module per RFC grant (in the style of Authlib's grant
classes and fosite's handlers): each keeps its RFC's checks together, as plain functions over
plain values (no HTTP, no SQL). The service (services/oauth/token_endpoint.py) reads what a
grant needs, calls its ``validate_*`` and then writes what it issues."""
