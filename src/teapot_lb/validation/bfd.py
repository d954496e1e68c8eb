"""Rules for BFDProfiles and the BGPPeers that name them."""

from __future__ import annotations

from collections.abc import Iterator

from teapot_lb.model.problem import Problem, problem
from teapot_lb.validation.config import ConfigSet


def bfd_profile_problems(config: ConfigSet) -> Iterator[Problem]:
    for profile in config.bfd_profiles:
        if profile.spec.echo_mode:
            yield problem(
                profile.ref,
                "spec.echoMode",
                "echo mode is not implemented: teapot-lb's BFD sends control packets only"
                " (RFC 5880 §6.4 echo is optional); remove echoMode or set it to false",
            )
    for peer in config.bgp_peers:
        name, namespace = peer.spec.bfd_profile, peer.metadata.namespace
        if name is None:
            continue
        known = config.bfd_profiles_in(namespace)
        if name in known or config.is_unparsed("BFDProfile", namespace, name):
            continue
        listing = ", ".join(sorted(known)) or "none"
        where = f" in namespace {namespace}" if namespace else ""
        yield problem(
            peer.ref,
            "spec.bfdProfile",
            f"no BFDProfile named {name!r}{where} (known: {listing})",
        )
