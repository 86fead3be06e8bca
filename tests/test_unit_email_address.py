"""The one rule for an e-mail address (security/email_address.py), without a server: exactly
one RFC 5321/5322 mailbox of at most 254 characters, nothing a mail header could be split
with; what the subject of a sent message keeps (identityctl.mail); and, in the store (SQLite
and PostgreSQL), a proven address leaving every account that only held a copy of it."""

from __future__ import annotations

import pytest

from identityctl.errors import InvalidField
from identityctl.mail import compose
from identityctl.security.email_address import address_or_none, checked_address
from identityctl.store import db
from identityctl.store import directory as directory_store
from identityctl.store import recovery as recovery_store
from identityctl.store.models import OrganizationUnit, UserType

LONG_LOCAL = "a" * 64  # RFC 5321 §4.5.3.1.1: the longest local part


@pytest.mark.parametrize(("given", "kept"), [
    ("ada@example.com", "ada@example.com"),
    ("Ada.Lovelace+id@Example.COM", "Ada.Lovelace+id@example.com"),  # the domain in lower case
    ("ada@xn--bcher-kva.example", "ada@bücher.example"),  # IDNA shown as Unicode
    ("ada@example.test", None),  # RFC 2606: a team's trial with a local mail sink
    (f"{LONG_LOCAL}@{'b' * 63}.{'c' * 63}.{'d' * 57}.com", None),  # exactly 254: kept as is
])
def test_one_address_is_taken_and_normalised(given: str, kept: str | None) -> None:
    assert checked_address(given) == (kept or given)


@pytest.mark.parametrize("given", [
    "x@y\r\nBcc: a@b.example",           # a header of its own
    "ada@example.com\n",                  # a trailing line break
    "ada@example.com, eve@example.com",   # a list
    "ada@example.com;eve@example.com",
    "Ada <ada@example.com>",              # a display name
    '"ada lovelace"@example.com',         # a quoted local part
    "ada@[127.0.0.1]",                    # a domain literal
    "ada@localhost",                      # no dot
    "ada@corp.local",                     # special-use domains
    "ada\x00@example.com",                # control characters
    "ada\t@example.com",
    "ada@example.com\u202e",              # a bidirectional override
    " ada@example.com",                   # nothing around it
    "@example.com",
    "ada@",
    "",
    f"{LONG_LOCAL}a@example.com",         # a 65-character local part
    "a" * 240 + "@example.com",           # 252 characters, its local part too long
    "a@" + "b" * 300 + ".com",            # over 254 characters
])
def test_anything_else_is_refused_naming_the_field(given: str) -> None:
    with pytest.raises(InvalidField) as refused:
        checked_address(given, field="attributes.email")
    assert refused.value.code == "invalid_email"
    assert "attributes.email" in str(refused.value)
    assert address_or_none(given) is None


def test_a_value_that_is_not_text_is_refused() -> None:
    for given in (None, 42, ["ada@example.com"]):
        with pytest.raises(InvalidField):
            checked_address(given)


def test_the_subject_kept_after_sending_has_no_code() -> None:
    mail = compose("recovery_code", to="ada@example.com", language="de", product="Shop",
                   code="322590", count=10)
    assert "322590" in mail.subject
    assert "322590" not in mail.kept_subject and mail.kept_subject.startswith("Ihr Shop-Code")
    notice = compose("passkey_added", to="ada@example.com", language="en", product="Shop",
                     name="Laptop", how="account", account_url="https://id/account")
    assert notice.kept_subject == notice.subject


def test_a_proven_address_leaves_every_other_account_holding_it_and_only_those(
        store_url: str) -> None:
    kind = UserType.create(name="person", ou=OrganizationUnit.create(handle="default",
                                                                     name="Default"))

    def holder(name: str, **attributes: str) -> str:
        return directory_store.create_user(username=name, user_handle=name, user_type_id=kind.id,
                                           ou_id=kind.ou_id, attributes=attributes,
                                           password_hash=None).id

    earlier = holder("earlier", email="ow_ner@example.com")
    with db.transaction():
        recovery_store.mark_verified(earlier, "ow_ner@example.com")
    owner = holder("owner", email="Ow_ner@Example.com")
    copies = [holder("shouting", email="OW_NER@example.com"),
              holder("spaced", email="ow_ner@example.com", given_name="Ow")]
    kept = {holder("wildcard", email="owXner@example.com"): "owXner@example.com",  # _ is no joker
            holder("longer", email="ow_ner@example.com.evil"): "ow_ner@example.com.evil",
            holder("named", given_name="ow_ner@example.com"): None}
    with db.transaction():
        left = recovery_store.mark_verified(owner, "Ow_ner@Example.com")
    assert sorted(left) == sorted([earlier, *copies])
    assert recovery_store.user_with_verified_address("OW_NER@example.com") == owner
    assert recovery_store.verified_address(earlier) is None
    for user_id in [earlier, *copies]:
        assert "email" not in directory_store.get_user(user_id).attributes
    assert directory_store.get_user(copies[1]).attributes == {"given_name": "Ow"}
    for user_id, address in kept.items():
        assert directory_store.get_user(user_id).attributes.get("email") == address
    assert directory_store.get_user(owner).attributes["email"] == "Ow_ner@Example.com"
