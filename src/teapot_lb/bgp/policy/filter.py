"""Rules, their outcomes, and the interpreter: a :class:`Filter` tries its rules in order
and judges routes in batches (see the package's docstring)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeAlias, TypeVar

from ..attributes import Path
from ..wire import Prefix
from ..wire.family import IPV4_UNICAST, Family
from .actions import Accept, Action, Change, Reject, Verdict
from .conditions import Condition, RouteKey

P = TypeVar("P", bound=Path)
_KeyOf: TypeAlias = Callable[[bytes], "RouteKey"]
_Holds: TypeAlias = Callable[[int, int, int], bool]
_SEEN_MAX = 1 << 16  # regions' verdicts a filter remembers (then it starts over)

# ---------------------------------------------------------------------------- rules


@dataclass(frozen=True, slots=True)
class Rule:
    """If every condition in ``when`` holds: apply ``then`` (changes, then at most one
    verdict, last). Without a verdict evaluation goes on to the next rule."""

    when: tuple[Condition, ...] = ()
    then: tuple[Action, ...] = ()
    _changes: tuple[Change, ...] = field(init=False, repr=False, compare=False)
    _verdict: Verdict | None = field(init=False, repr=False, compare=False)
    _on_path: tuple[Condition, ...] = field(init=False, repr=False, compare=False)
    _on_prefix: tuple[Condition, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        verdicts = [i for i, a in enumerate(self.then) if isinstance(a, Accept | Reject)]
        if verdicts and verdicts != [len(self.then) - 1]:
            raise ValueError(f"rule {self}: at most one verdict (accept/reject), and last")
        last = self.then[-1] if verdicts else None
        changes = tuple(a for a in self.then if isinstance(a, Change))
        object.__setattr__(self, "_changes", changes)
        object.__setattr__(self, "_verdict", last)
        object.__setattr__(self, "_on_path", tuple(c for c in self.when if not c.ON_PREFIX))
        object.__setattr__(self, "_on_prefix", tuple(c for c in self.when if c.ON_PREFIX))

    def __str__(self) -> str:
        cond = " && ".join(map(str, self.when)) or "true"
        return f"if {cond} then {{ {'; '.join(map(str, self.then))} }}"


def reject(reason: str, *when: Condition) -> Rule:
    """A rule rejecting, for ``reason``, what matches all of ``when``."""
    return Rule(tuple(when), (Reject(reason),))


def accept(*when: Condition, then: Sequence[Change] = ()) -> Rule:
    """A rule accepting what matches all of ``when``, after ``then``'s changes."""
    return Rule(tuple(when), (*then, Accept()))


def modify(*when: Condition, then: Sequence[Change]) -> Rule:
    """A rule changing what matches all of ``when``; evaluation goes on."""
    return Rule(tuple(when), tuple(then))


# ---------------------------------------------------------------------------- outcomes


@dataclass(frozen=True, slots=True)
class Accepted(Generic[P]):
    path: P


@dataclass(frozen=True, slots=True)
class Rejected:
    reason: str
    rule: int | None  # position in the filter; None: the filter's default
    filter: str = ""

    def __str__(self) -> str:
        where = f"rule {self.rule + 1}" if self.rule is not None else "default"
        name = f"filter {self.filter!r} " if self.filter else ""
        return f"rejected by {name}{where}: {self.reason}"


@dataclass(slots=True)
class Judged(Generic[P]):
    """A batch's outcome: accepted encodings grouped by their (possibly changed) path, and
    rejected encodings grouped by their rejection."""

    accepted: list[tuple[P, list[bytes]]] = field(default_factory=list)
    rejected: list[tuple[Rejected, list[bytes]]] = field(default_factory=list)

    def accepted_count(self) -> int:
        return sum(len(e) for _, e in self.accepted)

    def rejected_count(self) -> int:
        return sum(len(e) for _, e in self.rejected)


# ---------------------------------------------------------------------------- the interpreter


@dataclass(frozen=True, slots=True)
class Filter:
    """A rule list; routes no rule decides get ``default``."""

    rules: tuple[Rule, ...] = ()
    default: Verdict = Accept()  # noqa: RUF009 (a frozen dataclass: one shared value is right)
    name: str = ""
    # The leading rules that reject on prefix sets alone: their verdict is the prefix's,
    # whatever the path. Per rule: (PrefixSet.holds, negated)s.
    _lead: tuple[tuple[tuple[_Holds, bool], ...], ...] = field(
        init=False, repr=False, compare=False
    )
    # Their verdict is kept per *region*: a prefix range test reads a prefix's length and
    # at most its first ``net_len`` bits, so prefixes of one length that agree on their
    # first min(length, deepest range's length) bits get the same verdict from every
    # leading rule. A tenant's 1,000 host routes inside its /118 are one region: judged
    # once, then one dict lookup per prefix (not a walk over the rules).
    _depth: dict[int, int] = field(init=False, repr=False, compare=False)  # by width
    _cuts: dict[tuple[Family, int], tuple[tuple[int, int], ...]] = field(
        init=False, repr=False, compare=False
    )
    _seen: dict[Family, dict[object, int]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        lead: list[tuple[tuple[_Holds, bool], ...]] = []
        depth: dict[int, int] = {}
        for rule in self.rules:
            tests = [c.prefix_test() for c in rule._on_prefix]
            if rule._on_path or not tests or rule._changes or not isinstance(rule._verdict, Reject):
                break
            if any(t is None for t in tests):
                break
            lead.append(tuple((t[0].holds, t[1]) for t in tests if t is not None))
            for test in tests:
                assert test is not None
                for bits, ranges in test[0]._by_bits.items():
                    deepest = max(net_len for _, net_len, _, _ in ranges)
                    depth[bits] = max(depth.get(bits, 0), deepest)
        object.__setattr__(self, "_lead", tuple(lead))
        object.__setattr__(self, "_depth", depth)
        object.__setattr__(self, "_cuts", {})
        object.__setattr__(self, "_seen", {})

    def _cut(self, family: Family, strip: int) -> tuple[tuple[int, int], ...]:
        """Per prefix length (0-255, the encoding's first octet): where a region key ends
        in the encoding (octets, from ``strip`` on) and how far to shift the partial
        octet after it (0: none)."""
        have = self._cuts.get((family, strip))
        if have is None:
            bits = 32 if family == IPV4_UNICAST else 128
            deepest = self._depth.get(bits, 0)
            out = []
            for plen in range(256):
                k = min(plen, deepest, bits)
                out.append((strip + 1 + k // 8, 8 - k % 8 if k % 8 else 0))
            have = self._cuts[(family, strip)] = tuple(out)
        return have

    @property
    def accepts_all(self) -> bool:
        return not self.rules and isinstance(self.default, Accept)

    def judge(self, prefix: Prefix, path: P) -> Accepted[P] | Rejected:
        """One route (explain, tests)."""
        judged = self._run(lambda enc: RouteKey.of(prefix), [b""], path)
        if judged.accepted:
            return Accepted(judged.accepted[0][0])
        return judged.rejected[0][0]

    def judge_batch(
        self, family: Family, encodings: Iterable[bytes], path: P, *, add_path: bool = False
    ) -> Judged[P]:
        """Prefixes in NLRI encoding sharing ``path`` (the receive path, the Adj-RIB-Out);
        ``add_path``: each encoding starts with a 4-octet Path Identifier (RFC 7911)."""
        encs = encodings if isinstance(encodings, list) else list(encodings)
        if add_path:
            key_of: _KeyOf = lambda enc: RouteKey.from_encoding(family, enc[4:])  # noqa: E731
            return self._run(key_of, encs, path, (family, 4))
        return self._run(lambda enc: RouteKey.from_encoding(family, enc), encs, path, (family, 0))

    def _leading(
        self, key_of: _KeyOf, encs: list[bytes], memo: tuple[Family, int], out: Judged[P]
    ) -> list[bytes]:
        """The leading prefix-set rules (:attr:`_lead`) over ``encs``, each prefix's verdict
        remembered per family; returns the encodings none of them rejects."""
        family, strip = memo
        seen = self._seen.setdefault(family, {})
        if len(seen) > _SEEN_MAX:
            seen.clear()
        cut = self._cut(family, strip)
        by_rule: dict[int, list[bytes]] = {}
        passing: list[bytes] = []
        for enc in encs:
            end, shift = cut[enc[strip]]
            region = (enc[strip:end], enc[end] >> shift) if shift else enc[strip:end]
            hit = seen.get(region)
            if hit is None:
                key = key_of(enc)
                bits, value, plen = key.bits, key.value, key.plen
                hit = -1
                for index, tests in enumerate(self._lead):
                    if len(tests) == 1:  # the usual case, without all()
                        holds, negated = tests[0]
                        if holds(bits, value, plen) is not negated:
                            hit = index
                            break
                    elif all(holds(bits, value, plen) is not neg for holds, neg in tests):
                        hit = index
                        break
                seen[region] = hit
            if hit < 0:
                passing.append(enc)
            else:
                by_rule.setdefault(hit, []).append(enc)
        for index in sorted(by_rule):
            verdict = self.rules[index]._verdict
            assert isinstance(verdict, Reject)
            out.rejected.append((Rejected(verdict.reason, index, self.name), by_rule[index]))
        return passing

    def _run(
        self, key_of: _KeyOf, encs: list[bytes], path: P, memo: tuple[Family, int] | None = None
    ) -> Judged[P]:
        """``memo``: the family, and how many octets of an encoding precede the prefix (the
        Path Identifier's); None: the encodings are not prefixes (nothing is remembered)."""
        out: Judged[P] = Judged()
        if self.accepts_all:
            out.accepted.append((path, encs))
            return out
        keys: dict[bytes, RouteKey] = {}
        start = 0
        if memo is not None and self._lead:
            encs = self._leading(key_of, encs, memo, out)
            start = len(self._lead)
        # Groups of routes that took the same way through the rules so far: same path.
        groups: list[tuple[P, list[bytes]]] = [(path, encs)] if encs else []
        for index, rule in enumerate(self.rules):
            if index < start:
                continue
            if not groups:
                return out
            nxt: list[tuple[P, list[bytes]]] = []
            for gpath, genc in groups:
                if not all(c.on_path(gpath) for c in rule._on_path):
                    nxt.append((gpath, genc))
                    continue
                if rule._on_prefix:
                    hit, miss = [], []
                    conds = rule._on_prefix
                    only = conds[0] if len(conds) == 1 else None  # the usual case, no all()
                    test = only.prefix_test() if only is not None else None
                    if test is not None:  # the hottest case: one prefix set, called directly
                        holds, negated = test[0].holds, test[1]
                        for enc in genc:
                            key = keys.get(enc)
                            if key is None:
                                key = keys[enc] = key_of(enc)
                            if holds(key.bits, key.value, key.plen) is not negated:
                                hit.append(enc)
                            else:
                                miss.append(enc)
                    else:
                        for enc in genc:
                            key = keys.get(enc)
                            if key is None:
                                key = keys[enc] = key_of(enc)
                            if (
                                only.on_route(key, gpath)
                                if only is not None
                                else all(c.on_route(key, gpath) for c in conds)
                            ):
                                hit.append(enc)
                            else:
                                miss.append(enc)
                    if miss:
                        nxt.append((gpath, miss))
                    if not hit:
                        continue
                else:
                    hit = genc
                changed = gpath
                for change in rule._changes:
                    changed = change.apply(changed)
                verdict = rule._verdict
                if verdict is None:
                    nxt.append((changed, hit))
                elif isinstance(verdict, Accept):
                    out.accepted.append((changed, hit))
                else:
                    out.rejected.append((Rejected(verdict.reason, index, self.name), hit))
            groups = nxt
            if not groups:
                return out
        for gpath, genc in groups:
            if isinstance(self.default, Accept):
                out.accepted.append((gpath, genc))
            else:
                out.rejected.append((Rejected(self.default.reason, None, self.name), genc))
        return out

    def __str__(self) -> str:
        lines = [f"filter {self.name or '(unnamed)'} {{"]
        lines += [f"  {rule};" for rule in self.rules]
        lines.append(f"  {self.default};")
        return "\n".join(lines) + "\n}"


ACCEPT_ALL = Filter()
