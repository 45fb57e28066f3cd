"""Propose a data contract for a raw file, so adding a dataset starts from a draft instead of a blank page.

Writing a contract by hand means opening the file and guessing the delimiter, the quoting, which column
is which and what the label's range is; getting any of those wrong quarantines most rows. The guesses
made here come from a sample of the first records and are meant to be reviewed, not trusted: every
decision that cannot be read off the data with certainty becomes a `# review:` note in the YAML.
Nothing is written to disk; the caller prints the draft.
"""

from __future__ import annotations

import codecs
import copy
import csv
import json
import math
import re
import textwrap
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from simpair.contracts import ColumnRef
from simpair.ingest.rows import as_text
from simpair.ingest.sources import SourceAccessError, SourceRoot, compression_of, decompress, plain_stem

# Beyond this much decompressed text the sample is cut at a line break: the first records are enough.
_MAX_SAMPLE_BYTES = 64 << 20
# A csv record may span lines; this many physical lines per sampled record is plenty.
_LINES_PER_RECORD = 20
# Lines of the sample that do not decode, named in the review note (the count covers the rest).
_BAD_LINES_SHOWN = 10
_DELIMITERS = ("\t", ",", ";", "|")
_DELIMITER_NAMES = {"\t": "tab", ",": "comma", ";": "semicolon", "|": "pipe"}
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_LABEL_NAME = re.compile(r"label|score|duplicate|quality|relatedness|similarity|gold|rating|paraphrase", re.I)
_CLASS_NAME = re.compile(r"label|class|category|judg|entail|gold", re.I)
_NLI_VALUES = frozenset({"entailment", "neutral", "contradiction", "non_entailment", "not_entailment"})
_SPLIT_NAME = re.compile(r"split|set|fold|partition|subset", re.I)
_SPLIT_OF = (
    (re.compile(r"^train(ing)?$"), "train"),
    (re.compile(r"^(trial|dev|development|val|valid.*)$"), "dev"),
    (re.compile(r"^test(ing)?$"), "test"),
)
_SPLIT_ORDER = ("train", "dev", "test")
_EXTRA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CANONICAL = frozenset(
    {"pair_id", "text_a", "text_b", "label", "score", "score_raw", "split", "dataset", "dataset_version",
     "source_file", "source_sha256", "source_line"}
)  # fmt: skip


class InferError(ValueError):
    """A file no contract can be proposed for (missing, empty, binary, undecodable); names the file."""


@dataclass
class InferredContract:
    """A proposed contract (plain YAML-ready data) and what a person should check before using it."""

    contract: dict[str, Any]
    notes: list[str]
    source: str
    sampled: int
    inline: dict[str, str] = field(default_factory=dict)  # dotted key -> short comment on that line

    def to_yaml(self) -> str:
        """The contract as YAML: a header of review notes, then the fields, some with a comment."""
        header = [
            f"Proposed data contract for {self.source}, inferred by `simpair contract infer` "
            f"from its first {self.sampled} records.",
            "Read every `review:` line and fix what is wrong, then save it as "
            f"data_contracts/{self.contract['dataset']}.yaml and run `simpair contract check` on it.",
        ]
        lines = [f"# {line}" for text in header for line in _wrap(text)]
        if self.notes:
            lines.append("#")
            for note in self.notes:
                wrapped = _wrap(f"review: {note}")
                lines.append(f"# {wrapped[0]}")
                lines.extend(f"#   {rest}" for rest in wrapped[1:])
        body = yaml.dump(
            _flow_marked(self.contract), Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=10_000
        )
        return "\n".join([*lines, *_with_comments(body.splitlines(), self.inline)]) + "\n"


# ---------------------------------------------------------------------------------------------- YAML


class _Dumper(yaml.SafeDumper):
    """Block style for sections, flow style for short leaves (`[0, 1]`, `{split: train}`) as in the docs."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)  # `- item` indented under its key, as people write it


class _FlowMap(dict[str, Any]):
    pass


class _Quoted(str):
    pass


def _represent_list(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.Node:
    flow = all(not isinstance(item, dict | list) for item in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


def _represent_quoted(dumper: yaml.SafeDumper, data: _Quoted) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", str(data), style='"')


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    # "\n" and "\t" as escapes on one line; pyyaml would otherwise fold a separator over two lines
    style = '"' if any(ch in data for ch in "\n\r\t") else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


def _represent_flow_map(dumper: yaml.SafeDumper, data: _FlowMap) -> yaml.Node:
    return dumper.represent_mapping("tag:yaml.org,2002:map", data.items(), flow_style=True)


_Dumper.add_representer(list, _represent_list)
_Dumper.add_representer(_FlowMap, _represent_flow_map)
_Dumper.add_representer(_Quoted, _represent_quoted)
_Dumper.add_representer(str, _represent_str)


def _flow_marked(contract: dict[str, Any]) -> dict[str, Any]:
    marked = copy.deepcopy(contract)
    marked["contract_version"] = _Quoted(marked["contract_version"])
    marked["files"] = [_FlowMap(f) for f in marked["files"]]
    columns = marked["columns"]
    if "text_pair" in columns:
        columns["text_pair"] = _FlowMap(columns["text_pair"])
    if "extra" in columns:
        columns["extra"] = [_FlowMap(e) if isinstance(e, dict) else e for e in columns["extra"]]
    if "split_column" in marked:
        marked["split_column"]["values"] = _FlowMap(marked["split_column"]["values"])
    return marked


def _with_comments(lines: list[str], inline: dict[str, str]) -> list[str]:
    """Append `# comment` to the line of each dotted key (our dumps put one key per line, 2-space indent)."""
    out: list[str] = []
    stack: list[tuple[int, str]] = []
    for line in lines:
        match = re.match(r"^( *)([A-Za-z_][A-Za-z0-9_]*):(?: |$)", line)
        if match:
            indent = len(match.group(1))
            while stack and stack[-1][0] >= indent:
                stack.pop()
            stack.append((indent, match.group(2)))
            comment = inline.get(".".join(key for _, key in stack))
            if comment:
                line = f"{line}  # {comment}"
        out.append(line)
    return out


def _wrap(text: str) -> list[str]:
    return textwrap.wrap(text, width=104, break_long_words=False, break_on_hyphens=False) or [""]


# -------------------------------------------------------------------------------------------- reading


def _split_location(location: str | Path) -> tuple[SourceRoot, str]:
    text = str(location)
    if "://" in text and not text.startswith("file://"):
        root, _, name = text.rstrip("/").rpartition("/")
        return SourceRoot.of(root), name
    path = Path(text.removeprefix("file://"))
    return SourceRoot.of(path.parent), path.name


def _read_local_head(path: Path, codec: str | None, shown: str) -> bytes:
    """The first decompressed bytes (one more than the sample cap, to tell a cut), not the whole file."""
    try:
        if not path.is_file():
            path.open("rb").close()  # says why: missing, a folder, no permission
            raise InferError(f"{shown}: cannot read: not a regular file")
        raw = pa.OSFile(str(path))
    except OSError as exc:
        raise InferError(f"{shown}: cannot read: {exc.strerror or exc}") from exc
    with raw:
        if codec is None:
            return raw.read(_MAX_SAMPLE_BYTES + 1)
        try:
            return pa.CompressedInputStream(raw, codec).read(_MAX_SAMPLE_BYTES + 1)
        except (OSError, pa.ArrowException) as exc:
            raise InferError(f"{shown}: cannot decompress as {codec}: {exc}") from exc


def _read(location: str | Path) -> tuple[str, bytes]:
    """(file name, decompressed bytes); anything unreadable becomes an InferError naming the file."""
    root, name = _split_location(location)
    shown = str(location)
    codec = compression_of(name)
    if not root.is_remote and _kind_by_name(name) != "parquet":
        data = _read_local_head(Path(root.display(name)), codec, shown)
    else:
        try:
            stored = root.read_bytes(name)
        except SourceAccessError as exc:  # names the URL already
            raise InferError(str(exc)) from exc
        except OSError as exc:
            raise InferError(f"{shown}: cannot read: {exc.strerror or exc}") from exc
        try:
            data = decompress(stored, codec, shown)
        except OSError as exc:
            raise InferError(str(exc)) from exc
    if not data.removeprefix(codecs.BOM_UTF8).strip():
        raise InferError(f"{shown}: file is empty; nothing to infer a contract from")
    return name, data


def _kind_by_name(name: str) -> str:
    path = PurePosixPath(name.lower())
    if compression_of(name) is not None:
        path = path.with_suffix("")
    if path.suffix in (".parquet", ".pq"):
        return "parquet"
    if path.suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    return "delimited"


def _decode(data: bytes, shown: str, notes: list[str]) -> tuple[str, str, bool]:
    """(text, encoding, had_bom) of the sample; binary-looking content is refused."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise InferError(f"{shown}: looks like UTF-16 text; convert it to UTF-8 first")
    if b"\x00" in data[:65536]:
        raise InferError(f"{shown}: looks binary (NUL bytes); expected text records")
    bom = data.startswith(codecs.BOM_UTF8)
    data = data.removeprefix(codecs.BOM_UTF8)
    if len(data) > _MAX_SAMPLE_BYTES:
        data = data[: data.rfind(b"\n", 0, _MAX_SAMPLE_BYTES) + 1 or _MAX_SAMPLE_BYTES]
    try:
        text, encoding = data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError as exc:
        text, encoding = _mostly_utf8(data, exc, notes)
    probe = text[:65536]
    controls = sum(1 for ch in probe if ch not in "\t\n\r" and unicodedata.category(ch) == "Cc")
    if probe and controls > 0.01 * len(probe):
        raise InferError(f"{shown}: looks binary ({controls} control characters in the first {len(probe)})")
    return text, encoding, bom


def _mostly_utf8(data: bytes, error: UnicodeDecodeError, notes: list[str]) -> tuple[str, str]:
    """(text, encoding) of a sample that is not valid UTF-8 as a whole.

    A UTF-8 export with a few broken bytes is still UTF-8: most of its lines with non-ASCII bytes
    decode. Reading it as latin-1 would turn every accent and curly quote into mojibake (and C1
    control characters), so it stays utf-8 and the lines that do not decode are named; ingest
    quarantines those with reason `encoding`. In a latin-1 or cp1252 file almost no line with
    accents decodes as UTF-8, so latin-1 is proposed there, as the encoding that reads any byte.
    """
    decoded = undecodable = 0
    bad_lines: list[int] = []
    for number, line in enumerate(data.split(b"\n"), start=1):
        if line.isascii():
            continue
        try:
            line.decode("utf-8")
            decoded += 1
        except UnicodeDecodeError:
            undecodable += 1
            if len(bad_lines) < _BAD_LINES_SHOWN:
                bad_lines.append(number)
    if decoded > undecodable:
        shown = ", ".join(str(n) for n in bad_lines) + (", ..." if undecodable > len(bad_lines) else "")
        which = f"line {shown} is" if undecodable == 1 else f"{undecodable} sampled lines are"
        notes.append(
            f"{which} not valid UTF-8 ({'lines ' + shown if undecodable > 1 else 'a bad byte'}), while "
            f"{decoded} lines with "
            "accents or other non-ASCII characters are: encoding utf-8 is proposed, and ingest quarantines "
            "the lines that do not decode with reason encoding; fix them at the source if they matter"
        )
        return data.decode("utf-8", errors="backslashreplace"), "utf-8"
    line = data.count(b"\n", 0, error.start) + 1
    notes.append(
        f"the file is not valid UTF-8 (first bad byte on line {line}; {undecodable} of "
        f"{decoded + undecodable} lines with non-ASCII bytes do not decode); encoding latin-1 is "
        "proposed because it reads any byte: check the source's real encoding "
        "(often cp1252 for Windows exports)"
    )
    return data.decode("latin-1"), "latin-1"


# ------------------------------------------------------------------------------------ delimited layout


@dataclass
class _Parse:
    delimiter: str
    quoting: str
    records: list[list[str]]  # non-blank records, header included
    spans: int  # records spanning more than one physical line
    errors: int  # csv errors (runaway quotes, oversized fields)
    blank: int
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


def _parse_plain(lines: list[str], delimiter: str, limit: int) -> _Parse:
    records: list[list[str]] = []
    blank = 0
    for line in lines:
        if len(records) >= limit:
            break
        if not line.strip():
            blank += 1
            continue
        records.append(line.split(delimiter))
    return _Parse(delimiter, "none", records, 0, 0, blank)


def _parse_csv(lines: list[str], delimiter: str, limit: int) -> _Parse:
    reader = csv.reader((line + "\n" for line in lines), delimiter=delimiter, quotechar='"', strict=False)
    records: list[list[str]] = []
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
        previous = reader.line_num
        if not fields or (len(fields) == 1 and not fields[0].strip()):
            blank += 1
            continue
        records.append(fields)
    return _Parse(delimiter, "csv", records, spans, errors, blank)


def _choose_layout(
    lines: list[str], limit: int, shown: str, notes: list[str], inline: dict[str, str]
) -> _Parse:
    """Delimiter and quoting: the pair that splits the sample into the most consistent field count."""
    best: _Parse | None = None
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
    name = _DELIMITER_NAMES[best.delimiter]
    if best.consistency < 0.9:
        notes.append(
            f"only {best.consistency:.0%} of sampled records have the usual number of {name}-separated "
            "fields: check the delimiter and quoting (ingest rejects a file below format.min_valid_fraction)"
        )
    return best


_WRAPPED = re.compile(r'"(?:[^"]|"")*"')


def _fully_quoted(parse: _Parse) -> int:
    """Records with a field quoted CSV-style (inner quotes doubled), which only csv quoting unwraps."""
    return sum(1 for r in parse.records if any(_WRAPPED.fullmatch(f) for f in r))


def _choose_quoting(plain: _Parse, quoted: _Parse, report: tuple[list[str], dict[str, str]] | None) -> _Parse:
    """csv when quoted fields hold the delimiter or line breaks (or wrap fields) and csv reads as well."""
    embedded = sum(1 for r in quoted.records if any(plain.delimiter in f or "\n" in f for f in r))
    wrapped = _fully_quoted(plain)
    csv_reads_as_well = quoted.consistency >= plain.consistency - 1e-9 and quoted.errors == 0
    needs_csv = quoted.spans > 0 or embedded > 0
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
    if csv_reads_as_well and wrapped and wrapped >= 0.1 * max(len(plain.records), 1):
        if report:
            report[1]["format.quoting"] = f"{wrapped} sampled records have fields wrapped in quotes"
            report[0].append(
                "fields are wrapped in double quotes but none holds the delimiter or a line break: "
                "quoting csv strips the quotes; with quoting none they would stay in the texts"
            )
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


def _looks_like_header(records: list[list[str]]) -> bool:
    """The first record is a header if it is all text where a later column is numbers (or unseen labels)."""
    if len(records) < 2:
        return False
    first, rest = records[0], records[1:]
    # an empty cell is allowed (pandas writes an unnamed index column), a number is not
    if all(not f.strip() for f in first) or any(_as_number(f) is not None for f in first):
        return False
    numeric_columns = 0
    for i in range(len(first)):
        column = [r[i] for r in rest if len(r) > i and r[i].strip()]
        if column and sum(_as_number(v) is not None for v in column) >= 0.8 * len(column):
            numeric_columns += 1
    if numeric_columns:
        return True
    names_ok = all(0 < len(f.strip()) <= 40 for f in first)
    unseen = all(first[i] not in {r[i] for r in rest if len(r) > i} for i in range(len(first)))
    return names_ok and unseen


# ------------------------------------------------------------------------------------------- columns


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str) and _NUMBER.match(value.strip()):
        number = float(value.strip())
        return number if math.isfinite(number) else None
    return None


def _is_empty(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


@dataclass
class _Column:
    """One column's sampled values and what they look like."""

    ref: ColumnRef
    position: int
    values: list[Any]
    present: list[Any] = field(init=False)
    numbers: list[float] = field(init=False)
    strings: list[str] = field(init=False)
    distinct: set[str] = field(init=False)
    mean_length: float = field(init=False)

    def __post_init__(self) -> None:
        self.present = [v for v in self.values if not _is_empty(v)]
        self.numbers = [n for n in (_as_number(v) for v in self.present) if n is not None]
        self.strings = [v for v in self.present if isinstance(v, str)]
        self.distinct = {as_text(v).strip() for v in self.present}
        lengths = [len(as_text(v)) for v in self.present]
        self.mean_length = sum(lengths) / len(lengths) if lengths else 0.0

    @property
    def label(self) -> str:
        return repr(self.ref) if isinstance(self.ref, str) else f"position {self.ref}"

    @property
    def numeric(self) -> bool:
        return bool(self.present) and len(self.numbers) >= 0.95 * len(self.present)

    @property
    def integers(self) -> bool:
        return self.numeric and all(n.is_integer() for n in self.numbers)

    @property
    def textual(self) -> bool:
        """Mostly non-numeric strings: a text candidate."""
        return (
            bool(self.present)
            and len(self.strings) >= 0.9 * len(self.present)
            and len(self.numbers) < 0.5 * len(self.present)
        )

    @property
    def unique(self) -> bool:
        texts = [as_text(v).strip() for v in self.values]
        return bool(texts) and all(texts) and len(set(texts)) == len(texts)

    @property
    def id_like(self) -> bool:
        if not self.unique:
            return False
        if self.integers:
            return True
        return all(
            isinstance(v, str) and len(v) <= 64 and not re.search(r"\s", v.strip()) for v in self.values
        )

    @property
    def low_cardinality(self) -> bool:
        n = len(self.present)
        return bool(self.present) and len(self.distinct) <= max(2, min(20, n // 2))

    def example(self) -> str:
        shown = next((as_text(v).strip() for v in self.present), "")
        return shown if len(shown) <= 30 else shown[:27] + "..."


def _split_of(value: str) -> str | None:
    for pattern, split in _SPLIT_OF:
        if pattern.match(value.strip().lower()):
            return split
    return None


def _split_column(columns: list[_Column]) -> _Column | None:
    for column in columns:
        if not column.textual or not column.distinct or len(column.distinct) > 5:
            continue
        if not all(_split_of(v) for v in column.distinct):
            continue
        named = isinstance(column.ref, str) and bool(_SPLIT_NAME.search(column.ref))
        if len(column.distinct) >= 2 or named:
            return column
    return None


def _pair_column(texts: list[_Column], delimiter: str | None) -> tuple[_Column, str] | None:
    """The one column whose values mostly hold two texts split by a line break (or an in-field tab)."""
    separators = ["\n"] + (["\t"] if delimiter != "\t" else [])
    found: list[tuple[_Column, str]] = []
    for column in texts:
        for separator in separators:
            twos = sum(
                1
                for v in column.strings
                if len(parts := v.strip().split(separator)) == 2 and all(p.strip() for p in parts)
            )
            if column.strings and twos >= 0.8 * len(column.strings):
                found.append((column, separator))
                break
    return found[0] if len(found) == 1 else None


def _shadowed(base: _Column, variant: _Column) -> bool:
    """`variant` is `base`'s name with a suffix: sentence_A_original, question1_clean, text_a.raw."""
    if not isinstance(base.ref, str) or not isinstance(variant.ref, str):
        return False
    short, long = base.ref.strip().lower(), variant.ref.strip().lower()
    return bool(short) and long.startswith(short) and len(long) > len(short) and long[len(short)] in "_-. "


def _supports(base: _Column, variant: _Column) -> bool:
    """The sample backs the plain column over its suffixed sibling: text wherever the sibling has some."""
    return base.textual and not base.low_cardinality and len(base.present) >= 0.95 * len(variant.present)


def _text_columns(texts: list[_Column], notes: list[str]) -> tuple[_Column, _Column]:
    """The two text columns: the longest free-text ones, unless a suffixed sibling shadows a plainer one.

    Datasets often ship a text next to its source form (SICK's sentence_A beside sentence_A_original):
    the plainly named column is the one the labels were given on, so it is preferred over a longer
    sibling when the sample supports it (free text in as many rows). Whenever another candidate is
    close to a chosen one (a sibling, or a similar length), a review note names both.
    """
    # of a column and its suffixed sibling only one is a candidate: the plain one if the sample backs it
    dropped = {
        (variant.position if _supports(base, variant) else base.position)
        for variant in texts
        for base in texts
        if _shadowed(base, variant)
    }
    ranked = [c for c in texts if c.position not in dropped]
    picked = (ranked if len(ranked) >= 2 else texts)[:2]
    weaker = min(picked, key=lambda c: c.mean_length)
    close: list[str] = []
    for other in sorted((c for c in texts if c not in picked), key=lambda c: c.position):
        if other.low_cardinality:  # a category (a source name, a split), never a text of the pair
            continue
        sibling = next((c for c in picked if _shadowed(c, other) or _shadowed(other, c)), None)
        if sibling is None and other.mean_length < 0.8 * weaker.mean_length:
            continue
        chosen = sibling or weaker
        why = "a name-similar sibling" if sibling else "a text column of similar length"
        close.append(
            f"{other.label} ({why} of {chosen.label}, mean {other.mean_length:.0f} against "
            f"{chosen.mean_length:.0f} characters)"
        )
    if close:
        chosen_labels = " and ".join(c.label for c in sorted(picked, key=lambda c: c.position))
        notes.append(
            f"text columns {chosen_labels} were chosen, but other candidates are close: {'; '.join(close)}; "
            "check which columns the labels were given on"
        )
    return picked[0], picked[1]


def _label_column(numeric: list[_Column]) -> _Column | None:
    def rank(column: _Column) -> tuple[bool, bool, bool, int]:
        named = isinstance(column.ref, str) and bool(_LABEL_NAME.search(column.ref))
        shaped = not column.integers or len(column.distinct) <= 2
        return named, shaped, not column.id_like, -column.position

    return max(numeric, key=rank) if numeric else None


def _label_spec(column: _Column, notes: list[str], inline: dict[str, str]) -> dict[str, Any]:
    numbers = column.numbers
    distinct = sorted({int(n) for n in numbers}) if column.integers else []
    if column.integers and len(distinct) <= 2:
        if len(distinct) == 1:
            values = sorted({0, 1} | set(distinct)) if distinct[0] in (0, 1) else distinct
            notes.append(
                f"the label column {column.label} holds only {distinct[0]} in the sample: check values"
            )
        else:
            values = distinct
        inline["label.values"] = "values seen in the sample"
        return {"kind": "binary", "values": values}
    low, high = math.floor(min(numbers)), math.ceil(max(numbers))
    if high <= low:
        high = low + 1
    inline["label.range"] = f"review: seen {min(numbers):g} to {max(numbers):g}: check the documented range"
    notes.append(
        f"the label {column.label} is graded; its range [{low}, {high}] is the sample's, rounded out: "
        "set the documented scale (score = (raw - min) / (max - min))"
    )
    return {"kind": "graded", "range": [low, high]}


def _extra_entry(column: _Column) -> str | dict[str, Any]:
    ref = column.ref
    if isinstance(ref, str) and _EXTRA_NAME.match(ref) and ref not in _CANONICAL:
        return ref
    name = re.sub(r"[^A-Za-z0-9_]+", "_", str(ref)).strip("_").lower() if isinstance(ref, str) else ""
    if not name or not _EXTRA_NAME.match(name):
        name = f"column_{column.position}" if not name else f"c_{name}"
    if name in _CANONICAL:
        name = f"{name}_raw" if name != "score_raw" else "score_raw_extra"
    return {"name": name, "column": ref}


def _pair_id_rank(column: _Column) -> int:
    if not isinstance(column.ref, str):
        return 0
    name = column.ref.lower()
    token_id = bool(re.search(r"(^|[^a-z])id($|[^a-z])", name))
    if "pair" in name and (token_id or "id" in name):
        return 3
    if token_id:
        return 2
    return 1 if "id" in name else 0


def _slug(text: str) -> str:
    slug = re.sub(r"[^a-z0-9_-]+", "-", text.lower()).strip("-_")
    return slug or "dataset"


# ----------------------------------------------------------------------------------------------- main


def _table_of_records(records: list[list[str]], names: list[str] | None, width: int) -> list[_Column]:
    columns = []
    for i in range(width):
        ref: ColumnRef = i
        if names is not None and i < len(names) and names[i] and names.count(names[i]) == 1:
            ref = names[i]
        columns.append(_Column(ref, i, [r[i] if len(r) > i else None for r in records]))
    return columns


def _table_of_objects(rows: Sequence[dict[str, Any]]) -> list[_Column]:
    keys: dict[str, None] = {}
    for row in rows:
        keys.update(dict.fromkeys(row))
    return [_Column(key, i, [row.get(key) for row in rows]) for i, key in enumerate(keys)]


def _jsonl_rows(text: str, limit: int, shown: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    broken = 0
    for line in text.splitlines():
        if len(rows) >= limit:
            break
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            broken += 1
            continue
        if isinstance(value, dict):
            rows.append(value)
        else:
            broken += 1
    if broken > len(rows):
        raise InferError(f"{shown}: {broken} of the first {broken + len(rows)} lines are not JSON objects")
    if not rows:
        raise InferError(f"{shown}: no JSON object lines found")
    return rows


def _parquet_rows(data: bytes, limit: int, shown: str) -> list[dict[str, Any]]:
    try:
        batches = pq.ParquetFile(pa.BufferReader(data)).iter_batches(batch_size=limit)
        first = next(batches, None)
    except (pa.ArrowException, OSError) as exc:
        raise InferError(f"{shown}: not a readable Parquet file: {exc}") from exc
    rows = [] if first is None else first.to_pylist()
    if not rows:
        raise InferError(f"{shown}: Parquet file has no rows")
    return rows


def _delimited_table(
    lines: list[str], sample_rows: int, shown: str, notes: list[str], inline: dict[str, str]
) -> tuple[_Parse, list[_Column], int]:
    """Layout, columns (named when there is a header) and number of data records of a delimited sample."""
    layout = _choose_layout(lines, sample_rows + 1, shown, notes, inline)
    records = layout.records
    header = _looks_like_header(records)
    names = [f.strip() for f in records[0]] if header else None
    body = records[1:] if header else records[:sample_rows]
    if not body:
        raise InferError(f"{shown}: no data records after the header")
    counts = Counter(len(r) for r in body)
    layout.field_counts = [n for n, seen in counts.most_common() if seen > 0.01 * len(body)]
    layout.header = names
    rare = {n: seen for n, seen in counts.items() if n not in layout.field_counts}
    if rare:
        listed = ", ".join(f"{seen} with {n}" for n, seen in sorted(rare.items()))
        notes.append(
            f"{sum(rare.values())} of {len(body)} sampled records have another field count "
            f"({listed}): ingest quarantines them as field_count"
        )
    if layout.blank:
        notes.append(f"{layout.blank} blank lines in the sample: ingest quarantines them")
    if names is not None:
        if len(set(names)) != len(names) or not all(names):
            notes.append("some header names are empty or repeated: those columns are given by position")
    else:
        notes.append("no header row detected: columns are given by 0-based position")
    return layout, _table_of_records(body, names, min(layout.field_counts)), len(body)


def _delimited_format(layout: _Parse, encoding: str, bom: bool, inline: dict[str, str]) -> dict[str, Any]:
    fmt: dict[str, Any] = {
        "delimiter": layout.delimiter,
        "quoting": layout.quoting,
        "header": layout.header is not None,
        "encoding": encoding,
    }
    if bom:
        fmt["bom"] = "allow"
        inline["format.bom"] = "the file starts with a UTF-8 byte-order mark: stripped and counted"
    fmt["field_counts"] = layout.field_counts
    inline["format.field_counts"] = "field counts seen in the sample, most common first"
    if layout.header is not None:
        names = ", ".join(layout.header)
        inline["format.header"] = names if len(names) <= 90 else names[:87] + "..."
    return fmt


def infer_contract(
    location: str | Path, dataset: str | None = None, sample_rows: int = 5000
) -> InferredContract:
    """Draft a contract for one raw file (local path or fsspec URL) from its first `sample_rows` records.

    Raises InferError when the file cannot be read as data at all, because a draft of a wrong file (a
    binary, an empty export) would only mislead.
    """
    if sample_rows < 2:
        raise ValueError(f"sample_rows must be at least 2, got {sample_rows}")
    shown = str(location)
    name, data = _read(location)
    notes: list[str] = []
    inline: dict[str, str] = {}
    kind = _kind_by_name(name)
    if kind == "delimited" and data.startswith(b"PAR1"):
        kind = "parquet"
        notes.append(f"{name} is a Parquet file by its content, though its name does not say so")
    fmt: dict[str, Any] = {}
    if kind != "delimited":
        fmt["kind"] = kind
    codec = compression_of(name)
    if codec is not None:
        fmt["compression"] = "infer"
        inline["format.compression"] = f"{codec}, by the file name"
        notes.append(f"compression is left as infer: {name} is read as {codec} because of its suffix")

    layout: _Parse | None = None
    if kind == "parquet":
        columns = _table_of_objects(_parquet_rows(data, sample_rows, shown))
        sampled = len(columns[0].values) if columns else 0
    else:
        text, encoding, bom = _decode(data, shown, notes)
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        lines = [line.removesuffix("\r") for line in lines[: (sample_rows + 1) * _LINES_PER_RECORD]]
        first = next((line for line in lines if line.strip()), "")
        if kind == "delimited" and first.lstrip().startswith("{"):
            try:
                is_object = isinstance(json.loads(first), dict)
            except json.JSONDecodeError:
                is_object = False
            if is_object:
                kind = "jsonl"
                fmt = {"kind": "jsonl", **fmt}
                notes.append(f"{name} holds one JSON object per line though its name does not say so")
        if kind == "jsonl":
            if encoding != "utf-8":
                raise InferError(f"{shown}: JSON Lines must be UTF-8 text, and this file is not")
            rows = _jsonl_rows("\n".join(lines), sample_rows, shown)
            columns = _table_of_objects(rows)
            sampled = len(rows)
        else:
            layout, columns, sampled = _delimited_table(lines, sample_rows, shown, notes, inline)
            fmt.update(_delimited_format(layout, encoding, bom, inline))

    return _assemble(columns, kind, fmt, layout, name, dataset, shown, sampled, notes, inline)


def _assemble(
    columns: list[_Column],
    kind: str,
    fmt: dict[str, Any],
    layout: _Parse | None,
    name: str,
    dataset: str | None,
    shown: str,
    sampled: int,
    notes: list[str],
    inline: dict[str, str],
) -> InferredContract:
    """Pick the columns' roles and build the contract dict."""
    slug = dataset if dataset is not None else _slug(plain_stem(name))
    if not re.match(r"^[a-z0-9][a-z0-9_\-]*$", slug):
        raise InferError(f"dataset name {slug!r} must match [a-z0-9][a-z0-9_-]*")
    used: set[int] = set()

    split = _split_column(columns)
    if split is not None:
        used.add(split.position)
    numeric = [c for c in columns if c.numeric and c.position not in used]
    label = _label_column(numeric)
    if label is None:
        raise InferError(
            f"{shown}: no numeric column to use as the label (columns: "
            f"{', '.join(c.label for c in columns)}); a contract needs a binary or graded label"
        )
    used.add(label.position)

    extra: list[_Column] = []
    for column in columns:
        if column.position in used or not column.textual or not column.low_cardinality:
            continue
        lowered = {v.lower() for v in column.distinct}
        named = isinstance(column.ref, str) and bool(_CLASS_NAME.search(column.ref))
        if lowered <= _NLI_VALUES or (named and all(len(v) <= 30 for v in column.distinct)):
            extra.append(column)
            used.add(column.position)
            notes.append(
                f"{column.label} looks like a class label ({', '.join(sorted(column.distinct)[:5])}); "
                f"it is kept under columns.extra beside the numeric label {label.label}"
            )

    texts = sorted(
        (c for c in columns if c.position not in used and c.textual),
        key=lambda c: (not c.low_cardinality or len(c.present) < 20, c.mean_length),
        reverse=True,
    )
    mapping: dict[str, Any] = {}
    pair = _pair_column(texts, layout.delimiter if layout else None)
    if pair is not None and pair[0] is texts[0]:
        column, separator = pair
        mapping["text_pair"] = {"column": column.ref, "separator": separator}
        used.add(column.position)
        notes.append(
            f"both texts are in {column.label}, split on {separator!r}: a value without exactly one "
            "separator is quarantined"
        )
    else:
        if len(texts) < 2:
            found = ", ".join(c.label for c in texts) or "none"
            raise InferError(
                f"{shown}: expected two text columns (or one holding both texts on two lines), found {found}"
            )
        a, b = sorted(_text_columns(texts, notes), key=lambda c: c.position)
        mapping["text_a"], mapping["text_b"] = a.ref, b.ref
        used.update({a.position, b.position})
        inline["columns.text_a"] = f"mean {a.mean_length:.0f} characters"
        inline["columns.text_b"] = f"mean {b.mean_length:.0f} characters"
    mapping["label"] = label.ref

    ids = [c for c in columns if c.position not in used and c.id_like]
    best_id = max(ids, key=lambda c: (_pair_id_rank(c), -c.position), default=None)
    if best_id is not None and _pair_id_rank(best_id) > 0:
        mapping["pair_id"] = best_id.ref
        used.add(best_id.position)
        inline["columns.pair_id"] = "unique in the sample"
        others = [c.label for c in ids if c is not best_id]
        if others:
            notes.append(f"other columns unique in the sample (pair_id candidates): {', '.join(others)}")
    else:
        listed = f" (unique in the sample: {', '.join(c.label for c in ids)})" if ids else ""
        notes.append(
            f"no pair_id proposed{listed}; without one it is '<split>-<file stem>-<line>', which changes "
            "when lines are inserted"
        )
    if extra:
        mapping["extra"] = [_extra_entry(c) for c in extra]

    unused = [c for c in columns if c.position not in used]
    if unused:
        listed = ", ".join(f"{c.label} (e.g. {c.example()!r})" for c in unused)
        notes.append(f"unused columns, candidates for columns.extra: {listed}")

    label_spec = _label_spec(label, notes, inline)
    if label.id_like and len(label.values) > 2:
        notes.append(
            f"the label {label.label} is different in every sampled row: it may be an id rather than a label"
        )
    _note_rows(columns, mapping, notes)

    contract: dict[str, Any] = {
        "dataset": slug,
        "contract_version": "0.1.0",
        "description": "",
        "license": "",
        "format": fmt,
    }
    inline["description"] = "review: what the pairs are and what the label means"
    inline["license"] = "review: the licence terms that must travel with the data"
    if split is not None:
        found = sorted(split.distinct, key=lambda v: (_SPLIT_ORDER.index(_split_of(v) or "test"), v))
        mapped = {v: _split_of(v) for v in found}
        targets = [s for s in _SPLIT_ORDER if s in mapped.values()]
        contract["files"] = [{"split": s} for s in targets]
        contract["split_column"] = {"column": split.ref, "pattern": name, "values": mapped}
        inline["split_column.pattern"] = "review: a glob relative to --sources"
        shown_map = ", ".join(f"{k} -> {v}" for k, v in mapped.items())
        notes.append(
            f"rows are assigned to splits by {split.label}: {shown_map}; check the mapping and that the "
            "sample saw every value"
        )
    else:
        contract["files"] = [{"split": "train", "role": "train", "pattern": name}]
        notes.append(
            f"the only split is train, read from {name}; make the pattern relative to --sources "
            "(e.g. <dataset>/<file>) and add the dev and test splits' files"
        )
    contract["columns"] = mapping
    contract["label"] = label_spec
    return InferredContract(contract=contract, notes=notes, source=shown, sampled=sampled, inline=inline)


def _note_rows(columns: list[_Column], mapping: dict[str, Any], notes: list[str]) -> None:
    """Rows the default checks will quarantine, so the reviewer is not surprised by the counts."""
    by_ref = {c.ref: c for c in columns}
    if "text_a" in mapping:
        a, b = by_ref[mapping["text_a"]], by_ref[mapping["text_b"]]
        pairs: Iterable[tuple[str, str]] = zip(
            (as_text(v).strip() for v in a.values), (as_text(v).strip() for v in b.values), strict=True
        )
        pairs = list(pairs)
        empty = sum(1 for x, y in pairs if not x or not y)
        seen = Counter(tuple(sorted(p)) for p in pairs if all(p))
        duplicates = sum(n - 1 for n in seen.values())
        if empty:
            notes.append(f"{empty} sampled rows have an empty text: quarantined as empty_text")
        if duplicates:
            notes.append(
                f"{duplicates} sampled rows repeat an earlier pair (either order): quarantined as duplicate; "
                "set checks.symmetric_pairs: false if the order of the texts matters"
            )
    label = by_ref[mapping["label"]]
    missing = len(label.values) - len(label.numbers)
    if missing:
        notes.append(f"{missing} sampled rows have an empty or non-numeric label: they will be quarantined")


__all__ = ["InferError", "InferredContract", "infer_contract"]
