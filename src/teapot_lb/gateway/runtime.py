"""HAProxy's runtime API, sans-I/O: typed actions → command text, answers → typed results.

A single command goes over a connection of its own (non-interactive mode): its answer is
the text until HAProxy closes the connection. The commands of one apply go over one
connection (`conversation`): interactive mode (`prompt`), where HAProxy ends every answer
with the prompt, so the text received splits back into one answer per command
(`answers`). A failure is an answer that is not the expected one, or none at all (the
connection ended first); it is reported as that command's, with its text (`refusal`).
`gateway.haproxy` only moves the bytes. Commands: HAProxy 2.6 management guide, sections
9.3 (commands) and 9.2 (interactive mode; a payload after `<<` ends at an empty line).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from teapot_lb.gateway.plan import (
    AddCertificate,
    AddMapEntry,
    DelMapEntry,
    RemoveCertificate,
    RuntimeAction,
    SetCertificate,
    SetServer,
)


@dataclass(frozen=True)
class Command:
    """One runtime API command and how to tell its answer went well."""

    text: str
    ok: tuple[str, ...] = ("",)
    """The answer (stripped) is fine when it starts with one of these ('' accepts any
    answer that is empty)."""

    def accepts(self, answer: str) -> bool:
        answer = answer.strip()
        return any(answer.startswith(p) if p else not answer for p in self.ok)


def commands(action: RuntimeAction) -> list[Command]:
    """The commands that perform one action, in order."""
    if isinstance(action, SetServer):
        where = f"{action.backend}/{action.server}"
        out: list[Command] = []
        if action.address is not None:
            # "IP changed from ... to ..., port changed ..." or "no need to change ..."
            out.append(
                Command(
                    f"set server {where} addr {action.address} port {action.port}",
                    ("IP changed", "no need to change", "port changed"),
                )
            )
        out.append(Command(f"set server {where} state {action.state}"))
        return out
    if isinstance(action, AddCertificate):
        return _added(action)
    if isinstance(action, RemoveCertificate):
        # "Entry '<cert>' deleted in crtlist '<list>'!", "Certificate '<cert>' deleted!"
        out = [Command(f"del ssl crt-list {action.crt_list} {action.path}", ("Entry",))]
        if action.unload:
            out.append(Command(f"del ssl cert {action.path}", ("Certificate",)))
        return out
    if isinstance(action, AddMapEntry):
        # (map keys and values are names and ids: no space, nothing to escape)
        verb = "set" if action.replace else "add"
        return [Command(f"{verb} map {action.path} {action.key} {action.value}")]
    if isinstance(action, DelMapEntry):
        return [Command(f"del map {action.path} {action.key}")]
    return _certificate(action)


def _added(action: AddCertificate) -> list[Command]:
    out = []
    if not action.loaded:
        out.append(Command(f"new ssl cert {action.path}", ("New empty certificate store",)))
        out += _certificate(SetCertificate(action.path, action.pem))
    # The payload is the crt-list line as in the file: the certificate, its SNI filters.
    add = f"add ssl crt-list {action.crt_list} <<\n{action.line}\n"
    out.append(Command(add, ("Inserting certificate", "Success")))
    return out


def _certificate(action: SetCertificate) -> list[Command]:
    # The payload follows "<<" and ends at an empty line: a PEM has none inside.
    pem = "\n".join(line for line in action.pem.splitlines() if line.strip())
    return [
        Command(
            f"set ssl cert {action.path} <<\n{pem}\n",
            ("Transaction created", "Transaction updated"),
        ),
        Command(f"commit ssl cert {action.path}", ("Committing", "Success")),
    ]


def master(text: str, ok: tuple[str, ...] = ("",)) -> Command:
    """A command for the master CLI (`-S`), which keeps the connection open after an
    answer unless told to `quit`."""
    return Command(f"{text};quit", ok)


PROMPT = "\n> "
"""What HAProxy writes after each answer in interactive mode."""
PAYLOAD_PROMPT = "+ "
"""What it writes, in interactive mode, for each line of a command with a payload (`<<`)
before the empty line that ends it, so ahead of that command's answer."""


def conversation(commands: Sequence[Command]) -> bytes:
    """What to write on one admin-socket connection to run `commands` in order:
    interactive mode on, each command on its line (a payload command's text ends with its
    payload's last line: the empty line after it ends the payload), then `quit`, so
    HAProxy closes the connection after the last answer."""
    return "".join(["prompt\n", *(c.text + "\n" for c in commands), "quit\n"]).encode()


@dataclass(frozen=True)
class Answer:
    """A command and what HAProxy answered (None: no answer came)."""

    command: Command
    text: str | None

    @property
    def ok(self) -> bool:
        return self.text is not None and self.command.accepts(self.text)


def answers(commands: Sequence[Command], received: str) -> list[Answer]:
    """The text a `conversation` received, split into each command's answer. The first
    prompt follows `prompt`'s own (empty) answer; the text after the last prompt is
    `quit`'s (none) or, when the connection ended early, an answer cut short, which
    counts as none."""
    pieces = received.split(PROMPT)[1:-1]
    out = []
    for i, command in enumerate(commands):
        if i >= len(pieces):
            out.append(Answer(command, None))
            continue
        text = pieces[i]
        for _ in range(command.text.count("\n")):  # (the payload's prompts, if any)
            text = text.removeprefix(PAYLOAD_PROMPT)
        out.append(Answer(command, text))
    return out


def refusal(found: Sequence[Answer]) -> str | None:
    """Why a conversation failed (None: every answer was the expected one): the first
    command refused or unanswered, its text and HAProxy's, and how many more failed."""
    failed = [a for a in found if not a.ok]
    if not failed:
        return None
    first = failed[0]
    command = first.command.text.splitlines()[0]
    if first.text is None:
        answered = sum(a.text is not None for a in found)
        why = (
            f"no answer to {command!r} (the connection ended after "
            f"{answered} of {len(found)} answers)"
        )
    else:
        why = f"HAProxy refused {command!r}: {first.text.strip()[:300]}"
    if len(failed) > 1:
        why += f" (and {len(failed) - 1} more of the {len(found)} commands failed)"
    return why


def show_stat() -> Command:
    """`show stat` as CSV (metrics, readiness of servers)."""
    return Command("show stat", ("#",))


def show_info() -> Command:
    return Command("show info", ("Name:",))


@dataclass(frozen=True)
class StatRow:
    """One line of `show stat`: a frontend, backend or server and its counters."""

    proxy: str
    service: str  # FRONTEND, BACKEND or the server's name
    status: str
    requests: int  # req_tot (HTTP) or stot (sessions, TCP)
    errors: int  # 5xx responses (HTTP) or econ + eresp (TCP)
    bytes_in: int
    bytes_out: int
    address: str
    sessions: int = 0  # stot: connections (HTTP: streams) handled
    current: int = 0  # scur: connections open now
    check: str = ""  # check_status: the last health check's result (L4OK, L7STS, ...)


def _int(value: str) -> int:
    return int(value) if value.isdigit() else 0


def parse_stat(csv_text: str) -> list[StatRow]:
    """`show stat` CSV → rows (the header line names the columns)."""
    lines = csv_text.splitlines()
    if not lines or not lines[0].startswith("#"):
        return []
    names = lines[0].lstrip("# ").split(",")
    rows = []
    for line in lines[1:]:
        if not line.strip():
            continue
        f = dict(zip(names, line.split(","), strict=False))
        http = f.get("mode") == "http"
        requests = _int(f.get("req_tot", "")) if http else _int(f.get("stot", ""))
        errors = (
            _int(f.get("hrsp_5xx", ""))
            if http
            else _int(f.get("econ", "")) + _int(f.get("eresp", ""))
        )
        rows.append(
            StatRow(
                f.get("pxname", ""),
                f.get("svname", ""),
                f.get("status", ""),
                requests,
                errors,
                _int(f.get("bin", "")),
                _int(f.get("bout", "")),
                f.get("addr", ""),
                _int(f.get("stot", "")),
                _int(f.get("scur", "")),
                f.get("check_status", ""),
            )
        )
    return rows


def parse_info(text: str) -> dict[str, str]:
    """`show info` → field: value (Pid, Uptime_sec, ...)."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out
