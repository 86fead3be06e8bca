"""Decoy credentials (passkey/decoys.py): stable per name, unpredictable without the secret."""

from __future__ import annotations

from identityctl.passkey.decoys import decoy_credentials

SECRET = b"s" * 32


def test_a_name_gets_the_same_decoys_every_time_and_another_name_others() -> None:
    assert decoy_credentials(SECRET, "alice") == decoy_credentials(SECRET, "alice")
    assert decoy_credentials(SECRET, "alice") != decoy_credentials(SECRET, "bob")


def test_without_the_secret_the_decoys_cannot_be_computed() -> None:
    assert decoy_credentials(SECRET, "alice") != decoy_credentials(b"t" * 32, "alice")


#: What browsers' getTransports() reports for the platform passkeys people make (sorted, as
#: browsers sort it): synced ones, device-bound ones. Never a security key's: the browser
#: would wait for a key a stranger cannot have.
PLATFORM_TRANSPORTS = {("hybrid", "internal"), ("internal",)}


def test_decoys_have_the_shapes_real_credentials_have() -> None:
    shapes, transports = set(), []
    for number in range(200):
        decoys = decoy_credentials(SECRET, f"user{number}")
        assert 1 <= len(decoys) <= 2
        assert len({decoy.credential_id for decoy in decoys}) == len(decoys)
        shapes.add((len(decoys), *sorted(len(decoy.credential_id) for decoy in decoys)))
        transports.extend(decoy.transports for decoy in decoys)
    assert {length for shape in shapes for length in shape[1:]} == {16, 20, 32}
    assert {shape[0] for shape in shapes} == {1, 2}
    # Real credentials carry the transports the browser reported: so does every decoy, drawn
    # from what browsers report, synced passkeys (hybrid and internal) the most often.
    assert set(transports) == PLATFORM_TRANSPORTS
    assert max(set(transports), key=transports.count) == ("hybrid", "internal")
