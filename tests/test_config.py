"""Configuration: a bad file fails at start naming the file, the key and the problem."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from identityctl.cli.main import app as cli_app
from identityctl.config import load_config, parse_config
from identityctl.errors import ConfigError

ZEROS = "00000000-0000-0000-0000-000000000000"


@pytest.mark.parametrize(
    ("document", "key", "problem"),
    [
        ({"server": {"port": "80"}}, "server.port", "must be of type int"),
        ({"server": {"port": 70000}}, "server.port", "1-65535"),
        ({"server": {"colour": 1}}, "server.colour", "unknown key"),
        ({"server": {"workers": "many"}}, "server.workers", '"auto" (one per core) or a'),
        ({"server": {"workers": 0}}, "server.workers", "greater than 0"),
        ({"server": {"workers": True}}, "server.workers", "must be of type int or str"),
        ({"servr": {}}, "servr", "unknown section"),
        ({"server": {"base_url": "localhost"}}, "server.base_url", "absolute http(s) URL"),
        ({"server": {"trusted_proxies": ["proxy"]}}, "server.trusted_proxies[0]", "not an IP"),
        ({"database": {"url": "mysql://x"}}, "database.url", "sqlite:/// or postgresql://"),
        ({"passkey": {"allowed_origins": ["http://example.com"]}},
         "passkey.allowed_origins[0]", "plain http"),
        ({"passkey": {"rp_id": "example.com", "allowed_origins": ["https://example.org"]}},
         "passkey.allowed_origins[0]", "neither rp_id"),
        ({"passkey": {"rp_id": "example.com", "allowed_origins": ["https://notexample.com"]}},
         "passkey.allowed_origins[0]", "neither rp_id"),
        ({"passkey": {"user_verification": "always"}}, "passkey.user_verification", "one of"),
        ({"passkey": {"algorithms": ["HS256"]}}, "passkey.algorithms[0]", "one of"),
        ({"passkey": {"attestation": "direct", "aaguid_allow": ["not-a-uuid"]}},
         "passkey.aaguid_allow[0]", "is not an AAGUID"),
        ({"passkey": {"attestation": "direct", "aaguid_allow": [ZEROS], "aaguid_deny": [ZEROS]}},
         "passkey.aaguid_deny", "not both"),
        ({"passkey": {"aaguid_deny": [ZEROS]}}, "passkey.aaguid_deny",
         'needs passkey.attestation = "direct" or "enterprise"'),
        ({"passkey": {"attestation": "indirect", "metadata": True}}, "passkey.metadata",
         'needs passkey.attestation = "direct" or "enterprise"'),
        ({"oauth": {"code_ttl": 0}}, "oauth.code_ttl", "greater than 0"),
        ({"mcp": {"enabled": "yes"}}, "mcp.enabled", "must be of type bool"),
        ({"email": {"smtp_host": "smtp.example.com", "from": "nobody"}}, "email.from",
         "must be an address"),
        ({"email": {"security": "ssl"}}, "email.security", "one of"),
        ({"email": {"sender": "a@example.com"}}, "email.sender", "unknown key"),
        ({"email": {"smtp_host": "smtp.example.com", "from": "a@example.com",
                    "password_file": "/run/secrets/smtp"}}, "email.username", "must be set"),
        ({"email": {"smtp_host": "smtp.example.com", "from": "a@example.com",
                    "username": "a", "password_file": "/no/such/file"}},
         "email.password_file", "is not a file"),
    ],
)
def test_bad_values_name_the_key_and_the_problem(document: dict, key: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(document, "deploy.toml")
    assert caught.value.key == key
    assert problem in caught.value.problem
    assert str(caught.value).startswith(f"deploy.toml: {key}: ")


def test_subdomain_origins_and_localhost_http_are_accepted() -> None:
    config = parse_config({"passkey": {"rp_id": "example.com", "allowed_origins": [
        "https://example.com", "https://login.example.com:8443"]}})
    assert config.passkey.allowed_origins[1] == "https://login.example.com:8443"
    assert parse_config({}).passkey.allowed_origins == ("http://localhost:8090",)


def test_derived_addresses_default_from_base_url() -> None:
    config = parse_config({"server": {"base_url": "https://id.example.com/"},
                           "passkey": {"rp_id": "example.com",
                                       "allowed_origins": ["https://id.example.com"]}})
    assert config.issuer == "https://id.example.com"
    assert config.gate_url == "https://id.example.com/gate"
    assert config.mcp_audience == "https://id.example.com/mcp"


def test_sample_config_documents_every_key_and_loads() -> None:
    sample = Path(__file__).parent.parent / "sample-config.toml"
    config = load_config(sample)
    text = sample.read_text()
    for section in ("server", "database", "passkey", "oauth", "gate_client", "mcp", "flow",
                    "email", "metrics", "security"):
        for key in vars(getattr(config, section)):
            key = {"sender": "from", "password_file": "# password_file",
                   "username": "# username"}.get(key, key) if section == "email" else key
            assert f"\n{key} = " in text, f"{section}.{key} is not documented"


def test_syntax_errors_and_missing_files_are_config_errors(tmp_path: Path) -> None:
    broken = tmp_path / "broken.toml"
    broken.write_text("[server\nport = 1")
    with pytest.raises(ConfigError, match=r"broken.toml: \(syntax\)"):
        load_config(broken)
    with pytest.raises(ConfigError, match="identityctl init"):
        load_config(tmp_path / "absent.toml")


def test_config_check_names_every_problem_and_the_key_meant(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[server]\nprot = 80\nbase_url = "localhost"\n'
                    '[passkey]\nuser_verification = "always"\n[emial]\n')
    checked = CliRunner().invoke(cli_app, ["--config", str(path), "config", "check"])
    assert checked.exit_code == 2
    # Compared without whitespace: the console wraps long lines (a long path) anywhere.
    said = "".join(checked.stderr.split())
    assert said == "".join("".join(f"config error {path}: {problem}".split()) for problem in (
        "server.prot: unknown key; did you mean port?",
        "emial: unknown section; did you mean email?",
        "server.base_url: must be an absolute http(s) URL, got 'localhost'",
        "passkey.user_verification: must be one of required, preferred, discouraged; got "
        "'always'"))
