"""What the service e-mails (identityctl.mail) and its one-time and recovery codes
(security/codes.py), without a server."""

from __future__ import annotations

from identityctl.mail import as_email, compose
from identityctl.security import codes

KEY = b"k" * 32


def test_a_message_has_text_and_html_saying_the_same_in_the_persons_language() -> None:
    mail = compose("recovery_code", to="ada@example.com", language="de", product="Shop",
                   code="123456", minutes="10")
    assert mail.subject == "Ihr Shop-Code: 123456"
    assert "\n123456\n" in mail.text and "10 Minuten" in mail.text
    assert "123456" in mail.html and 'lang="de"' in mail.html


def test_what_a_person_typed_is_escaped_in_the_html() -> None:
    mail = compose("passkey_added", to="a@example.com", language="en", product="Shop",
                   name="<script>x</script>", how="account", account_url="https://id/account")
    assert "<script>" not in mail.html and "&lt;script&gt;" in mail.html
    assert "on your account page" in mail.text


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
