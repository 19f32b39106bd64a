"""`pfar audit verify`: walk an audit log's chain and name where it breaks.

One pass over the file, in order, keeping only the record the chain stands on and the
numbers found missing so far (so a log of millions of records is walked in bounded
memory). What a break means is read from the records' numbers and digests:

- record k+1 does not chain to record k: record k was edited; when record k does not
  chain to record k-1 either, both of record k's links failed: record k was edited;
- numbers k..m missing where the chain goes on: removed, unless they turn up later out of
  place (reordered), or a line that is not a record stands where they were (edited or
  damaged);
- a number that came already, or a line that is not a record between two records that
  chain: inserted.

A line that is not a record but that the next start bridged (audit_chain) is a torn write
or a line from before the chain: a note, not a finding. So is the last line of a file
whose write a crash cut off. A checkpoint (a head kept elsewhere) finds a tail cut off.
"""

from __future__ import annotations

from pathlib import Path

from .audit_chain import (
    BRIDGES,
    EMPTY,
    AuditHead,
    Record,
    Unchained,
    line_digest,
    parse_line,
)
from .audit_findings import (
    START,
    Findings,
    Gap,
    Odd,
    Seen,
    compare_checkpoint,
    lines_text,
    missing_file,
    missing_records,
    odd_at_end,
    order,
)
from .audit_verdict import Finding, Note, Verdict


def verify(path: Path, checkpoint: AuditHead | None = None) -> Verdict:
    """Walk `path`'s chain; compare it with `checkpoint` when one is given: the log must
    reach its record, with its digest (an empty digest checks the number alone). Raises
    OSError when the file cannot be read (a missing file is a verdict)."""
    walk = _Walk(checkpoint)
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        walk.missing(path)
        return walk.verdict(path, exists=False)
    with fh:
        for raw in fh:
            walk.line(raw)
    walk.end()
    return walk.verdict(path, exists=True)


class _Walk(Findings):
    def __init__(self, checkpoint: AuditHead | None) -> None:
        super().__init__()
        self.checkpoint = checkpoint
        self.base = START  # the record the chain stands on
        self.twin: Seen | None = None  # a second record with base's number and prev
        self.pending: tuple[Seen, Seen] | None = None  # a broken link, judged at the next
        self.reported: Seen | None = None  # said edited: the link after it is not said
        self.odd: list[Odd] = []  # lines that are not records, since the last record
        self.gaps: list[Gap] = []
        self.at_checkpoint: Seen | None = None
        self.lines = 0
        self.records = 0

    # -- one line --------------------------------------------------------------------

    def line(self, raw: bytes) -> None:
        self.lines += 1
        newline = raw.endswith(b"\n")
        text = raw[:-1] if newline else raw
        parsed = parse_line(text)
        digest = line_digest(text)
        if not isinstance(parsed, Record):
            self.odd.append(Odd(self.lines, digest, isinstance(parsed, Unchained), newline))
            return
        self.records += 1
        seen = Seen(parsed.n, self.lines, parsed.event, digest, parsed.prev)
        damaged = None
        if self.odd:
            if self._bridged(seen, parsed):
                return
            damaged = self._odd_between(seen)
        self._record(seen, damaged)

    def _bridged(self, seen: Seen, record: Record) -> bool:
        """Lines that are not records, and a record that bridges them as a start does."""
        odd, base = self.odd, self.base
        if not (
            record.event in BRIDGES
            and seen.prev == odd[-1].digest
            and record.after == base.digest
            and seen.n == base.n + 1
        ):
            return False
        self._judge_pending(seen, bridged=True)
        before_any = base is START
        for o in odd:
            if o.unchained and before_any:
                continue
            self.notes.append(
                Note(
                    "torn",
                    o.line,
                    f"line {o.line} is not a whole record: a write cut off "
                    f"(a crash); the next start recorded it ({seen.named()})",
                )
            )
        from_before = [o.line for o in odd if o.unchained and before_any]
        if from_before:
            self.notes.append(
                Note(
                    "unchained",
                    from_before[0],
                    f"{lines_text(from_before)} were written before the audit log was "
                    "chained (an older pfar): they cannot be verified",
                )
            )
        self.odd = []
        self._advance(seen)
        return True

    def _odd_between(self, seen: Seen) -> list[int] | None:
        """Lines that are not records, not bridged, before `seen`: where numbers are
        missing they stand in their place (edited or damaged), else they were inserted."""
        lines = [o.line for o in self.odd]
        self.odd = []
        if seen.n > self.base.n + 1 and seen.prev != self.base.digest:
            return lines
        self._inserted(lines)
        return None

    def _inserted(self, lines: list[int]) -> None:
        for line in lines:
            self.find(
                "inserted",
                line,
                None,
                None,
                f"line {line} is not an audit record, and stands between records that chain "
                "to each other: inserted",
            )

    def _record(self, c: Seen, damaged: list[int] | None = None) -> None:
        base = self.base
        if self.twin is not None:
            if self._resolve_twin(c):
                base = self.base
        if damaged and not (c.n > base.n + 1 and c.prev != base.digest):
            self._inserted(damaged)  # (the twin that was the chain's changed the picture)
        if c.n == base.n + 1:
            self._judge_pending(c)
            if c.prev != base.digest and self.reported is not base:
                self.pending = (base, c)
            self._advance(c)
        elif c.n > base.n + 1:
            self._judge_pending(c)
            if c.prev == base.digest:
                self._renumbered(c, base)
                return
            self.gaps.append(
                Gap(base.n + 1, c.n - 1, base, c.line, base.digest, c.prev, damaged or [])
            )
            self._advance(c)
        elif (gap := self._gap_of(c.n)) is not None:
            self._out_of_place(c, gap)
        elif c.n == base.n and c.prev == base.prev and self.twin is None:
            self.twin = c
        elif c.prev == base.digest:
            self._judge_pending(c)
            self._renumbered(c, base)
        else:
            self.about(
                "inserted",
                c,
                f"{c.named()} does not belong here: its number came already (the chain "
                f"stands at {base.named()}): inserted, or copied from elsewhere in the log",
            )

    def _advance(self, c: Seen) -> None:
        self.base = c
        cp = self.checkpoint
        if cp is not None and c.n == cp.count and self.at_checkpoint is None:
            self.at_checkpoint = c

    def _renumbered(self, c: Seen, base: Seen) -> None:
        """`c` chains to the record before it, but its number is not the next one."""
        self.about(
            "edited",
            c,
            f"record at line {c.line} ({c.event}) chains to {base.named()} but is numbered "
            f"{c.n}, not {base.n + 1}: its number was edited",
        )
        fixed = Seen(base.n + 1, c.line, c.event, c.digest, c.prev)
        self.reported = fixed
        self._advance(fixed)

    def _judge_pending(self, nxt: Seen, *, bridged: bool = False) -> None:
        """A link p -> c broke; `nxt` follows c. Both of c's links broken: c was edited.
        Only the first: p was (or c's prev was: the walk cannot tell, and says p)."""
        if self.pending is None:
            return
        p, c = self.pending
        self.pending = None
        both = not bridged and nxt.n == c.n + 1 and nxt.prev != c.digest
        if both or p is START:
            self.about(
                "edited",
                c,
                f"{c.named()} was edited: it does not chain to "
                + ("the genesis value" if p is START else p.named())
                + (f", and record {nxt.n} (line {nxt.line}) does not chain to it" if both else ""),
            )
            self.reported = c
        else:
            self.about(
                "edited",
                p,
                f"{c.named()} does not chain to {p.named()}: record {p.n} was edited "
                f"(or record {c.n}'s prev)",
            )

    def _resolve_twin(self, nxt: Seen) -> bool:
        """Two records with one number: the one the next record chains to is the chain's;
        the other was inserted. True when the chain moved to the twin."""
        twin, base = self.twin, self.base
        assert twin is not None
        self.twin = None
        if nxt.prev == twin.digest and nxt.prev != base.digest:
            inserted, kept = base, twin
        else:
            inserted, kept = twin, base
        self.about(
            "inserted",
            inserted,
            f"{inserted.named()} was inserted: {kept.named()} has its number and the chain "
            "goes on from that one",
        )
        if kept is twin:
            self.base = twin
            return True
        return False

    def _gap_of(self, n: int) -> Gap | None:
        for gap in self.gaps:
            if gap.lo <= n <= gap.hi:
                return gap
        return None

    def _out_of_place(self, c: Seen, gap: Gap) -> None:
        edited = (c.n == gap.lo and c.prev != gap.before_digest) or (
            c.n == gap.hi and c.digest != gap.next_prev
        )
        self.about(
            "reordered",
            c,
            f"{c.named()} is out of order: it was written before the record at line "
            f"{gap.at}, and stands after {self.base.named()}"
            + (" (and it was edited)" if edited else ""),
        )
        self.gaps.remove(gap)
        if gap.lo < c.n:
            self.gaps.append(
                Gap(gap.lo, c.n - 1, gap.before, gap.at, gap.before_digest, c.prev, gap.damaged)
            )
        if c.n < gap.hi:
            self.gaps.append(Gap(c.n + 1, gap.hi, gap.before, gap.at, c.digest, gap.next_prev))

    # -- the end -----------------------------------------------------------------------

    def end(self) -> None:
        if self.twin is not None:
            self.about(
                "inserted",
                self.twin,
                f"{self.twin.named()} and {self.base.named()} have one number: one of them "
                "was inserted",
            )
        if self.pending is not None:
            p, c = self.pending
            self.about(
                "edited",
                p,
                f"{c.named()} does not chain to {p.named()}: record {p.n} was edited "
                f"(or record {c.n}'s prev)",
            )
        odd_at_end(self, self.odd, self.base)
        for gap in sorted(self.gaps, key=lambda g: g.lo):
            missing_records(self, gap)
        compare_checkpoint(self, self.checkpoint, self.base, self.at_checkpoint)

    def missing(self, path: Path) -> None:
        missing_file(self, self.checkpoint, path)

    def verdict(self, path: Path, *, exists: bool) -> Verdict:
        base = self.base
        head = EMPTY if base is START else AuditHead(base.n, base.digest)
        return Verdict(
            path,
            exists,
            self.lines,
            self.records,
            head,
            self.checkpoint,
            tuple(sorted(self.findings, key=order)),
            tuple(self.notes),
        )


__all__ = ["Finding", "Note", "Verdict", "verify"]
