"""Passkeys: the rules around WebAuthn registration, sign-in and credential administration.

Shared by the atomic REST API, the flow engine and the CLI. Import the module you need:

- ``ceremonies``: the registration and authentication ceremonies (start/finish
  registration, start_authentication, start_named_authentication, finish_authentication),
  their records (CeremonyStart, RegisteredCredential, AuthenticatedUser) and the steps they
  share (relying party check, credential names, decoys).
- ``sessions``: a ceremony's server-side state in the store under the hash of its session
  token (start, open, consume; ``ceremony_scope``, what a start supersedes).
- ``enrolment``: who may enrol a passkey (the bearer token a registration needs).
- ``admin``: list, rename and delete a user's credentials (the CLI's administration).
- ``attestation``: which authenticators may register (AAGUID lists, FIDO metadata) and
  loading the FIDO metadata.
"""
