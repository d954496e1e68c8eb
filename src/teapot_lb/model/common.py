"""Pieces every kind shares: base model config, object metadata, label selectors, conditions.

Kubernetes spells fields in camelCase; Python attributes are snake_case and the alias
generator maps one onto the other (a few acronyms, like `myASN`, get explicit aliases).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, NamedTuple

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    WithJsonSchema,
    model_validator,
)
from pydantic.alias_generators import to_camel

from teapot_lb.addresses import IPAddress as IPAddress
from teapot_lb.addresses import parse_ip as parse_ip

GROUP = "lb.teapot.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"


class KubeModel(BaseModel):
    """Base of our own kinds' parts: camelCase on the wire, unknown fields are errors."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="forbid",
        frozen=True,
        use_attribute_docstrings=True,
    )


class KubeView(BaseModel):
    """Base of typed views of built-in Kubernetes objects: we read a few fields, ignore the rest."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="ignore",
        frozen=True,
        use_attribute_docstrings=True,
    )

    @model_validator(mode="before")
    @classmethod
    def _null_is_absent(cls, data: Any) -> Any:
        """The API server writes absent optional fields as null (an EndpointSlice of a
        Service without endpoints has ``endpoints: null``, an endpoint may have
        ``conditions: null``): read null as the field's default."""
        if isinstance(data, dict) and None in data.values():
            return {k: v for k, v in data.items() if v is not None}
        return data


# --- scalar types with their own syntax -------------------------------------------------------


IPAddressField = Annotated[
    IPAddress,
    PlainValidator(parse_ip),
    PlainSerializer(str, return_type=str),
    WithJsonSchema({"type": "string", "maxLength": 45}),
]
"""An IP address: text on the wire, `ipaddress` object in Python."""


_DURATION_RE = re.compile(r"^(?:\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h))+$")
_DURATION_PART_RE = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
DURATION_PATTERN = r"^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$"


def parse_duration(text: str) -> float:
    """Seconds in a Kubernetes (Go) duration such as `90s`, `1m30s`, `500ms`."""
    if text == "0":
        return 0.0
    if not _DURATION_RE.match(text):
        raise ValueError(f"{text!r} is not a duration (examples: 90s, 1m30s, 500ms)")
    return sum(float(n) * _UNIT_SECONDS[unit] for n, unit in _DURATION_PART_RE.findall(text))


def _check_duration(text: str) -> str:
    parse_duration(text)
    return text


Duration = Annotated[
    str,
    AfterValidator(_check_duration),
    WithJsonSchema({"type": "string", "pattern": DURATION_PATTERN}),
]
"""A duration as Kubernetes writes them (`90s`, `1m30s`); `parse_duration` reads it."""


_LABEL_NAME_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _check_label_key(key: str) -> str:
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN_RE.match(prefix)):
        raise ValueError(f"label key {key!r}: prefix must be a DNS subdomain (e.g. example.com)")
    if not name or len(name) > 63 or not _LABEL_NAME_RE.match(name):
        raise ValueError(
            f"label key {key!r}: name must be 1-63 letters, digits, '-', '_' or '.',"
            " starting and ending with a letter or digit"
        )
    return key


def _check_label_value(value: str) -> str:
    if value and (len(value) > 63 or not _LABEL_NAME_RE.match(value)):
        raise ValueError(
            f"label value {value!r} must be empty or 1-63 letters, digits, '-', '_' or '.',"
            " starting and ending with a letter or digit"
        )
    return value


LabelKey = Annotated[str, AfterValidator(_check_label_key)]
LabelValue = Annotated[str, AfterValidator(_check_label_value)]


def none_as_empty(value: object) -> object:
    """YAML `key:` with nothing after it is null; read it as an empty mapping, as kubectl does."""
    return {} if value is None else value


# --- metadata ---------------------------------------------------------------------------------


class ObjectMeta(KubeView):
    """The subset of Kubernetes object metadata we read; other metadata fields are ignored."""

    name: str = Field(min_length=1, max_length=253)
    namespace: str | None = None
    labels: Annotated[dict[str, str], BeforeValidator(none_as_empty)] = {}
    annotations: Annotated[dict[str, str], BeforeValidator(none_as_empty)] = {}
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: datetime | None = None


class ObjectRef(NamedTuple):
    """Which object: kind, namespace (None when not namespaced or not given) and name."""

    kind: str
    namespace: str | None
    name: str

    def __str__(self) -> str:
        if self.namespace:
            return f"{self.kind}/{self.namespace}/{self.name}"
        return f"{self.kind}/{self.name}"


class Identified:
    """`ref` and `name` for the kinds (mixed into the pydantic models, which hold `kind` and
    `metadata`). Cluster-scoped kinds set `namespaced = False`."""

    namespaced: ClassVar[bool] = True
    if TYPE_CHECKING:
        kind: str
        metadata: ObjectMeta

    @property
    def ref(self) -> ObjectRef:
        namespace = self.metadata.namespace if self.namespaced else None
        return ObjectRef(self.kind, namespace, self.metadata.name)

    @property
    def name(self) -> str:
        return self.metadata.name


_NOT_CREATED = datetime.max.replace(tzinfo=UTC)


def creation_order(obj: Identified) -> tuple[datetime, str, str]:
    """Sort key: older objects first, then by namespace and name.

    Where two objects want the same thing (an IP, an address range), the one created
    first keeps it and the newcomer is the one refused or reported. An object without a
    `creationTimestamp` (a manifest before the API server or standalone mode stamped it)
    counts as the newest; a timestamp without a zone is UTC.
    """
    created = obj.metadata.creation_timestamp
    if created is None:
        created = _NOT_CREATED
    elif created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    return created, obj.metadata.namespace or "", obj.metadata.name


# --- label selectors --------------------------------------------------------------------------


class SelectorOperator(StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"


class LabelSelectorRequirement(KubeModel):
    """One `matchExpressions` entry: a key, an operator and (for In/NotIn) values."""

    key: LabelKey
    """The label key the requirement is about."""
    operator: SelectorOperator
    """In, NotIn, Exists or DoesNotExist."""
    values: list[LabelValue] = []
    """Values for In and NotIn (at least one); must be empty for Exists and DoesNotExist."""

    def matches(self, labels: Mapping[str, str]) -> bool:
        match self.operator:
            case SelectorOperator.IN:
                return self.key in labels and labels[self.key] in self.values
            case SelectorOperator.NOT_IN:
                return self.key not in labels or labels[self.key] not in self.values
            case SelectorOperator.EXISTS:
                return self.key in labels
            case SelectorOperator.DOES_NOT_EXIST:
                return self.key not in labels


class LabelSelector(KubeModel):
    """A Kubernetes label selector; all its terms must hold. An empty selector matches all."""

    match_labels: dict[LabelKey, LabelValue] = {}
    """Labels that must be present with exactly these values."""
    match_expressions: list[LabelSelectorRequirement] = []
    """Further requirements, all of which must hold."""

    def requirements(self) -> list[LabelSelectorRequirement]:
        """All terms, `matchLabels` entries written as `In` requirements."""
        exact = [
            LabelSelectorRequirement(key=k, operator=SelectorOperator.IN, values=[v])
            for k, v in self.match_labels.items()
        ]
        return exact + list(self.match_expressions)

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.match_labels.items()) and all(
            r.matches(labels) for r in self.match_expressions
        )

    def may_overlap(self, other: LabelSelector) -> bool:
        """Whether some label set could match both selectors (False only when provably not)."""
        return _satisfiable([*self.requirements(), *other.requirements()])

    def __str__(self) -> str:
        terms = [f"{k}={v}" for k, v in self.match_labels.items()]
        for r in self.match_expressions:
            if r.operator in (SelectorOperator.IN, SelectorOperator.NOT_IN):
                op = "in" if r.operator is SelectorOperator.IN else "notin"
                terms.append(f"{r.key} {op} ({','.join(r.values)})")
            else:
                terms.append(r.key if r.operator is SelectorOperator.EXISTS else f"!{r.key}")
        return ",".join(terms) or "<everything>"


def matches_any(selectors: Sequence[LabelSelector], labels: Mapping[str, str]) -> bool:
    """The rule for selector lists such as `nodeSelectors`: empty means all, else any one."""
    return not selectors or any(s.matches(labels) for s in selectors)


def selector_lists_may_overlap(a: Sequence[LabelSelector], b: Sequence[LabelSelector]) -> bool:
    """Whether two selector lists (empty = everything) could both match one label set."""
    left = a or [LabelSelector()]
    right = b or [LabelSelector()]
    return any(x.may_overlap(y) for x in left for y in right)


def _satisfiable(requirements: Iterable[LabelSelectorRequirement]) -> bool:
    by_key: dict[str, list[LabelSelectorRequirement]] = {}
    for r in requirements:
        by_key.setdefault(r.key, []).append(r)
    for reqs in by_key.values():
        allowed: set[str] | None = None
        excluded: set[str] = set()
        must_exist = must_not_exist = False
        for r in reqs:
            if r.operator is SelectorOperator.IN:
                must_exist = True
                allowed = set(r.values) if allowed is None else allowed & set(r.values)
            elif r.operator is SelectorOperator.NOT_IN:
                excluded |= set(r.values)
            elif r.operator is SelectorOperator.EXISTS:
                must_exist = True
            else:
                must_not_exist = True
        if must_exist and must_not_exist:
            return False
        if allowed is not None and not (allowed - excluded):
            return False
    return True


# --- conditions -------------------------------------------------------------------------------


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Condition(KubeModel):
    """A Kubernetes-style status condition."""

    type: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9]*$", max_length=316)
    """CamelCase condition type, e.g. Ready."""
    status: ConditionStatus
    """True, False or Unknown."""
    reason: str = Field(pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$", max_length=1024)
    """CamelCase machine-readable reason."""
    message: str = Field(default="", max_length=32768)
    """Human-readable detail."""
    last_transition_time: datetime
    """When the status last changed."""
    observed_generation: int | None = Field(default=None, ge=0)
    """The metadata.generation the condition was computed from."""


class ConditionsStatus(KubeModel):
    """Status of a kind that only reports conditions."""

    conditions: list[Condition] = []
    """Current conditions (e.g. Ready, Valid)."""


def dump(obj: BaseModel) -> dict[str, Any]:
    """The object as Kubernetes JSON: camelCase, unset optional fields left out."""
    return obj.model_dump(mode="json", by_alias=True, exclude_none=True)


_IFNAME_FORBIDDEN = set("/: \t\n")


def _check_interface_name(name: str) -> str:
    # Linux: IFNAMSIZ is 16 bytes with the NUL; dev_valid_name() refuses '/' and whitespace.
    if not name or len(name.encode()) > 15:
        raise ValueError(f"interface name {name!r} must be 1-15 bytes long")
    if name in (".", "..") or _IFNAME_FORBIDDEN & set(name):
        raise ValueError(
            f"interface name {name!r} may not be '.', '..' or contain '/', ':' or spaces"
        )
    return name


InterfaceName = Annotated[
    str,
    AfterValidator(_check_interface_name),
    WithJsonSchema({"type": "string", "minLength": 1, "maxLength": 15, "pattern": r"^[^/:\s]+$"}),
]
"""A Linux network interface name (at most 15 bytes, no '/', ':' or whitespace)."""
