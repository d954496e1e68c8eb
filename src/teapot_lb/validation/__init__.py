"""Validation of configurations: pure functions from objects to a list of Problems.

Used by `teapot-lb validate`, the standalone loader and the admission webhook. Shape errors
(types, syntax of a field) come from the models when parsing (`teapot_lb.model.manifest`);
the rules here check what needs several fields or several objects.
"""

from teapot_lb.model.problem import Problem
from teapot_lb.validation.config import ConfigSet
from teapot_lb.validation.rules import validate, validate_change, validate_manifest

__all__ = ["ConfigSet", "Problem", "validate", "validate_change", "validate_manifest"]
