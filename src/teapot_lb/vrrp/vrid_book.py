"""Virtual router IDs as cluster state: allocated once, written on the Service (pure).

Every node must run the same VRRP instance (same VRID, so same name and same anchor
address) for the same Service IP. A VRID computed on each node from what that node has
seen can differ after a collision or a node joining, so the controller allocates them,
like IPs, and writes them on the Service: `lb.teapot.io/vrids: "<advertisement>=<vrid>"`
(one entry per VIPAdvertisement announcing the Service). The speakers only read them.

Who holds a VRID (a :class:`VridOwner`): a VIPAdvertisement for all its Services with
`externalTrafficPolicy: Cluster` (they share one instance per interface and family, so
one master), or one Local Service under it (an instance of its own, whose master follows
its endpoints). VRIDs are unique across owners, within each advertisement's `vridRange`
(stricter than VRRP needs, unique per interface and family, because the interface is
only known on the nodes). An owner keeps the VRID it has; a new one takes a
hash-preferred free VRID, probing upwards; none free → refused with a reason. Rebuilt
after a restart from the annotations, oldest Service first, like IPs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from teapot_lb.cluster import ClusterView
from teapot_lb.model import ExternalTrafficPolicy, IPAddress, Service
from teapot_lb.model.service import ANNOTATION_VRIDS
from teapot_lb.vrrp.group import VRID_MAX, VRID_MIN
from teapot_lb.vrrp.instances import stable_hash


@dataclass(frozen=True, order=True)
class VridOwner:
    """What one VRID is for: an advertisement's Cluster Services, or one Local Service."""

    advertisement: str
    service: str | None = None  # `namespace/name` of a Local Service; None: shared

    def token(self) -> str:
        return f"{self.advertisement}/{self.service}" if self.service else self.advertisement


@dataclass(frozen=True)
class Need:
    """One VRID a Service needs: for whom, and the advertisement's range."""

    owner: VridOwner
    vrid_range: tuple[int, int]


def parse_vrids(text: str | None) -> dict[str, int]:
    """`adv=17,adv2=18` → {adv: 17, adv2: 18}; malformed entries are skipped (they are
    written by the controller, which rewrites them)."""
    out: dict[str, int] = {}
    for part in (text or "").split(","):
        name, sep, value = part.strip().partition("=")
        if sep and name and value.isdigit() and VRID_MIN <= int(value) <= VRID_MAX:
            out[name] = int(value)
    return out


def format_vrids(vrids: Mapping[str, int]) -> str | None:
    return ",".join(f"{adv}={vrids[adv]}" for adv in sorted(vrids)) or None


def annotated_vrids(service: Service) -> dict[str, int]:
    return parse_vrids(service.metadata.annotations.get(ANNOTATION_VRIDS))


def needs(
    view: ClusterView, key: str, service: Service, ips: Iterable[IPAddress] | None = None
) -> list[Need]:
    """The VRIDs the Service needs: one per VIPAdvertisement covering a pool of its IPs
    (`ips`, or those in its status)."""
    advs = view.vip_advertisements
    if not advs:
        return []
    local = service.spec.external_traffic_policy is ExternalTrafficPolicy.LOCAL
    out: dict[VridOwner, Need] = {}
    for ip in service.ingress_ips() if ips is None else ips:
        pool = view.pool_of(ip)
        if pool is None:
            continue
        for adv_key in sorted(advs):
            adv = advs[adv_key]
            if not adv.spec.selects_pool(pool):
                continue
            owner = VridOwner(adv.name, key if local else None)
            r = adv.spec.vrid_range
            out[owner] = Need(owner, (r.start, r.end) if r else (VRID_MIN, VRID_MAX))
    return [out[o] for o in sorted(out)]


@dataclass(frozen=True)
class VridResult:
    vrids: dict[str, int]  # advertisement -> VRID, for the Service's annotation
    refused: tuple[str, ...] = ()  # why a needed VRID could not be given


@dataclass
class VridBook:
    """Which owner holds which VRID, and which Services use each owner."""

    holders: dict[int, VridOwner] = field(default_factory=dict)
    owned: dict[VridOwner, int] = field(default_factory=dict)
    users: dict[VridOwner, set[str]] = field(default_factory=dict)
    uses: dict[str, tuple[VridOwner, ...]] = field(default_factory=dict)

    def assign(self, key: str, wanted: Iterable[Need], annotated: Mapping[str, int]) -> VridResult:
        """The VRIDs of Service `key` (`annotated`: what its annotation says today)."""
        wanted = list(wanted)
        self.release(key, keep={n.owner for n in wanted})
        vrids: dict[str, int] = {}
        refused: list[str] = []
        owners: list[VridOwner] = []
        for need in wanted:
            vrid = self._vrid_for(need, annotated.get(need.owner.advertisement))
            if vrid is None:
                lo, hi = need.vrid_range
                refused.append(
                    f"no free virtual router ID in {lo}-{hi} for VIPAdvertisement"
                    f" {need.owner.advertisement!r}: every VRID in the range is in use;"
                    " widen vridRange"
                )
                continue
            vrids[need.owner.advertisement] = vrid
            owners.append(need.owner)
            self.users.setdefault(need.owner, set()).add(key)
        if owners:
            self.uses[key] = tuple(owners)
        return VridResult(vrids, tuple(refused))

    def _vrid_for(self, need: Need, annotated: int | None) -> int | None:
        owner = need.owner
        lo, hi = need.vrid_range
        held = self.owned.get(owner)
        if held is not None and lo <= held <= hi:
            return held
        if held is not None:  # the range changed: give it back, take one inside
            self._drop(owner)
        if annotated is not None and lo <= annotated <= hi and annotated not in self.holders:
            return self._take(owner, annotated)
        size = hi - lo + 1
        start = stable_hash(owner.token()) % size
        for i in range(size):
            candidate = lo + (start + i) % size
            if candidate not in self.holders:
                return self._take(owner, candidate)
        return None

    def _take(self, owner: VridOwner, vrid: int) -> int:
        self.holders[vrid] = owner
        self.owned[owner] = vrid
        return vrid

    def _drop(self, owner: VridOwner) -> None:
        vrid = self.owned.pop(owner, None)
        if vrid is not None:
            self.holders.pop(vrid, None)

    def release(self, key: str, keep: frozenset[VridOwner] | set[VridOwner] = frozenset()) -> None:
        """Service `key` no longer uses its owners (but those in `keep`); an owner
        nobody uses gives its VRID back."""
        for owner in self.uses.pop(key, ()):
            if owner in keep:
                continue
            users = self.users.get(owner)
            if users is not None:
                users.discard(key)
                if not users:
                    del self.users[owner]
                    self._drop(owner)
