"""The OAuth lists that exist once: the grant registry (identityctl/oauth/grants/), the
table of which check runs at which authorization endpoint
(identityctl/services/oauth/request_checks.py) and the table of RFC error codes
(identityctl/oauth/errors.py). Whatever reads them must agree with them; no server."""

from __future__ import annotations

import importlib
import pkgutil

import identityctl.oauth
import identityctl.services.oauth
from identityctl.oauth import errors, grants
from identityctl.oauth.authorization import CODE_REQUEST
from identityctl.oauth.discovery import (
    AUTHORIZE_PATH,
    DEVICE_AUTHORIZATION_PATH,
    PAR_PATH,
    provider_metadata,
)
from identityctl.oauth.grants import GRANT_TYPES
from identityctl.services.catalog import applications
from identityctl.services.oauth import token_endpoint
from identityctl.services.oauth.request_checks import CHECKS, ENDPOINT_CHECKS

#: The checks only a push runs: it keeps what it stores and may carry a DPoP proof.
PUSH_ONLY = ("pushed_parameters", "dpop_proof")


# --- the grant registry ---------------------------------------------------------------------


def test_discovery_offers_exactly_the_registered_grants() -> None:
    metadata = provider_metadata(issuer="https://id.example", base_url="https://id.example",
                                 signing_algorithms=["ES256"])
    assert metadata["grant_types_supported"] == list(GRANT_TYPES)


def test_each_registered_grant_has_one_handler_at_the_token_endpoint() -> None:
    assert len(set(GRANT_TYPES)) == len(GRANT_TYPES)
    assert set(token_endpoint.HANDLERS) == set(GRANT_TYPES)


def test_an_application_may_name_exactly_the_registered_grants() -> None:
    assert applications.GRANT_TYPES == GRANT_TYPES


def test_every_grant_module_is_registered() -> None:
    """A grant module written but not registered would be offered by nothing."""
    modules = [importlib.import_module(f"{grants.__name__}.{info.name}")
               for info in pkgutil.iter_modules(grants.__path__)]
    assert sorted(module.GRANT_TYPE for module in modules) == sorted(GRANT_TYPES)


# --- which checks run at which endpoint -----------------------------------------------------


def test_one_table_per_authorization_endpoint() -> None:
    assert set(ENDPOINT_CHECKS) == {AUTHORIZE_PATH, PAR_PATH, DEVICE_AUTHORIZATION_PATH}


def test_each_table_names_known_checks_once_and_every_check_runs_somewhere() -> None:
    for endpoint, names in ENDPOINT_CHECKS.items():
        assert set(names) <= set(CHECKS), endpoint
        assert len(set(names)) == len(names), endpoint
    assert {name for names in ENDPOINT_CHECKS.values() for name in names} == set(CHECKS)


def test_a_push_is_checked_as_authorize_checks_a_request() -> None:
    """RFC 9126 §2.1: the same checks in the same order; authorize alone asks whether the
    request had to be pushed, the push alone keeps its parameters and binds a DPoP key."""
    pushed = [name for name in ENDPOINT_CHECKS[PAR_PATH] if name not in PUSH_ONLY]
    authorized = [name for name in ENDPOINT_CHECKS[AUTHORIZE_PATH] if name != "par_required"]
    assert pushed == authorized
    assert ENDPOINT_CHECKS[PAR_PATH][:len(PUSH_ONLY)] == PUSH_ONLY
    assert [*CODE_REQUEST] == [name for name in authorized if name in CODE_REQUEST]


def test_the_device_request_shares_the_scope_and_resource_checks() -> None:
    assert ENDPOINT_CHECKS[DEVICE_AUTHORIZATION_PATH] == ("device_grant", "scope", "resources")
    assert CHECKS["scope"] is CODE_REQUEST["scope"]


# --- the RFC error codes --------------------------------------------------------------------


def _subclasses(base: type[errors.OAuthError]) -> list[type[errors.OAuthError]]:
    found = []
    for subclass in base.__subclasses__():
        found += [subclass, *_subclasses(subclass)]
    return found


def test_each_rfc_error_has_one_class_with_the_tables_status_and_message() -> None:
    declaring = [cls for cls in _subclasses(errors.OAuthError) if "error" in vars(cls)]
    assert sorted(cls.error for cls in declaring) == sorted(errors.RFC_ERRORS)
    for cls in declaring:
        row = errors.RFC_ERRORS[cls.error]
        assert (cls.code, cls.status, cls.message) == (row.code, row.status, row.message)


def test_no_module_names_an_rfc_error_of_its_own() -> None:
    """The grants, DPoP, registration, single sign-on: their refusals are the table's
    classes (or say more as a subclass of one), never an ``error`` set elsewhere."""
    for package in (identityctl.oauth, identityctl.services.oauth):
        for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            importlib.import_module(module.name)
    outside = [f"{cls.__module__}.{cls.__qualname__}" for cls in _subclasses(errors.OAuthError)
               if "error" in vars(cls) and cls.__module__ != errors.__name__]
    assert outside == []
