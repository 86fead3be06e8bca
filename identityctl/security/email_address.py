"""The one rule for an e-mail address, wherever one comes in: every user attribute ``email``
(sign-up and attribute updates, in flows and the CLI: ``services.directory``), an upstream
identity provider's claim, ``identityctl email test``; and a queued message's recipient is
checked again before it is sent.

An address is exactly one RFC 5321/5322 mailbox, ``name@example.com``: nothing around it (no
display name, no second address after a comma, no line break that would become a header of
its own), at most 254 characters (RFC 5321 §4.5.3.1.3, the angle brackets aside) of which
at most 64 before the @, no control or bidirectional-override characters, no quoted local
part, no IP address for a domain, no special-use domain (``.local``, ``localhost``,
``.invalid``...) but ``.test`` (RFC 2606), which teams trying the service with a local mail
sink use. The syntax is `email-validator`'s; its DNS check is never run (no lookups while a
person waits).
"""

from __future__ import annotations

from identityctl.errors import InvalidField

#: The user attribute that holds a person's address.
EMAIL = "email"
#: RFC 5321 §4.5.3.1.3: a path is at most 256 octets, angle brackets included.
MAX_LENGTH = 254
INVALID_EMAIL = "invalid_email"


def checked_address(value: object, *, field: str = EMAIL) -> str:
    """``value`` as one e-mail address, normalised (the domain in lower case and Unicode
    NFC, the local part as given); :class:`InvalidField` ``invalid_email`` naming ``field``
    when it is not one."""
    if not isinstance(value, str):
        raise InvalidField(field, "must be an e-mail address such as name@example.com",
                           code=INVALID_EMAIL)
    if len(value) > MAX_LENGTH:  # said before any parsing: no work for a huge value
        raise InvalidField(field, f"is {len(value)} characters long; an e-mail address has "
                           f"at most {MAX_LENGTH}", code=INVALID_EMAIL)
    # PERF: imported at the first address (compiling its patterns took ~40 ms of every start).
    from email_validator import EmailNotValidError, validate_email

    try:
        valid = validate_email(value, check_deliverability=False, allow_display_name=False,
                               allow_quoted_local=False, allow_domain_literal=False,
                               allow_empty_local=False, strict=True,
                               test_environment=True)
    except EmailNotValidError as refused:
        raise InvalidField(field, f"must be one e-mail address such as name@example.com "
                           f"({refused})", code=INVALID_EMAIL) from None
    return valid.normalized


def address_or_none(value: object) -> str | None:
    """``value`` normalised when it is one e-mail address (:func:`checked_address`), else
    None: for what arrives from elsewhere (an upstream claim, a row queued long ago) and is
    then simply not used as an address."""
    try:
        return checked_address(value)
    except InvalidField:
        return None
