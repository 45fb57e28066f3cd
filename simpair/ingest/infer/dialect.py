"""The dialect of a delimited sample: which delimiter, whether quotes are CSV quoting, whether a header.

Each candidate delimiter is tried with and without CSV quoting; the pair that splits the sample into
the most consistent field count wins. Quoting is only proposed when quoted fields need it (they hold the
delimiter or a line break, wrap whole fields in many records, or double their inner quotes), because
quotes that are text (MSRP) must stay in it; and `none` is never proposed for a sample whose fields are
quoted, even when a broken quote makes csv read it worse.
"""

from __future__ import annotations

import csv
import re
from collections import Counter
from dataclasses import dataclass, field

from simpair.ingest.infer.columns import as_number
from simpair.ingest.infer.errors import InferError
from simpair.ingest.infer.sample import first_records

_DELIMITERS = ("\t", ",", ";", "|")
DELIMITER_NAMES = {"\t": "tab", ",": "comma", ";": "semicolon", "|": "pipe"}
_WRAPPED = re.compile(r'"(?:[^"]|"")*"')


@dataclass
class Parse:
    """The sample split one way (a delimiter and a quoting), with what went wrong doing so."""

    delimiter: str
    quoting: str
    records: list[list[str]]  # non-blank records, header included
    spans: int  # records spanning more than one physical line
    errors: int  # csv errors (runaway quotes, oversized fields)
    blank: int
    lines: list[int] = field(default_factory=list)  # the 1-based line each record starts on
    field_counts: list[int] = field(default_factory=list)  # allowed counts, set once the header is known
    header: list[str] | None = None

    @property
    def counts(self) -> Counter[int]:
        return Counter(len(r) for r in self.records)

    @property
    def consistency(self) -> float:
        counts = self.counts
        if not counts:
            return 0.0
        width, seen = counts.most_common(1)[0]
        return 0.0 if width < 2 else seen / (len(self.records) + self.errors)


def _parse_plain(lines: list[str], delimiter: str, limit: int) -> Parse:
    records, starts, blank, _ = first_records(lines, limit, lambda line: line.split(delimiter))
    return Parse(delimiter, "none", records, 0, 0, blank, starts)


def _parse_csv(lines: list[str], delimiter: str, limit: int) -> Parse:
    reader = csv.reader((line + "\n" for line in lines), delimiter=delimiter, quotechar='"', strict=False)
    records: list[list[str]] = []
    starts: list[int] = []
    spans = errors = blank = 0
    previous = 0
    while len(records) < limit:
        try:
            fields = next(reader)
        except StopIteration:
            break
        except csv.Error:
            errors += 1
            previous = reader.line_num
            continue
        if reader.line_num - previous > 1:
            spans += 1
        start, previous = previous + 1, reader.line_num
        if not fields or (len(fields) == 1 and not fields[0].strip()):
            blank += 1
            continue
        records.append(fields)
        starts.append(start)
    return Parse(delimiter, "csv", records, spans, errors, blank, starts)


def choose_layout(
    lines: list[str], limit: int, shown: str, notes: list[str], inline: dict[str, str]
) -> Parse:
    """Delimiter and quoting: the pair that splits the sample into the most consistent field count."""
    best: Parse | None = None
    for delimiter in _DELIMITERS:  # earlier delimiters win ties
        plain, quoted = _parse_plain(lines, delimiter, limit), _parse_csv(lines, delimiter, limit)
        choice = _choose_quoting(plain, quoted, None)
        if choice.consistency > 0 and (best is None or choice.consistency > best.consistency + 1e-9):
            best = choice
    if best is None:
        raise InferError(
            f"{shown}: no delimiter among tab, comma, semicolon and pipe splits its lines into more than one "
            "field; expected delimited text records"
        )
    plain = _parse_plain(lines, best.delimiter, limit)
    quoted = _parse_csv(lines, best.delimiter, limit)
    _choose_quoting(plain, quoted, (notes, inline))
    name = DELIMITER_NAMES[best.delimiter]
    if best.consistency < 0.9:
        notes.append(
            f"only {best.consistency:.0%} of sampled records have the usual number of {name}-separated "
            "fields: check the delimiter and quoting (ingest rejects a file below format.min_valid_fraction)"
        )
    return best


def _fully_quoted(parse: Parse) -> int:
    """Records with a field quoted CSV-style (inner quotes doubled), which only csv quoting unwraps."""
    return sum(1 for r in parse.records if any(_WRAPPED.fullmatch(f) for f in r))


def _doubled(parse: Parse) -> int:
    """Fields wrapped in quotes with a doubled quote inside (CSV escaping of a quote), never prose."""
    return sum(1 for r in parse.records for f in r if '""' in f[1:-1] and _WRAPPED.fullmatch(f))


# Fields are CSV-quoted when this share of records has a field wrapped in quotes. Quotations in text
# stay well below it (MSRP: 2.7% of its lines hold a sentence that starts and ends with a quote).
_QUOTED_RECORDS = 0.1


def _choose_quoting(plain: Parse, quoted: Parse, report: tuple[list[str], dict[str, str]] | None) -> Parse:
    """csv when fields are quoted: quoted fields hold the delimiter or line breaks, wrap whole fields in
    many records, or double their inner quotes. `none` is never proposed for such a sample, since it
    would keep the quotes in every text; when csv reads it worse, a note names the records to fix."""
    embedded = sum(1 for r in quoted.records if any(plain.delimiter in f or "\n" in f for f in r))
    wrapped = _fully_quoted(plain)
    doubled = _doubled(plain)
    csv_reads_as_well = quoted.consistency >= plain.consistency - 1e-9 and quoted.errors == 0
    needs_csv = quoted.spans > 0 or embedded > 0
    fields_quoted = wrapped >= _QUOTED_RECORDS * max(len(plain.records), 1) or doubled > 0
    lines_with_quotes = sum(1 for r in plain.records if '"' in plain.delimiter.join(r))
    if csv_reads_as_well and needs_csv:
        if report:
            what = []
            if quoted.spans:
                what.append(f"{quoted.spans} span several lines")
            if embedded:
                what.append(f"{embedded} hold the delimiter or a line break")
            report[1]["format.quoting"] = f"quoted fields: {', '.join(what)}"
        return quoted
    if csv_reads_as_well and fields_quoted:
        if report:
            report[1]["format.quoting"] = f"{wrapped} sampled records have fields wrapped in quotes"
            report[0].append(
                "fields are wrapped in double quotes but none holds the delimiter or a line break: "
                "quoting csv strips the quotes; with quoting none they would stay in the texts"
            )
        return quoted
    if fields_quoted:
        if report:
            report[1]["format.quoting"] = "review: fields are quoted, but some records do not read as csv"
            report[0].append(_broken_quoting(plain, quoted, wrapped, doubled))
        return quoted
    if report and lines_with_quotes:
        odd = sum(1 for r in plain.records if plain.delimiter.join(r).count('"') % 2)
        detail = f" ({odd} with an odd number of them)" if odd else ""
        report[1]["format.quoting"] = "quotes are text"
        report[0].append(
            f"{lines_with_quotes} sampled lines contain double quotes{detail}; they look like text, not CSV "
            "quoting, so quoting none keeps them: switch to csv if quoted fields hold the delimiter"
        )
    return plain


def _broken_quoting(plain: Parse, quoted: Parse, wrapped: int, doubled: int) -> str:
    """The note for a quoted sample that csv quoting does not read cleanly: which records to look at."""
    width = quoted.counts.most_common(1)[0][0] if quoted.records else 0
    joined = (plain.delimiter.join(r) for r in plain.records)
    odd = [line for line, text in zip(plain.lines, joined, strict=True) if text.count('"') % 2]
    off = [line for line, r in zip(quoted.lines, quoted.records, strict=True) if len(r) != width]
    suspects = sorted(set(odd) | set(off))
    shown = ", ".join(str(n) for n in suspects[:5]) + (", ..." if len(suspects) > 5 else "")
    evidence = f"{wrapped} of {len(plain.records)} sampled records have fields wrapped in double quotes"
    if doubled:
        evidence += f", {doubled} fields double their inner quotes"
    where = f"; look at line{'s' if len(suspects) > 1 else ''} {shown}" if suspects else ""
    return (
        f"{evidence}, so quoting csv is proposed (none would keep the quotes in the texts), but csv quoting "
        f"reads only {quoted.consistency:.0%} of them with the usual {width} fields against "
        f"{plain.consistency:.0%} without it: a quote that is not closed or not doubled{where}; "
        "ingest quarantines such records (or fails the file below format.min_valid_fraction)"
    )


def looks_like_header(records: list[list[str]]) -> bool:
    """The first record is a header if it is all text where a later column is numbers (or unseen labels)."""
    if len(records) < 2:
        return False
    first, rest = records[0], records[1:]
    # an empty cell is allowed (pandas writes an unnamed index column), a number is not
    if all(not f.strip() for f in first) or any(as_number(f) is not None for f in first):
        return False
    numeric_columns = 0
    for i in range(len(first)):
        column = [r[i] for r in rest if len(r) > i and r[i].strip()]
        if column and sum(as_number(v) is not None for v in column) >= 0.8 * len(column):
            numeric_columns += 1
    if numeric_columns:
        return True
    names_ok = all(0 < len(f.strip()) <= 40 for f in first)
    unseen = all(first[i] not in {r[i] for r in rest if len(r) > i} for i in range(len(first)))
    return names_ok and unseen
