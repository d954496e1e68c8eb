"""Builders for the Octavia driver's tests: provider dictionaries as octavia-lib renders
them (``to_dict(recurse=True, render_unsets=True)``), and trees."""

from __future__ import annotations

from typing import Any

from teapot_lb.octavia.tree import LoadBalancer, Mode, load_balancer_from_provider

PROJECT = "0123456789abcdef0123456789abcdef"
LB_ID = "11111111-1111-4111-8111-111111111111"
LISTENER_ID = "22222222-2222-4222-8222-222222222222"
POOL_ID = "33333333-3333-4333-8333-333333333333"
MONITOR_ID = "44444444-4444-4444-8444-444444444444"


def member(n: int, address: str | None = None, port: int = 80, **over: Any) -> dict[str, Any]:
    return {
        "member_id": f"55555555-5555-4555-8555-5555555555{n:02d}",
        "address": address or f"192.0.2.{10 + n}",
        "protocol_port": port,
        "weight": 1,
        "admin_state_up": True,
        "backup": False,
        "monitor_address": None,
        "monitor_port": None,
        "subnet_id": None,
        "name": f"m{n}",
        "pool_id": POOL_ID,
        **over,
    }


def monitor(**over: Any) -> dict[str, Any]:
    return {
        "healthmonitor_id": MONITOR_ID,
        "type": "TCP",
        "delay": 2,
        "timeout": 1,
        "max_retries": 2,
        "max_retries_down": 2,
        "admin_state_up": True,
        "pool_id": POOL_ID,
        **over,
    }


def pool(
    members: int | list[dict[str, Any]] = 3, *, hm: bool = True, **over: Any
) -> dict[str, Any]:
    """A TCP pool with `members` (a count of `member(i)` or the dictionaries)."""
    return {
        "pool_id": POOL_ID,
        "protocol": "TCP",
        "lb_algorithm": "ROUND_ROBIN",
        "admin_state_up": True,
        "loadbalancer_id": LB_ID,
        "listener_id": LISTENER_ID,
        "session_persistence": None,
        "tls_enabled": False,
        "members": [member(i) for i in range(members)] if isinstance(members, int) else members,
        "healthmonitor": monitor() if hm else None,
        **over,
    }


def listener(**over: Any) -> dict[str, Any]:
    return {
        "listener_id": LISTENER_ID,
        "loadbalancer_id": LB_ID,
        "protocol": "TCP",
        "protocol_port": 80,
        "connection_limit": -1,
        "admin_state_up": True,
        "default_pool_id": POOL_ID,
        "default_pool": None,
        "l7policies": [],
        "allowed_cidrs": None,
        "insert_headers": {},
        "timeout_client_data": 50000,
        **over,
    }


def load_balancer(*, listeners: int = 1, **over: Any) -> dict[str, Any]:
    return {
        "loadbalancer_id": LB_ID,
        "project_id": PROJECT,
        "name": "web",
        "vip_address": "198.51.100.1",
        "admin_state_up": True,
        "flavor": {},
        "availability_zone": {},
        "additional_vips": [],
        "listeners": [listener()] if listeners else [],
        "pools": [pool()],
        **over,
    }


def tree(mode: Mode = Mode.ROUTE, **over: Any) -> LoadBalancer:
    return load_balancer_from_provider(load_balancer(**over), mode)
