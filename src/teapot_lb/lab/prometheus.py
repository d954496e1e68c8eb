"""A real Prometheus in one of the lab's namespaces, scraping the lab's components.

The lab's processes serve ``/metrics`` on addresses inside its namespaces, which the root
namespace cannot reach; Prometheus runs in a lab namespace that routes to all of them
(``host``), listens on that namespace's loopback, and is queried through a socket made
inside it (:func:`teapot_lb.lab.netns.in_netns`). Used by the dashboard test
(tests/monitoring) to run every dashboard query against live data, and to see which
alerts fire.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from teapot_lb.lab.netns import in_netns
from teapot_lb.lab.processes import terminate
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Host

LISTEN = "127.0.0.1:9090"


class PromQLError(Exception):
    """Prometheus refused a query (bad syntax, bad function use); the message is its own."""


class Prometheus:
    """``prometheus`` in ``host``'s namespace with its data in ``workdir``."""

    def __init__(self, host: Host, workdir: Path, *, scrape_interval: float = 1.0) -> None:
        self.host = host
        self.workdir = workdir
        self.scrape_interval = scrape_interval
        self.proc: subprocess.Popen[bytes] | None = None

    def config(
        self, jobs: Mapping[str, Mapping[str, str]], rule_files: Sequence[Path] = ()
    ) -> dict[str, Any]:
        every = f"{round(self.scrape_interval * 1000)}ms"  # Prometheus wants whole units
        return {
            "global": {"scrape_interval": every, "evaluation_interval": every},
            "rule_files": [str(p) for p in rule_files],
            "scrape_configs": [
                {
                    "job_name": job,
                    # `component` as the chart's PodMonitor sets it (the rules use it), and
                    # the lab node's name.
                    "static_configs": [
                        {
                            "targets": [target],
                            "labels": {"component": job, **({"node": node} if node else {})},
                        }
                        for target, node in targets.items()
                    ],
                }
                for job, targets in jobs.items()
            ],
        }

    def start(self, jobs: Mapping[str, Mapping[str, str]], rule_files: Sequence[Path] = ()) -> None:
        """Start scraping ``jobs`` (job name → ``host:port`` target → node name, or "")
        and wait until the HTTP API answers."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "prometheus.yml"
        config.write_text(yaml.safe_dump(self.config(jobs, rule_files), sort_keys=False))
        log = (self.workdir / "prometheus.log").open("ab")
        self.proc = self.host.popen(
            [
                "prometheus",
                f"--config.file={config}",
                f"--storage.tsdb.path={self.workdir / 'data'}",
                f"--web.listen-address={LISTEN}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        wait_for(self._ready, timeout=30, what="Prometheus to answer", every=0.1, detail=self.log)

    def log(self) -> str:
        path = self.workdir / "prometheus.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def _ready(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"prometheus exited:\n{self.log()}")
        try:
            status, _ = self._get("/-/ready")
        except OSError:
            return False
        return status == 200  # 503 while it starts up

    def _get(self, path: str, params: Mapping[str, str] | None = None) -> tuple[int, bytes]:
        """(HTTP status, body), from inside the namespace."""
        url = f"http://{LISTEN}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)

        def fetch() -> tuple[int, bytes]:
            try:
                with urllib.request.urlopen(url, timeout=10) as reply:
                    return int(reply.status), reply.read()
            except urllib.error.HTTPError as err:
                return err.code, err.read()  # the API's error document (400/422/503)

        return in_netns(self.host.ns, fetch)

    def api(self, path: str, params: Mapping[str, str] | None = None) -> Any:
        """The ``data`` of an HTTP API answer; :class:`PromQLError` when it failed."""
        status, body = self._get(path, params)
        try:
            doc = json.loads(body)
        except ValueError:
            raise PromQLError(f"HTTP {status}: {body[:200]!r}") from None
        if doc.get("status") != "success":
            raise PromQLError(f"{doc.get('errorType')}: {doc.get('error')}")
        return doc["data"]

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        """An instant query's result vector (a scalar result as one sample without labels)."""
        params = {"query": expr, "time": f"{at if at is not None else time.time():.3f}"}
        data = self.api("/api/v1/query", params)
        if data["resultType"] == "scalar":
            return [{"metric": {}, "value": data["result"]}]
        result: list[dict[str, Any]] = data["result"]
        return result

    def targets(self) -> dict[str, str]:
        """Scrape URL → health (``up``, ``down``, ``unknown``)."""
        data = self.api("/api/v1/targets")
        return {t["scrapeUrl"]: t["health"] for t in data["activeTargets"]}

    def alerts(self) -> list[dict[str, Any]]:
        """The alerts pending or firing now (labels, state, activeAt)."""
        data = self.api("/api/v1/alerts")
        alerts: list[dict[str, Any]] = data["alerts"]
        return alerts

    def stop(self) -> None:
        terminate(self.proc)
