"""RequestOrigin: who acts, from where, in which request (services/origin.py)."""

from __future__ import annotations

from identityctl.services.origin import RequestOrigin


def test_acting_as_names_another_actor_and_keeps_the_request() -> None:
    asked = RequestOrigin(address="203.0.113.9", request_id="req-1")
    signed_in = asked.acting_as("user-1")
    assert (signed_in.actor, signed_in.address, signed_in.request_id) == (
        "user-1", "203.0.113.9", "req-1")
    assert asked.actor == ""  # a value: the request's own origin is unchanged


def test_acting_as_the_same_actor_is_the_same_origin() -> None:
    origin = RequestOrigin(actor="cli")
    assert origin.acting_as("cli") is origin
