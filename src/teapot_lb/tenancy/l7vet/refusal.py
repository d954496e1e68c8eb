"""What a refusal of a gateway object says: the rule it broke (:class:`L7Rule`, the
condition's and Event's reason) and where (:class:`L7Refusal`)."""

from __future__ import annotations

from enum import StrEnum

from teapot_lb.tenancy.refusal import Refusal


class L7Rule(StrEnum):
    """The rule a refused object broke; the value is the condition's and Event's reason."""

    NO_TENANT = "NoTenant"
    AMBIGUOUS_TENANT = "AmbiguousTenant"
    MODE_NOT_ALLOWED = "ModeNotAllowed"  # the Tenant may not use the gateway
    HOSTNAME_NOT_ALLOWED = "HostnameNotAllowed"  # outside the tenant's DNS domains
    HOSTNAME_TAKEN = "HostnameTaken"  # served for another tenant already
    INVALID_HOSTNAME = "InvalidHostname"
    SECRET_NOT_ALLOWED = "SecretNotAllowed"  # another namespace's Secret, or not a Secret
    INVALID_CERTIFICATE = "InvalidCertificate"
    SNIPPET_NOT_ALLOWED = "SnippetNotAllowed"  # annotations that carry raw proxy config
    UNSAFE_VALUE = "UnsafeValue"  # a value that could break out of the rendered config
    NOT_SERVED = "NotServed"  # a feature the gateway does not serve
    # Gateway API's route reasons: a filter, match or field the gateway does not
    # implement; filters that cannot go together (RequestRedirect and URLRewrite).
    UNSUPPORTED_VALUE = "UnsupportedValue"
    INCOMPATIBLE_FILTERS = "IncompatibleFilters"
    # An HTTPRoute's backendRef that does not resolve (ResolvedRefs=False, the route
    # served, the reference's requests answered 500): Gateway API's reasons.
    BACKEND_NOT_FOUND = "BackendNotFound"
    REF_NOT_PERMITTED = "RefNotPermitted"  # another namespace's Service (no ReferenceGrant)
    INVALID_KIND = "InvalidKind"  # not a Service
    PORT_NOT_ALLOWED = "PortNotAllowed"
    PORT_TAKEN = "PortTaken"  # another tenant's port on the shared gateway
    QUOTA_EXCEEDED = "QuotaExceeded"
    BACKEND_NOT_ALLOWED = "BackendNotAllowed"  # not a Service of the same namespace
    OVERSIZED = "Oversized"
    # A dedicated gateway address (tenancy.l7address), Gateway API's Gateway reasons:
    # asked in a way not served (refused); not usable or not assigned (not programmed).
    UNSUPPORTED_ADDRESS = "UnsupportedAddress"
    ADDRESS_NOT_USABLE = "AddressNotUsable"
    ADDRESS_NOT_ASSIGNED = "AddressNotAssigned"


class L7Refusal(Refusal[L7Rule]):
    """Why an object is refused; its text names the rule too (`gateway --check` lists it)."""

    def __str__(self) -> str:
        return f"{self.field}: {self.message} [{self.rule}]"
