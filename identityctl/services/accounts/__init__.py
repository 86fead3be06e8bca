"""What a person's account holds and how they prove it is theirs: passkeys (``passkeys/``),
e-mail codes, recovery, upstream providers (``federation``, ``upstream``), browser sessions,
the sign-in's completion (``signin``) and the self-service of /account (``account``).

Below the flows and the OAuth endpoints, which call it; above the catalog, the clients, the
directory and delivery, which it calls.
"""
