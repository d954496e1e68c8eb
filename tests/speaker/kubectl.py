"""A tiny kubectl for namespace tests: run inside a namespace, talks to the fake API server.

    python -m speaker.kubectl KUBECONFIG apply FILE.json       # create, or replace spec
    python -m speaker.kubectl KUBECONFIG status FILE.json      # patch the status subresource
    python -m speaker.kubectl KUBECONFIG get KIND NAMESPACE NAME   # prints JSON
    python -m speaker.kubectl KUBECONFIG delete KIND NAMESPACE NAME

KIND is a resource name of :mod:`teapot_lb.kube.resources` (services, nodes, bgppeers …).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from pathlib import Path
from typing import Any

from teapot_lb.kube import resources
from teapot_lb.kube.client import connect
from teapot_lb.kube.errors import AlreadyExists, Conflict, NotFound

BY_KIND = {
    r.kind: r
    for r in vars(resources).values()
    if isinstance(r, resources.Resource)  # the module's Resource constants
}
BY_PLURAL = {r.plural: r for r in BY_KIND.values()}


async def main(kubeconfig: str, verb: str, rest: list[str], docs: list[dict[str, Any]]) -> int:
    async with await connect(kubeconfig) as client:
        if verb in ("apply", "status"):
            for doc in docs:
                res = BY_KIND[doc["kind"]]
                meta = doc["metadata"]
                ns = meta.get("namespace") if res.namespaced else None
                if verb == "status":
                    await client.patch(
                        res, meta["name"], {"status": doc["status"]}, namespace=ns, status=True
                    )
                    continue
                try:
                    await client.create(res, doc)
                except (AlreadyExists, Conflict):
                    current = await client.get(res, meta["name"], ns)
                    doc["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
                    await client.replace(res, doc)
            return 0
        if verb == "get":
            plural, namespace, name = rest
            try:
                obj = await client.get(BY_PLURAL[plural], name, namespace or None)
            except NotFound:
                print("null")
                return 0
            print(json.dumps(obj))
            return 0
        if verb == "delete":
            plural, namespace, name = rest
            with contextlib.suppress(NotFound):
                await client.delete(BY_PLURAL[plural], name, namespace or None)
            return 0
    return 2


def cli(argv: list[str]) -> int:
    kubeconfig, verb, *rest = argv
    docs = json.loads(Path(rest[0]).read_text()) if verb in ("apply", "status") else []
    return asyncio.run(main(kubeconfig, verb, rest, docs))


if __name__ == "__main__":
    sys.exit(cli(sys.argv[1:]))
