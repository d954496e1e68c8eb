"""What every namespaced lab group (``ovn``, ``relay``, ``gateway``) does around its steps:
skip with the reason when it cannot run, a work directory and a
:class:`~teapot_lb.netlab.Topology` of its own, the group's failures into ``errors``, and
everything removed on the way out."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, TypeVar

from teapot_lb.lab.wait import LabTimeout
from teapot_lb.netlab import Topology, netns_available


class Result(Protocol):
    skipped: str | None
    errors: list[str]


R = TypeVar("R", bound=Result)
R_contra = TypeVar("R_contra", bound=Result, contravariant=True)


class Group(Protocol[R_contra]):
    def run(self, result: R_contra, /) -> None: ...

    def close(self) -> None: ...


def run_group(
    name: str,
    result: R,
    make: Callable[[Path, Topology], Group[R]],
    progress: Callable[[str], None],
    workdir: Path | None,
    missing: str | None,
) -> None:
    """Run the group ``make`` builds into ``result`` (``missing``: what is not installed)."""
    reason = netns_available() or missing
    if reason:
        result.skipped = reason
        progress(f"lab: {name}: skipped: {reason}")
        return
    own = workdir is None
    work = workdir or Path(tempfile.mkdtemp(prefix=f"teapot-lab-{name}-"))
    work.mkdir(parents=True, exist_ok=True)
    with Topology(f"{name}lab") as topology:
        group = make(work, topology)
        try:
            group.run(result)
        except (LabTimeout, RuntimeError, OSError, ValueError, subprocess.SubprocessError) as exc:
            result.errors.append(str(exc))
        finally:
            group.close()
    if own:
        shutil.rmtree(work, ignore_errors=True)
