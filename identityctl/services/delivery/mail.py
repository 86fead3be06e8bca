"""E-mail: queued in the outbox with the change that causes it, sent over SMTP by the
deliveries thread (services/delivery/outbox.py), once.

A message is rendered when it is queued (``identityctl.mail``), so a retry sends exactly
what was meant then; once sent, its body and its subject (which may hold a one-time code)
are dropped from the store, and only the subject with its secrets blanked stays for the
outbox view.

Mail speaks for the deployment: it looks like an application only when an administrator
made that application. A client that described itself (registered itself, or a client
metadata document) chose its own name, and a stranger's words never reach a person's inbox
from the deployment's own sender.
"""

from __future__ import annotations

import contextlib
import smtplib
from datetime import datetime
from email.message import EmailMessage
from typing import Any

from identityctl import i18n
from identityctl.config import Config
from identityctl.errors import BadGateway, BadRequest, InvalidField, NotFound
from identityctl.mail import Mail, as_email, compose
from identityctl.security.email_address import address_or_none, checked_address
from identityctl.services import catalog, outbound
from identityctl.services.clients.client import client_of
from identityctl.services.context import ServiceContext
from identityctl.services.outbound import DeliveryFailed
from identityctl.store import outbox
from identityctl.store import recovery as recovery_store
from identityctl.store.directory import UserRecord
from identityctl.store.outbox import OutboxEntry, OutboxRecord
from identityctl.theme import css_values
from identityctl.theme.branding import page_branding

#: The outbox kind of e-mail.
EMAIL = "email"
#: SMTP replies that no retry will change (RFC 5321 §4.2.1: 5yz is a permanent failure).
PERMANENT = 500


def require_mail(ctx: ServiceContext) -> None:
    if not ctx.config.email.enabled:
        raise BadRequest("This deployment sends no e-mail: set email.smtp_host in the "
                         "configuration.", code="email_not_configured")


def language_of(user: UserRecord | None, fallback: str = i18n.DEFAULT) -> str:
    """The language to write to a person in: their ``locale`` attribute, else the page's."""
    wanted = str((user.attributes if user else {}).get("locale") or "")
    return i18n.choose(ui_locales=wanted) if wanted else fallback


def brand_of(application: dict[str, Any]) -> dict[str, str]:
    """How mail about ``application`` looks: its theme's product name (else the
    application's name) and primary colour, as the hosted page shows them; the deployment's
    own look (no brand) for a client that described itself."""
    if client_of(application).described_itself:
        return {}
    try:
        theme = catalog.themes.require_theme(application.get("themeId") or "default")["theme"]
    except NotFound:
        theme = {}
    brand = {"product": page_branding(theme).get("productName") or application["name"]}
    primary = ((theme.get("colorSchemes") or {}).get("light") or {}).get("primary")
    with contextlib.suppress(InvalidField):  # a hand-edited colour: the default one
        brand["accent"] = css_values.color(primary, "primary")
    return brand


def queue(ctx: ServiceContext, kind: str, *, to: str, language: str = i18n.DEFAULT,
          send: bool = True, brand: dict[str, str] | None = None,
          **values: str | int | datetime) -> None:
    """(In the caller's transaction.) Queue message ``kind`` for ``to``, looking like
    ``brand`` (:func:`brand_of`; else the deployment's name); ``send=False`` does the same
    work without sending anything (an answer that must not tell whether an address is
    known)."""
    mail = compose(kind, to=to, language=language,
                   **{"product": ctx.config.passkey.rp_name, **(brand or {})}, **values)
    outbox.enqueue(kind=EMAIL, target=to, send=send and ctx.config.email.enabled,
                   payload={"subject": mail.kept_subject, "header": mail.subject,
                            "text": mail.text, "html": mail.html})


def notify(ctx: ServiceContext, user: UserRecord, kind: str,
           **values: str | int | datetime) -> None:
    """(In the caller's transaction.) Tell ``user`` about a change to their account, at
    their verified address; nobody is told at an address they never proved."""
    address = recovery_store.verified_address(user.id)
    if address is None or not ctx.config.email.enabled:
        return
    queue(ctx, kind, to=address, language=language_of(user),
          account_url=f"{ctx.config.base_url}/account", **values)


def deliver(ctx: ServiceContext, message: OutboxRecord) -> dict[str, Any]:
    """Send one queued message; what of its payload to keep once sent (the subject with its
    secrets blanked). A message that cannot be sent as it is (not one address, a header
    with a line break) is refused for good: no retry would change it."""
    payload = message.payload
    if address_or_none(message.target) is None:
        raise DeliveryFailed(f"{message.target!r} is not one e-mail address", permanent=True)
    # A payload without "header" carries its real subject (code and all) in "subject": it
    # is sent as it is and keeps none.
    header = payload.get("header")
    mail = Mail(to=message.target, subject=header or payload["subject"], text=payload["text"],
                html=payload["html"])
    try:
        written = as_email(mail, sender=ctx.config.email.sender, message_id=message.id)
    except ValueError as malformed:
        raise DeliveryFailed(f"the message cannot be written: {malformed}",
                             permanent=True) from None
    send(ctx.config, written)
    return kept_once_done(payload)


def kept_once_done(payload: dict[str, Any]) -> dict[str, Any]:
    """What of a mail's payload stays once it is sent or given up: the subject with its
    secrets blanked, never a body or a code."""
    return {"subject": payload.get("subject", "") if payload.get("header") else ""}


def send(config: Config, message: EmailMessage) -> None:
    """Hand ``message`` to the configured SMTP server within ``deliveries.timeout`` seconds
    in all, whatever the server does (:class:`DeliveryFailed` when it does not take it)."""
    email = config.email
    timeout = config.deliveries.timeout
    try:
        with outbound.deadline(timeout):  # every socket operation: only the time left
            if email.security == "tls":
                smtp: smtplib.SMTP = smtplib.SMTP_SSL(email.smtp_host, email.smtp_port,
                                                      timeout=timeout,
                                                      context=outbound.tls_context())
            else:
                smtp = outbound.SMTP(email.smtp_host, email.smtp_port, timeout=timeout)
            with smtp:
                if email.security == "starttls":
                    smtp.starttls(context=outbound.tls_context())
                if email.username:
                    smtp.login(email.username, _password(config))
                smtp.send_message(message)
    except smtplib.SMTPResponseException as refused:
        raise DeliveryFailed(f"{email.smtp_host} answered {refused.smtp_code} "
                          f"{_text(refused.smtp_error)}",
                          permanent=refused.smtp_code >= PERMANENT) from None
    except smtplib.SMTPRecipientsRefused as refused:
        codes = [code for code, _ in refused.recipients.values()]
        raise DeliveryFailed(f"{email.smtp_host} refused the recipient ({codes})",
                          permanent=all(code >= PERMANENT for code in codes)) from None
    except (smtplib.SMTPException, OSError) as failure:
        raise DeliveryFailed(f"{email.smtp_host}:{email.smtp_port}: {failure}") from None


def _password(config: Config) -> str:
    try:
        return config.resolve(config.email.password_file).read_text().strip()
    except OSError as failure:
        raise DeliveryFailed(f"email.password_file cannot be read: {failure}") from None


def _text(error: bytes | str) -> str:
    return error.decode(errors="replace") if isinstance(error, bytes) else str(error)


def send_test(ctx: ServiceContext, to: str) -> None:
    """`identityctl email test`: a message sent now (not queued), so a mistake shows at once."""
    require_mail(ctx)
    to = checked_address(to, field="to")
    email = ctx.config.email
    mail = compose("test", to=to, language=i18n.DEFAULT, product=ctx.config.passkey.rp_name,
                   server=f"{email.smtp_host}:{email.smtp_port}")
    try:
        send(ctx.config, as_email(mail, sender=email.sender, message_id=f"test-{id(mail)}"))
    except DeliveryFailed as failure:
        raise BadGateway(str(failure), code="email_not_sent") from None


def recent(limit: int = 50) -> list[OutboxEntry]:
    return outbox.recent(kind=EMAIL, limit=limit)
