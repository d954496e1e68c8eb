"""BFDProfile: MetalLB's fields and defaults, and the parameters a peer's BFD session runs with."""

from __future__ import annotations

import pytest

from model.builders import bfd_profile, parse, peer
from teapot_lb.cluster import Kind, Store, UnknownBFDProfile
from teapot_lb.model import BFDParameters, BFDProfile, BGPPeer, dump


def store_of(*documents: dict[str, object]) -> Store:
    store = Store()
    for document in documents:
        store.put_object(parse(document))
    return store


def test_defaults_match_metallb() -> None:
    spec = parse(bfd_profile("p")).spec
    assert (spec.receive_interval, spec.transmit_interval, spec.detect_multiplier) == (300, 300, 3)
    assert (spec.passive_mode, spec.echo_mode, spec.minimum_ttl) == (False, False, 254)


def test_a_profile_without_spec_is_all_defaults() -> None:
    profile: BFDProfile = parse({**bfd_profile("p"), "spec": None})
    assert profile.spec == parse(bfd_profile("q")).spec


def test_fields_have_metallb_names_on_the_wire() -> None:
    profile = parse(bfd_profile("p", echoInterval=50, passiveMode=True, minimumTtl=10))
    assert set(dump(profile)["spec"]) >= {
        "receiveInterval", "transmitInterval", "detectMultiplier", "echoInterval", "echoMode",
        "passiveMode", "minimumTtl",
    }  # fmt: skip


def test_a_peer_without_profile_has_no_bfd() -> None:
    r: BGPPeer = parse(peer("r"))
    assert store_of(bfd_profile("fast")).view().bfd_parameters(r) is None


def test_a_single_hop_peer_gets_its_profile_in_microseconds_and_requires_ttl_255() -> None:
    r: BGPPeer = parse(peer("r", bfdProfile="fast"))
    store = store_of(
        bfd_profile("fast", receiveInterval=50, transmitInterval=20, detectMultiplier=5,
                    passiveMode=True, minimumTtl=10),
    )  # fmt: skip
    assert store.view().bfd_parameters(r) == BFDParameters(
        desired_min_tx_us=20_000,
        required_min_rx_us=50_000,
        detect_multiplier=5,
        passive=True,
        minimum_ttl=255,
        multihop=False,
    )


def test_a_multihop_peer_gets_the_profiles_minimum_ttl() -> None:
    r: BGPPeer = parse(peer("r", bfdProfile="hops", ebgpMultiHop=True))
    params = store_of(bfd_profile("hops", minimumTtl=250)).view().bfd_parameters(r)
    assert params is not None
    assert (params.multihop, params.minimum_ttl) == (True, 250)


def test_intervals_are_also_given_in_seconds() -> None:
    r: BGPPeer = parse(peer("r", bfdProfile="p"))
    params = store_of(bfd_profile("p", transmitInterval=10)).view().bfd_parameters(r)
    assert params is not None
    assert (params.desired_min_tx_seconds, params.required_min_rx_seconds) == (0.01, 0.3)


def test_a_missing_profile_is_an_error_naming_the_peer_and_the_profile() -> None:
    r: BGPPeer = parse(peer("r", bfdProfile="gone"))
    with pytest.raises(UnknownBFDProfile, match=r"BGPPeer/lb-system/r: spec\.bfdProfile") as err:
        store_of(bfd_profile("other")).view().bfd_parameters(r)
    assert (err.value.peer, err.value.profile) == (r.ref, "gone")


def test_a_profile_of_another_namespace_is_not_used() -> None:
    elsewhere = bfd_profile("fast")
    elsewhere["metadata"]["namespace"] = "other"  # type: ignore[index]
    r: BGPPeer = parse(peer("r", bfdProfile="fast"))
    with pytest.raises(UnknownBFDProfile):
        store_of(elsewhere).view().bfd_parameters(r)


def test_the_store_files_profiles_under_their_view_field() -> None:
    store = store_of(bfd_profile("fast"))
    assert list(store.view().of_kind(Kind.BFD_PROFILE)) == ["lb-system/fast"]
