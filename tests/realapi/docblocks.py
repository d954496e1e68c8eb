"""The commands a document tells a user to run: fenced ```sh blocks marked for a test with
an HTML comment on the line before them (`<!-- test: TARGET -->`, blank lines between
allowed), in the order written, with the indentation of a list item taken off; the
files it tells the user to write (`<!-- test: file NAME -->` before any fenced block);
and the commands it says are refused (`<!-- test: TARGET refused -->`: the block must
fail, and the text of its `# -> refused: ... TEXT` line must be in what it printed)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shlex
import subprocess
import textwrap
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from needs import require_kube
from teapot_lb.lab.kubeplane import ControlPlane
from teapot_lb.netlab.topology import Host

_MARK = re.compile(r"^\s*<!-- test: ([\w-]+)(?: ([\w./-]+))? -->\s*$")
_FENCE = re.compile(r"^(\s*)```(\w*)\s*$")
_REFUSAL = re.compile(r"#\s*-> refused:\s*(?:\.\.\.)?(.*)$", re.MULTILINE)


@dataclass(frozen=True)
class DocBlock:
    target: str  # what the block runs against (`management`, `tenant`...), or `file`
    code: str
    line: int  # of its first command, 1-based
    file: str | None = None  # for a `file` block: the name to write it as
    refused: bool = False  # the docs say its command fails

    def refusal(self) -> str:
        """What the docs say a refused block prints (after `-> refused:` and `...`)."""
        said = _REFUSAL.search(self.code)
        assert said, f"line {self.line}: a refused block says what is printed (# -> refused: ...)"
        return said.group(1).strip()

    def where(self, doc: Path) -> str:
        return f"{doc.name}:{self.line}"


def marked_blocks(text: str) -> list[DocBlock]:
    """Every marked block of `text`; a mark not followed by a ```sh block (any fenced
    block for a file) is an error."""
    lines = text.splitlines()
    blocks = []
    i = 0
    while i < len(lines):
        mark = _MARK.match(lines[i])
        i += 1
        if not mark:
            continue
        while i < len(lines) and not lines[i].strip():
            i += 1
        fence = _FENCE.match(lines[i]) if i < len(lines) else None
        is_file = mark.group(1) == "file"
        if fence is None or (fence.group(2) != "sh" and not is_file):
            raise ValueError(f"line {i}: a test mark must be followed by a ```sh block")
        start = i + 1
        end = start
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        body = textwrap.dedent("\n".join(lines[start:end])) + "\n"
        extra = mark.group(2)
        if not is_file and extra not in (None, "refused"):
            raise ValueError(f"line {i}: a command block's mark may only add `refused`")
        name = extra if is_file else None
        blocks.append(DocBlock(mark.group(1), body, start + 1, name, extra == "refused"))
        i = end + 1
    return blocks


def documented(doc: Path, substitutions: Mapping[str, str]) -> list[DocBlock]:
    """The marked blocks of `doc`; each substitution's text must be in them once (a docs
    change that drops it fails here, not later)."""
    blocks = marked_blocks(doc.read_text())
    text = "".join(b.code for b in blocks)
    for old in substitutions:
        assert text.count(old) == 1, f"{doc.name} no longer says {old!r} once"
    return blocks


async def run_block(
    doc: Path,
    block: DocBlock,
    plane: ControlPlane,
    workdir: Path,
    substitutions: Mapping[str, str],
) -> None:
    """Run one block as the user would (`bash -euo pipefail`, `kubectl` at `plane`, in
    `workdir`), or write its file there; a failure names the block's line in `doc`."""
    env = {**os.environ, "KUBECONFIG": str(plane.admin_kubeconfig)}
    await run_commands(doc, block, workdir, substitutions, env)


class Shell:
    """One shell session of a user across blocks: what a block exports (`source openrc`,
    `export PATH=...`) the next one has, as in the terminal the docs are read in."""

    def __init__(self, workdir: Path) -> None:
        self.state = workdir / ".doc-shell-exports"

    def wrap(self, code: str) -> str:
        saved = shlex.quote(str(self.state))
        restore = f"source {saved}\n" if self.state.exists() else ""
        return f"{restore}trap 'export -p > {saved}' EXIT\n{code}"


async def run_commands(
    doc: Path,
    block: DocBlock,
    workdir: Path,
    substitutions: Mapping[str, str],
    env: Mapping[str, str],
    shell: Shell | None = None,
    host: Host | None = None,
) -> str:
    """Run one block as the user would (`bash -euo pipefail` in `workdir` with `env`,
    in `shell`'s session when given, on `host` when given), or write its file there;
    returns what it printed.
    A block that fails, or a refused block that does not fail or prints something else
    than the docs say, fails naming the block's line in `doc`."""
    code = _substituted(block, substitutions)
    if block.file is not None:
        (workdir / block.file).parent.mkdir(parents=True, exist_ok=True)
        (workdir / block.file).write_text(code)
        return ""
    argv = _bash(shell.wrap(code) if shell else code, host)
    process = await asyncio.create_subprocess_exec(
        *argv, cwd=workdir, env=dict(env),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out_bytes, err_bytes = await asyncio.wait_for(process.communicate(), timeout=180)
    out, err = out_bytes.decode(), err_bytes.decode()
    said = f"{block.where(doc)}:\n{code}\nstdout:\n{out}\nstderr:\n{err}"
    if not block.refused:
        assert process.returncode == 0, f"failed ({process.returncode}) {said}"
        return out
    assert process.returncode != 0, f"was not refused {said}"
    assert block.refusal() in out + err, f"not refused as the docs say ({block.refusal()!r}) {said}"
    return out + err


def start_commands(
    block: DocBlock, workdir: Path, substitutions: Mapping[str, str], host: Host, log: Path
) -> subprocess.Popen[bytes]:
    """Start a block whose command keeps running (a daemon the docs start) on `host`,
    its output in `log`; the host's namespace kills it at teardown."""
    with log.open("ab") as out:
        return host.popen(_bash(_substituted(block, substitutions)), cwd=workdir,
                          stdout=out, stderr=subprocess.STDOUT)  # fmt: skip


def _substituted(block: DocBlock, substitutions: Mapping[str, str]) -> str:
    code = block.code
    for old, new in substitutions.items():
        code = code.replace(old, new)
    return code


def _bash(code: str, host: Host | None = None) -> list[str]:
    argv = ["bash", "-euo", "pipefail", "-c", code]
    return host.exec_argv(argv) if host is not None else argv


@contextmanager
def fresh_planes(workdir: Path, *names: str) -> Iterator[dict[str, ControlPlane]]:
    """A kube-apiserver of its own per name (the docs' names are fixed: teapot-lb-system,
    cluster-wide webhooks; so not the session's shared control plane), stopped after."""
    require_kube()
    planes = {n: ControlPlane(workdir / n, controller_manager=False) for n in names}
    try:
        for plane in planes.values():
            plane.start()
        yield planes
    finally:
        for plane in planes.values():
            plane.close()


# --- what a kubelet would read of what the docs applied --------------------------------


def kubectl_json(plane: ControlPlane, *args: str) -> dict[str, Any]:
    return dict(json.loads(plane.kubectl(*args, "-o", "json")))


def container_args(plane: ControlPlane, namespace: str, deployment: str) -> list[str]:
    """The one container's arguments of a Deployment as applied."""
    found = kubectl_json(plane, "-n", namespace, "get", "deployment", deployment)
    (container,) = found["spec"]["template"]["spec"]["containers"]
    return list(container["args"])


def arg(args: list[str], name: str) -> str | None:
    prefix = f"--{name}="
    return next((a.removeprefix(prefix) for a in args if a.startswith(prefix)), None)


def mounted_secret(
    plane: ControlPlane, namespace: str, name: str, workdir: Path
) -> dict[str, Path]:
    """A Secret's keys as files (as its volume mounts them), by key."""
    secret = kubectl_json(plane, "-n", namespace, "get", "secret", name)
    files = {}
    for key, value in secret["data"].items():
        path = workdir / f"mounted-{name}-{key}"
        path.write_bytes(base64.b64decode(value))
        files[key] = path
    return files


def service_account_kubeconfig(plane: ControlPlane, namespace: str, account: str) -> Path:
    """A kubeconfig with a TokenRequest token of the ServiceAccount (as its pod gets)."""
    token = plane.service_account_token(namespace, account)
    return plane.token_kubeconfig(token, f"{account}-{namespace}", namespace=namespace)


def webhook_by_url(plane: ControlPlane, name: str, port: int) -> None:
    """The cluster network's stand-in: the configuration's webhooks reach this host's
    `port` by URL instead of through their Service (the CA stays what the docs set)."""
    config = kubectl_json(plane, "get", "validatingwebhookconfiguration", name)
    patch = []
    for i, hook in enumerate(config["webhooks"]):
        client = hook["clientConfig"]
        url = {"url": f"https://127.0.0.1:{port}{client['service'].get('path', '/')}",
               "caBundle": client["caBundle"]}  # fmt: skip
        patch.append({"op": "replace", "path": f"/webhooks/{i}/clientConfig", "value": url})
    plane.kubectl("patch", "validatingwebhookconfiguration", name, "--type=json",
                  "-p", json.dumps(patch))  # fmt: skip
