"""What the controller is told at start."""

from __future__ import annotations

from dataclasses import dataclass

from teapot_lb.model import LOAD_BALANCER_CLASS, Service
from teapot_lb.model.service import ANNOTATION_ALLOCATED_FROM as ANNOTATION_ALLOCATED_FROM

# ANNOTATION_ALLOCATED_FROM: set by the controller on a Service, the AddressPool its IPs
# come from (defined with the Service model: the validation rules read it too).


@dataclass(frozen=True)
class ControllerOptions:
    """`load_balancer_class`: the `spec.loadBalancerClass` we serve. `class_only`: serve only
    Services that name it (otherwise also LoadBalancer Services that name no class)."""

    load_balancer_class: str = LOAD_BALANCER_CLASS
    class_only: bool = False

    def handles(self, service: Service) -> bool:
        return service.is_handled(self.load_balancer_class, unclassed=not self.class_only)
