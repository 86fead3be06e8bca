"""What the service e-mails people: each message's subject, plain text and HTML, in the
person's language and with the product's name and colour. Pure: no SMTP, no store.

Every text is English in :data:`MESSAGES` and translated through the same catalogs as the
pages (``identityctl/i18n``). The HTML part says the same as the text part, nothing more.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from datetime import datetime
from email.message import EmailMessage
from email.utils import formatdate

from identityctl import i18n

#: kind -> (subject, paragraphs); ``{code}`` is shown on a line of its own, ``{count}``
#: picks the form of a counted text (i18n), a datetime is written as the language writes it.
MESSAGES: dict[str, tuple[str, tuple[str, ...]]] = {
    "verify_email": ("Your {product} code: {code}", (
        "Enter this code to confirm your e-mail address:",
        "{code}",
        "It works for {count} minutes. If you did not sign up at {product}, ignore this "
        "message.")),
    "confirm_email": ("Your {product} code: {code}", (
        "Enter this code on your account page to confirm this e-mail address:",
        "{code}",
        "It works for {count} minutes. If you did not ask for it, ignore this message: "
        "without the code, nothing changes.")),
    "email_changed": ("The e-mail address of your {product} account was changed", (
        "Your account's e-mail address is {address} from now on; mail about your account "
        "no longer comes to this address.",
        "If this was not you, sign in and check your account page: {account_url}")),
    "recovery_code": ("Your {product} code: {code}", (
        "Someone, hopefully you, asked to get back into your {product} account.",
        "Enter this code on the page where you asked:",
        "{code}",
        "It works for {count} minutes, on that page only. If it was not you, ignore this "
        "message: without the code nobody gets in.")),
    "passkey_added": ("A passkey was added to your {product} account", (
        "A passkey named \"{name}\" was added to your account ({how}).",
        "If this was not you, sign in and delete it on your account page: {account_url}")),
    "passkey_removed": ("A passkey was removed from your {product} account", (
        "The passkey named \"{name}\" was removed from your account.",
        "If this was not you, sign in and check your account page: {account_url}")),
    "totp_added": ("An authenticator app was set up for your {product} account", (
        "From now on, signing in with your password also asks for a code from your "
        "authenticator app.",
        "If this was not you, sign in and check your account page: {account_url}")),
    "totp_removed": ("The authenticator app was removed from your {product} account", (
        "Signing in with your password no longer asks for a code from an authenticator app.",
        "If this was not you, sign in and check your account page: {account_url}")),
    "invite": ("You are invited to {product}", (
        "An account named {username} is waiting for you at {product}.",
        "Open this link on the device you want to sign in with, and create a passkey there. "
        "It works once, until {expires}:",
        "{link}",
        "A passkey lets you sign in with your fingerprint, face or screen lock instead of a "
        "password.")),
    "test": ("Test message from {product}", (
        "This message shows that {product} can send e-mail through {server}.",)),
}

#: Values that open something (a one-time code, an enrolment link): never kept once sent.
SECRETS = ("code", "link")
#: What stands for a secret in the subject the outbox keeps.
BLANKED = "••••••"

#: How a passkey came to be, as the notice says it.
HOW = {"account": "on your account page", "recovery": "while recovering your account",
       "invite": "with an invitation link", "sign_up": "when you signed up",
       "sign_in": "when you signed in"}


@dataclass(frozen=True, slots=True)
class Mail:
    """One message to one address, ready to queue."""

    to: str
    subject: str
    text: str
    html: str
    #: The subject with every secret blanked: what the outbox shows and keeps once sent.
    kept_subject: str = ""


def compose(kind: str, *, to: str, language: str, product: str, accent: str = "#3451b2",
            **values: str | int | datetime) -> Mail:
    """The message ``kind`` for ``to``, in ``language``."""
    subject, paragraphs = MESSAGES[kind]
    if "how" in values:
        how = str(values["how"])
        values["how"] = i18n.translate(language, HOW.get(how, how))
    fill = {"product": product, **values}
    lines = [i18n.translate(language, paragraph, **fill) for paragraph in paragraphs]
    colour = html.escape(accent)
    parts = []
    for line in lines:
        escaped = html.escape(line)
        if line == values.get("code"):
            parts.append(f'<p style="font-size:1.5em;font-family:monospace;'
                         f'letter-spacing:0.15em;color:{colour}">{escaped}</p>')
        elif line == values.get("link"):
            parts.append(f'<p><a href="{escaped}" style="color:{colour}">{escaped}</a></p>')
        else:
            parts.append(f"<p>{escaped}</p>")
    body = "".join(parts)
    page = (f'<!doctype html><html lang="{html.escape(language)}" '
            f'dir="{i18n.direction(language)}"><body style="font-family:'
            f'system-ui,sans-serif;color:#1b1f2a;max-width:36rem">'
            f'<p style="font-weight:600;color:{colour}">{html.escape(product)}</p>'
            f"{body}</body></html>")
    blanked = {**fill, **{name: BLANKED for name in SECRETS if name in fill}}
    return Mail(to=to, subject=i18n.translate(language, subject, **fill),
                text="\n\n".join(lines) + "\n", html=page,
                kept_subject=i18n.translate(language, subject, **blanked))


def as_email(mail: Mail, *, sender: str, message_id: str) -> EmailMessage:
    """``mail`` as an RFC 5322 message: plain text with an HTML alternative.

    ``message_id`` is the outbox message's id: a repeat after a crash carries the same
    Message-ID, so mail systems can tell it is the same message."""
    message = EmailMessage()
    message["From"] = sender
    message["To"] = mail.to
    message["Subject"] = mail.subject
    message["Date"] = formatdate(localtime=False)
    domain = sender.rsplit("@", 1)[-1].strip(" >") or "identityctl"
    message["Message-ID"] = f"<{message_id}@{domain}>"
    message["Auto-Submitted"] = "auto-generated"  # RFC 3834: no auto-replies, please
    message.set_content(mail.text)
    message.add_alternative(mail.html, subtype="html")
    return message
