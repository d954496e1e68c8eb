"""A LAN of namespaces with predictable documentation addresses."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from teapot_lb.netlab.topology import Host


@dataclass
class Lab:
    """A LAN (one switch) of hosts with addresses from 192.0.2.0/24 and 2001:db8::/64.

    Host ``i`` gets ``192.0.2.{i+1}`` and ``2001:db8::{i+1}``; see :meth:`add`.
    """

    topology: Any
    switch: Host | None = None
    hosts: dict[str, Host] = field(default_factory=dict)
    v4: dict[str, str] = field(default_factory=dict)
    v6: dict[str, str] = field(default_factory=dict)
    ports: dict[str, str] = field(default_factory=dict)  # the switch's port to each host

    def add(self, name: str) -> Host:
        if self.switch is None:
            self.switch = self.topology.add_switch("lan")
        index = len(self.hosts) + 1
        host: Host = self.topology.add_host(name)
        self.v4[name] = f"192.0.2.{index}"
        self.v6[name] = f"2001:db8::{index}"
        self.ports[name] = self.topology.connect(
            host, self.switch, addrs=[f"192.0.2.{index}/24", f"2001:db8::{index}/64"]
        )
        self.hosts[name] = host
        return host

    def cut(self, name: str, *, down: bool = True) -> None:
        """Cut (or restore) the host's cable at the switch: its own link stays up."""
        assert self.switch is not None
        self.switch.ip("link", "set", self.ports[name], "down" if down else "up")

    def addr(self, name: str, version: int) -> str:
        return self.v4[name] if version == 4 else self.v6[name]
