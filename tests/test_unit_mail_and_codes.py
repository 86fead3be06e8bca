"""What the service e-mails (identityctl.mail) and its one-time and recovery codes
(security/codes.py), without a server."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from identityctl.config import Config, EmailConfig
from identityctl.mail import as_email, compose
from identityctl.security import codes
from identityctl.services import throttle
from identityctl.services.context import ServiceContext
from identityctl.services.delivery import mail as delivery
from identityctl.store.directory import UserRecord

KEY = b"k" * 32


def test_a_message_has_text_and_html_saying_the_same_in_the_persons_language() -> None:
    mail = compose("recovery_code", to="ada@example.com", language="de", product="Shop",
                   code="123456", count=10)
    assert mail.subject == "Ihr Shop-Code: 123456"
    assert "\n123456\n" in mail.text and "10 Minuten" in mail.text
    assert "123456" in mail.html and 'lang="de" dir="ltr"' in mail.html


def test_a_message_counts_in_the_persons_plural_forms_and_writes_right_to_left_in_arabic(
        ) -> None:
    one = compose("verify_email", to="a@example.com", language="en", product="Shop",
                  code="123456", count=1)
    assert "It works for 1 minute." in one.text
    polish = compose("verify_email", to="a@example.com", language="pl", product="Shop",
                     code="123456", count=5)
    assert "5 minut." in polish.text
    arabic = compose("recovery_code", to="a@example.com", language="ar", product="Shop",
                     code="123456", count=2)
    assert "لمدة دقيقتين" in arabic.text and 'lang="ar" dir="rtl"' in arabic.html


def test_an_invitation_says_until_when_as_the_persons_language_writes_a_date() -> None:
    until = datetime(2026, 3, 4, 15, 6, tzinfo=UTC)
    german = compose("invite", to="a@example.com", language="de", product="Shop",
                     username="ada", link="https://id/account/enrol#t", expires=until)
    assert "bis 04.03.2026, 15:06:00 UTC" in german.text
    english = compose("invite", to="a@example.com", language="en", product="Shop",
                      username="ada", link="https://id/account/enrol#t", expires=until)
    assert "until Mar 4, 2026, 3:06:00\u202fPM UTC" in english.text


def test_what_a_person_typed_is_escaped_in_the_html() -> None:
    mail = compose("passkey_added", to="a@example.com", language="en", product="Shop",
                   name="<script>x</script>", how="account", account_url="https://id/account")
    assert "<script>" not in mail.html and "&lt;script&gt;" in mail.html
    assert "on your account page" in mail.text


def person(**attributes: str) -> UserRecord:
    return UserRecord(id="u1", username="ada", user_handle="h1", attributes=attributes,
                      user_type_id="t1", user_type="person", ou_id="o1", password_hash=None,
                      status="active", created_at=0.0, updated_at=0.0)


@pytest.mark.parametrize(("attributes", "subject", "html"), [
    ({"locale": "ja"}, "identityctl アカウントにパスキーが追加されました", 'lang="ja" dir="ltr"'),
    ({"locale": "ar"}, "تمت إضافة مفتاح مرور إلى حسابك في identityctl", 'lang="ar" dir="rtl"'),
    ({"locale": "pt-PT"}, "Uma chave de acesso foi adicionada à sua conta identityctl",
     'lang="pt-BR" dir="ltr"'),
    ({"locale": "tlh"}, "A passkey was added to your identityctl account", 'lang="en" dir="ltr"'),
    ({}, "A passkey was added to your identityctl account", 'lang="en" dir="ltr"'),
])
def test_a_notice_about_an_account_is_in_the_persons_locale_and_english_without_one(
        monkeypatch: pytest.MonkeyPatch, attributes: dict[str, str], subject: str,
        html: str) -> None:
    queued: list[dict[str, Any]] = []
    monkeypatch.setattr(delivery.recovery_store, "verified_address",
                        lambda user_id: "ada@example.com")
    monkeypatch.setattr(delivery.outbox, "enqueue",
                        lambda **message: queued.append(message["payload"]))
    context = ServiceContext.for_config(Config(email=EmailConfig(smtp_host="smtp.example")))
    delivery.notify(context, person(**attributes), "passkey_added", name="Laptop",
                    how="account")
    [payload] = queued
    assert payload["header"] == subject
    assert html in payload["html"]


def test_a_code_a_page_sends_is_in_the_persons_locale_else_in_the_pages_language() -> None:
    assert delivery.language_of(person(locale="ja"), "de") == "ja"
    assert delivery.language_of(person(), "de") == "de"
    assert delivery.language_of(None, "fr") == "fr"
    assert delivery.language_of(person(locale="tlh"), "de") == "en"


def test_a_repeat_of_a_queued_message_has_the_same_message_id() -> None:
    mail = compose("test", to="a@example.com", language="en", product="Shop", server="smtp")
    first = as_email(mail, sender="Shop <id@shop.example>", message_id="m1")
    again = as_email(mail, sender="Shop <id@shop.example>", message_id="m1")
    assert first["Message-ID"] == again["Message-ID"] == "<m1@shop.example>"
    assert first.get_body(preferencelist=("html",)) is not None


def test_a_code_matches_only_for_the_binding_it_was_made_for() -> None:
    code = codes.new_code()
    assert len(code) == codes.CODE_DIGITS and code.isdigit()
    stored = codes.digest(KEY, binding="execution-1", code=code)
    assert codes.matches(KEY, binding="execution-1", code=code, expected=stored)
    assert not codes.matches(KEY, binding="execution-2", code=code, expected=stored)
    assert not codes.matches(b"x" * 32, binding="execution-1", code=code, expected=stored)


def test_recovery_codes_are_read_however_they_are_typed() -> None:
    made = codes.new_recovery_code()
    assert len(made) == 14 and made.count("-") == 2
    assert not set(made.replace("-", "")) - set(codes.RECOVERY_ALPHABET)
    assert codes.normalize_recovery_code(made.lower().replace("-", " ")) == made


def test_code_mails_count_an_ipv6_64_as_one_requester_and_any_address_in_a_short_key(
        ) -> None:
    """The requester's share: one host holds a whole IPv6 /64, so its addresses are one
    requester; IPv4 addresses are each their own. A 254-character address keys as short as
    any (a key fits the store's 255 characters), and its spellings in case are one address."""
    share = {address: throttle.code_mail_keys("ada@example.com", address)[0]
             for address in ("2001:db8:1:2::1", "2001:db8:1:2:ffff::9", "2001:db8:1:3::1",
                             "192.0.2.1", "192.0.2.2")}
    assert share["2001:db8:1:2::1"] == share["2001:db8:1:2:ffff::9"]
    assert len(set(share.values())) == 4
    longest = "a" * 64 + "@" + ".".join(["b" * 61] * 3) + ".abc"
    assert len(longest) == 254
    keys = throttle.code_mail_keys(longest, "2001:db8:1:2::1")
    assert all(len(key) < 100 for key in keys) and "@" not in "".join(keys)
    assert keys == throttle.code_mail_keys(longest.upper(), "2001:db8:1:2::1")
    assert keys[1] == throttle.code_mail_keys(longest, "192.0.2.1")[1]  # the one ceiling
