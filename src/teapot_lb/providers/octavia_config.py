"""The Octavia provider's configuration: the file the manager is given with
``--provider octavia=FILE`` (YAML or JSON, camelCase), every problem named by field path.

```yaml
cloud: mycloud                 # a clouds.yaml cloud, or an auth block:
auth:
  type: password               # keystone: authUrl, username, password, projectName, ...
  authUrl: https://keystone.example:5000/v3
  username: teapot
  password: secret
  projectName: admin
# auth: {type: noauth, endpoint: http://octavia.example:9876}   # Octavia with noauth
provider: ovn                  # the Octavia provider every load balancer asks for
vipSubnet: <subnet id>         # where the VIPs are (vip_address on it), or vipNetwork
tenants:                       # one Octavia project per Tenant
  acme: {project: <project id>, memberSubnet: <subnet id of its nodes>}
```
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError, model_validator

from teapot_lb.model.common import KubeModel
from teapot_lb.model.manifest import _field_path


class ConfigError(ValueError):
    """The provider's configuration is unusable: each problem names its field."""

    def __init__(self, where: str, problems: list[str]) -> None:
        self.problems = [f"{where}: {p}" for p in problems]
        super().__init__("; ".join(self.problems))


class AuthType(StrEnum):
    PASSWORD = "password"
    """Keystone password authentication (v3)."""
    NOAUTH = "noauth"
    """Octavia's ``auth_strategy = noauth``: no Keystone, the endpoint given."""


class Auth(KubeModel):
    """How to reach Octavia when no clouds.yaml cloud is named."""

    type: AuthType
    auth_url: str | None = None
    username: str | None = None
    password: str | None = None
    project_name: str | None = None
    user_domain_name: str = "Default"
    project_domain_name: str = "Default"
    region: str | None = None
    endpoint: str | None = None
    """Octavia's URL: required with noauth, an override with password."""

    @model_validator(mode="after")
    def _complete(self) -> Auth:
        if self.type is AuthType.NOAUTH:
            wanted = {"endpoint": self.endpoint}
        else:
            wanted = {
                "authUrl": self.auth_url,
                "username": self.username,
                "password": self.password,
                "projectName": self.project_name,
            }
        missing = [name for name, value in wanted.items() if not value]
        if missing:
            raise ValueError(f"auth type {self.type.value} needs {', '.join(missing)}")
        return self


class TenantProject(KubeModel):
    """The Octavia project one Tenant's load balancers are made in."""

    project: str = Field(min_length=1, max_length=255)
    """Its project id (with noauth, the ``project_id`` every request names)."""
    member_subnet: str | None = Field(default=None, min_length=1)
    """The subnet of the Tenant's nodes (the members); default: the VIP's subnet."""


class HealthMonitor(KubeModel):
    """The pools' health monitor (TCP or UDP-CONNECT on the member's own port: the ovn
    provider probes no other port and speaks no HTTP)."""

    enabled: bool = True
    delay: int = Field(default=5, ge=1)
    """Seconds between two probes of a member."""
    timeout: int = Field(default=3, ge=1)
    """Seconds a probe waits for its answer (Octavia wants it no longer than `delay`)."""
    max_retries: int = Field(default=2, ge=1, le=10)
    """Probes answered in a row that put a member back in service."""
    max_retries_down: int = Field(default=3, ge=1, le=10)
    """Probes failed in a row that take a member out of service (OVN's failure_count):
    a member that stops answering gets new connections for up to about
    `delay` x `max_retries_down` seconds."""

    @model_validator(mode="after")
    def _timeout_within_delay(self) -> HealthMonitor:
        if self.timeout > self.delay:
            raise ValueError(f"timeout ({self.timeout}) must not be longer than delay "
                             f"({self.delay}): Octavia refuses such a monitor")  # fmt: skip
        return self


class Timeouts(KubeModel):
    """Seconds."""

    request: float = Field(default=10.0, gt=0)
    """One call to the API (connect and answer)."""
    settle: float = Field(default=20.0, ge=0)
    """How long one ensure waits for a change to go ACTIVE before it returns Provisioning."""
    pending: float = Field(default=2.0, gt=0)
    """retry_after while Octavia is still PENDING_*."""
    error: float = Field(default=5.0, gt=0)
    """retry_after after an error (the manager's backoff grows it)."""


class OctaviaConfig(KubeModel):
    cloud: str | None = Field(default=None, min_length=1)
    """A cloud of clouds.yaml (openstacksdk's search path)."""
    auth: Auth | None = None
    provider: str = Field(default="ovn", min_length=1)
    vip_subnet: str | None = Field(default=None, min_length=1)
    vip_network: str | None = Field(default=None, min_length=1)
    tenants: dict[str, TenantProject] = {}
    health_monitor: HealthMonitor = Field(default_factory=HealthMonitor)
    timeouts: Timeouts = Field(default_factory=Timeouts)

    @model_validator(mode="after")
    def _whole(self) -> OctaviaConfig:
        if (self.cloud is None) == (self.auth is None):
            raise ValueError("name exactly one of cloud (a clouds.yaml cloud) and auth")
        if (self.vip_subnet is None) == (self.vip_network is None):
            raise ValueError("name exactly one of vipSubnet and vipNetwork (where the VIPs are)")
        return self

    def project_of(self, tenant: str) -> str | None:
        entry = self.tenants.get(tenant)
        return entry.project if entry is not None else None


def parse(body: Any, where: str = "octavia config") -> OctaviaConfig:
    """The config in `body` (a mapping as read from the file), or :class:`ConfigError`."""
    if not isinstance(body, Mapping):
        raise ConfigError(where, [f"expected a mapping, got {type(body).__name__}"])
    try:
        return OctaviaConfig.model_validate(body)
    except ValidationError as err:
        problems = []
        for e in err.errors():
            path = _field_path(e["loc"])
            message = e["msg"].removeprefix("Value error, ")
            if e["type"] == "missing":
                message = "required field is missing"
            elif e["type"] == "extra_forbidden":
                message = "unknown field"
            problems.append(f"{path}: {message}" if path else message)
        raise ConfigError(where, problems) from None


def read(path_or_mapping: Path | str | Mapping[str, Any]) -> OctaviaConfig:
    """The config from a file (YAML or JSON) or an already read mapping."""
    if isinstance(path_or_mapping, Mapping):
        return parse(path_or_mapping)
    path = Path(path_or_mapping)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(str(path), [f"cannot read: {exc.strerror}"]) from None
    try:
        body = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(str(path), [f"not YAML or JSON: {exc}"]) from None
    return parse(body, str(path))


__all__ = [
    "Auth",
    "AuthType",
    "ConfigError",
    "HealthMonitor",
    "OctaviaConfig",
    "TenantProject",
    "Timeouts",
    "parse",
    "read",
]
