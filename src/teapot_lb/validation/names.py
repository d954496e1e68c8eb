"""Rules for names: what the API server would refuse, caught before `kubectl apply`."""

from __future__ import annotations

import re
from collections.abc import Iterator

from teapot_lb.model.problem import Problem, problem
from teapot_lb.validation.config import MANIFEST_KINDS, ConfigSet

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def name_problems(config: ConfigSet) -> Iterator[Problem]:
    ours = (obj for info in MANIFEST_KINDS if info.config for obj in config.of_kind(info))
    for obj in ours:
        name = obj.metadata.name
        if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
            yield problem(
                obj.ref,
                "metadata.name",
                f"{name!r} is not a valid name: lowercase letters, digits, '-' and '.',"
                " starting and ending with a letter or digit (RFC 1123)",
            )
    for pool in config.pools:
        scope = pool.spec.service_allocation
        for i, ns in enumerate(scope.namespaces if scope else []):
            if len(ns) > 63 or not _DNS_LABEL.match(ns):
                yield problem(
                    pool.ref,
                    f"spec.serviceAllocation.namespaces[{i}]",
                    f"{ns!r} is not a namespace name: at most 63 lowercase letters, digits"
                    " and '-' (RFC 1123 label)",
                )
