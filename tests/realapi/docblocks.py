"""The commands a document tells a user to run: fenced ```sh blocks marked for a test with
an HTML comment on the line before them (`<!-- test: TARGET -->`, blank lines between
allowed), in the order written, with the indentation of a list item taken off."""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

_MARK = re.compile(r"^\s*<!-- test: ([\w-]+) -->\s*$")
_FENCE = re.compile(r"^(\s*)```(\w*)\s*$")


@dataclass(frozen=True)
class DocBlock:
    target: str  # what the block runs against (`management`, `tenant`...)
    code: str
    line: int  # of its first command, 1-based

    def where(self, doc: Path) -> str:
        return f"{doc.name}:{self.line}"


def marked_blocks(text: str) -> list[DocBlock]:
    """Every marked block of `text`; a mark not followed by a ```sh block is an error."""
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
        if fence is None or fence.group(2) != "sh":
            raise ValueError(f"line {i}: a test mark must be followed by a ```sh block")
        start = i + 1
        end = start
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        body = textwrap.dedent("\n".join(lines[start:end])) + "\n"
        blocks.append(DocBlock(mark.group(1), body, start + 1))
        i = end + 1
    return blocks
