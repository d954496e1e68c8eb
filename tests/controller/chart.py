"""The charts, rendered by real Helm (`helm template`), for the tests that read them.

Helm is not a dependency of the product: the tests use the upstream binary from
``../shared/helm/bin/helm`` beside the project (or ``$TEAPOT_HELM``) and skip, saying so,
where it is absent (a user's fresh clone has no ``../shared``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "teapot-lb"
_SOURCE = re.compile(r"^# Source: [^/\n]+/templates/(?P<name>[^\n]+)$", re.M)


def helm_binary() -> Path | None:
    """``$TEAPOT_HELM``, else ``../shared/helm/bin/helm`` beside the project, else the
    virtualenv's (``TEAPOT_INSTALL_HELM=1 scripts/setup.sh``) or one on PATH."""
    named = os.environ.get("TEAPOT_HELM")
    on_path = shutil.which("helm")
    candidates = (
        [Path(named)]
        if named
        else [
            ROOT.parent / "shared" / "helm" / "bin" / "helm",
            ROOT / ".venv" / "bin" / "helm",
            *([Path(on_path)] if on_path else []),
        ]
    )
    return next((c for c in candidates if c.is_file() and os.access(c, os.X_OK)), None)


def helm(*args: str, kubeconfig: Path | None = None) -> str:
    """Run helm with ``args`` and return its standard output; skip the test without helm."""
    binary = helm_binary()
    if binary is None:
        pytest.skip(
            "helm not found: put ../shared/helm/bin/helm beside the project, set TEAPOT_HELM, "
            "or run TEAPOT_INSTALL_HELM=1 scripts/setup.sh"
        )
    cmd = [str(binary), *args]
    if kubeconfig is not None:
        cmd.append(f"--kubeconfig={kubeconfig}")
    # Helm keeps caches and its repository configuration under these: a test must not
    # read or write the user's.
    home = Path(tempfile.gettempdir()) / "teapot-lb-helm"
    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
    return done.stdout


def _run_chart(
    command: tuple[str, ...],
    values: Mapping[str, Any] | None,
    *,
    namespace: str = "teapot-lb-system",
    release: str = "teapot-lb",
    chart: Path = CHART,
) -> str:
    """helm ``command`` RELEASE CHART -n NAMESPACE, with ``values`` as a values file."""
    with tempfile.TemporaryDirectory() as tmp:
        given: list[str] = []
        if values:
            path = Path(tmp) / "values.json"  # JSON is YAML: helm reads it with -f
            path.write_text(json.dumps(values))
            given = ["-f", str(path)]
        return helm(command[0], release, str(chart), "-n", namespace, *command[1:], *given)


def render_manifest(values: Mapping[str, Any] | None = None, **kwargs: Any) -> str:
    """`helm template RELEASE CHART -n NAMESPACE` with ``values``: one multi-document file."""
    return _run_chart(("template",), values, **kwargs)


def render_chart(values: Mapping[str, Any] | None = None, **kwargs: Any) -> dict[str, str]:
    """Every template rendered: `{template file name: YAML text}` (its documents joined)."""
    rendered: dict[str, list[str]] = {}
    for doc in re.split(r"^---\s*$", render_manifest(values, **kwargs), flags=re.M):
        found = _SOURCE.search(doc)
        if found:
            rendered.setdefault(found["name"], []).append(doc.strip() + "\n")
    return {name: "---\n" + "---\n".join(docs) for name, docs in sorted(rendered.items())}


def render_objects(values: Mapping[str, Any] | None = None, **kwargs: Any) -> list[dict[str, Any]]:
    """The rendered chart as Kubernetes objects (empty documents dropped)."""
    return [doc for doc in yaml.safe_load_all(render_manifest(values, **kwargs)) if doc]


def render_notes(values: Mapping[str, Any] | None = None, **kwargs: Any) -> str:
    """The install notes (NOTES.txt) as `helm install` prints them (a client-side dry run)."""
    out = _run_chart(("install", "--dry-run=client"), values, **kwargs)
    return out.split("\nNOTES:\n", 1)[1] if "\nNOTES:\n" in out else ""
