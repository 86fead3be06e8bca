"""Related Origin Requests (WebAuthn L3 §5.11): passkey.related_origins is checked at start,
published at /.well-known/webauthn, and accepted by the ceremonies like allowed_origins."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from identityctl.config import parse_config, registrable_label
from identityctl.errors import ConfigError
from tests.conftest import Service, deployment_with, in_process

SIX_SITES = ["https://shop.example.com", "https://second.co.uk", "https://other.de",
             "https://fourth.org", "https://fifth.net", "https://sixth.io"]


def related(origins: list[str]) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        parse_config({"passkey": {"rp_id": "example.com", "related_origins": origins,
                                  "allowed_origins": ["https://example.com"]}})
    return caught.value


def test_the_label_is_the_registrable_domain_without_its_public_suffix() -> None:
    assert registrable_label("shop.example.co.uk") == "example"
    assert registrable_label("login.example.com") == "example"
    # The list's private section counts: each github.io site is its own registrable domain.
    assert registrable_label("team.github.io") == "team"
    assert registrable_label("localhost") is None
    assert registrable_label("127.0.0.1") is None


def test_at_most_five_labels_and_the_sixth_is_named() -> None:
    problem = related(SIX_SITES)
    assert problem.key == "passkey.related_origins[5]"
    assert "sixth" in problem.problem and "at most 5" in problem.problem


def test_origins_sharing_a_label_count_once() -> None:
    # example.com, example.co.uk and example.de are one label: "example".
    config = parse_config({"passkey": {"rp_id": "example.com",
                                       "allowed_origins": ["https://example.com"],
                                       "related_origins": [
        "https://example.co.uk", "https://example.de", "https://a.example.fr",
        "https://other.de", "https://fourth.org", "https://fifth.net",
        "https://sixth.example.org"]}})
    assert len(config.passkey.related_origins) == 7


@pytest.mark.parametrize(("origin", "problem"), [
    ("http://example.org", "plain http"),
    ("https://example.org/login", "not an origin"),
    ("example.org", "not an origin"),
    ("ftp://example.org", "not an origin"),
    # Only the spelling a browser sends: any other would match no ceremony, or, read
    # leniently by the Origin check, another site (a user part hides the real host).
    ("https://user@evil.example", "not an origin as browsers write it"),
    ("HTTPS://Shop.Example.org", "not an origin as browsers write it"),
    ("https://example.org/", "not an origin as browsers write it"),
    ("https://example.org:443", "not an origin as browsers write it"),
    ("https://example.org.", "no valid host name"),
    ("https://b\u00fccher.example", "no valid host name"),
    ("https://*.example.org", "no valid host name"),
    ("https://exa mple.org", "no valid host name"),
])
def test_a_bad_origin_names_its_key(origin: str, problem: str) -> None:
    error = related(["https://fine.example.net", origin])
    assert error.key == "passkey.related_origins[1]"
    assert problem in error.problem


def test_loopback_http_is_for_development() -> None:
    config = parse_config({"passkey": {"related_origins": [
        "http://a.localhost:8091", "http://127.0.0.2:8090"]}})
    assert config.passkey.accepted_origins == ("http://localhost:8090",
                                               "http://a.localhost:8091",
                                               "http://127.0.0.2:8090")


RELATED = 'related_origins = ["https://shop.example.org", "http://a.localhost:9"]'


@pytest.fixture
def with_related(tmp_path: Path) -> Iterator[Service]:
    yield from deployment_with(tmp_path, {"related_origins = []": RELATED})


def test_the_list_is_served_at_the_well_known_address(with_related: Service) -> None:
    answer = with_related.get("/.well-known/webauthn")
    assert answer.status_code == 200
    assert answer.headers["Content-Type"].startswith("application/json")
    assert "public" in answer.headers["Cache-Control"]
    assert answer.json() == {"origins": ["https://shop.example.org", "http://a.localhost:9"]}
    # A related origin's pages may drive the browser endpoints, as an allowed origin's may.
    started = with_related.post("/flow/execute", {"applicationId": "nobody"},
                                headers={"Origin": "https://shop.example.org"})
    assert started.json()["code"] != "cross_origin_refused"
    refused = with_related.post("/flow/execute", {"applicationId": "nobody"},
                                headers={"Origin": "https://elsewhere.example.org"})
    assert refused.json()["code"] == "cross_origin_refused"


def test_config_check_says_what_each_related_origin_needs(with_related: Service) -> None:
    result = in_process("config", "check", "--json", config=with_related.config_path)
    notes = " ".join(json.loads(result.output)["notes"])
    assert "https://shop.example.org may use the passkeys of rp_id 'localhost'" in notes
    assert "https://localhost/.well-known/webauthn" in notes
    assert "Chrome and Edge 128" in notes and "Safari 18" in notes and "Firefox" in notes
