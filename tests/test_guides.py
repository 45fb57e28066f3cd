"""The guides read as a product: no commit hashes, no planning or history words, no broken links.

README.md, docs/*.md (except docs/experiments.md, the dated record where history belongs), and the
READMEs of configs/, infra/ and mlflow/ describe what simpair does today. A commit hash, "the mark is
not reached" or "re-measured after the change" tells a reader how the work went, not how the product
behaves, and goes stale the day it is written; a relative link to a moved file sends the reader
nowhere. Each check prints the file:line of every hit so the fix is one look away.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# A git hash as written in prose: git's short form (7-12 hex digits) or the full 40, holding both a
# digit and a letter, standing on its own (not part of a longer word, path, file name, run name such
# as `paraphrase-3f2a91c0-1`, or a colour `#1f77b4` / `0x7fffabc1`). The product's own hex ids have
# other lengths and stay legal in examples: a dataset version is 16 digits, an MLflow run id 32, a
# sha256 64.
HASH = re.compile(
    r"(?<![\w#./:-])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])([0-9a-f]{7,12}|[0-9a-f]{40})(?![\w/-])"
)
# A hash that a page documents on purpose (a checksum) carries its label right before it.
CHECKSUM_LABEL = re.compile(r"(sha256|sha1|md5|checksum|digest|PROVENANCE)\W{0,3}$", re.IGNORECASE)

# Words that never belong on a product page: how the work was organised, or what changed when.
PLANNING = {
    "session": r"\bsessions?\b",
    "issue number": r"\bissue #?\d+",
    "TODO/FIXME": r"\b(TODO|FIXME|XXX)\b",
    "the mark": r"\bthe ([^\s]+ )?mark\b",
    "not reached": r"\bnot (yet )?reached\b",
    "a target met or missed": r"\b(on|our|hit the|missed the) target\b"
    r"|\bthe ([\w-]+ )?target (is|was) (not )?(met|reached|missed)",
    "re-measured": r"\bre-?measured\b",
    "changelog": r"\bchange ?log\b",
    "the code before": r"\b(the )?(code|version) before\b|\bbefore (streaming|these changes|the change)\b",
    "(before, ...)": r"\(before[,:)]",
    "earlier code or run": r"\bearlier (whole-split )?code\b|\b(an|the) earlier (set|run|measurement)s?\b",
    "no longer": r"\bno longer\b",
    "until then": r"\buntil then\b",
    "since <date>": r"\bsince 20\d\d-\d\d-\d\d",
    "corrected <date>": r"\bcorrected (on )?20\d\d-\d\d-\d\d",
    "now the default": r"\b(now|was) the default\b|\bthe default (now|was)\b",
}
PLANNING_RE = {name: re.compile(pattern, re.IGNORECASE) for name, pattern in PLANNING.items()}
PLANNING_RE["TODO/FIXME"] = re.compile(PLANNING["TODO/FIXME"])  # case matters: "todo" is not a marker

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")


def guide_pages() -> list[Path]:
    """Every page that speaks for the product; docs/experiments.md is the dated record, left out."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    pages += [REPO / d / "README.md" for d in ("configs", "infra", "mlflow")]
    return [p for p in pages if p.exists() and p.name != "experiments.md"]


def hashes(line: str) -> list[str]:
    """The commit-like hashes in one line, leaving out checksums a page documents under their label."""
    return [m.group(0) for m in HASH.finditer(line) if not CHECKSUM_LABEL.search(line[: m.start()])]


def planning_words(line: str) -> list[str]:
    return [name for name, pattern in PLANNING_RE.items() if pattern.search(line)]


def _hits(check) -> list[str]:
    found = []
    for page in guide_pages():
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            for hit in check(line):
                found.append(f"{page.relative_to(REPO)}:{number}: {hit}: {line.strip()[:160]}")
    return found


# ------------------------------------------------------------------------------ the patterns themselves


@pytest.mark.parametrize(
    "line, expected",
    [
        ("the code at f91425c against the code at 3bfb812", ["f91425c", "3bfb812"]),
        ("| the same, code before streaming (commit 9688f5e) |", ["9688f5e"]),
        ("`gc.freeze`, commit 9936afa) the exit takes", ["9936afa"]),
        ("full: 0243618a9b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e.", ["0243618a9b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e"]),
        ("at dcbe3be, nothing else", ["dcbe3be"]),
        # not hashes: numbers, words, colours, run names, paths, stamps, checksums under their label
        ("14,429 raw records in 1234567 bytes", []),
        ("deadbeef and facade are words, not hashes", []),
        ("colour #1f77b4 and 0x7fffabc1", []),
        ("flow run paraphrase-3f2a91c0-1 within 15 min", []),
        (".simpair/models/msrp-cross-20261124T101010Z/ and runs/3f2a91c0e/", []),
        ("sha256: 3f2a91c0e5b7 of the file", []),
        ("PROVENANCE: 3f2a91c0e5b7", []),
        ("checksum `3f2a91c0e` per file", []),
        ("version 0d6f76910d75c489 ingested; run 0123456789abcdef0123456789abcdef", []),
        ("1e-7, 2.3e-7, 0.8603 and 2026-11-27", []),
    ],
)
def test_hash_pattern(line: str, expected: list[str]) -> None:
    assert hashes(line) == expected


@pytest.mark.parametrize(
    "line, expected",
    [
        ("Re-measured on 2026-11-26 at 11:15 UTC", ["re-measured"]),
        ("The 4× mark against polars is not reached.", ["the mark", "not reached"]),
        ("the paraphrase target is met", ["a target met or missed"]),
        ("we missed the target by 0.002", ["a target met or missed"]),
        ("in wall (the code before: 27.1 s)", ["the code before"]),
        ("trained side by side finish together (before, the later save replaced it)", ["(before, ...)"]),
        ("The CLI no longer imports torch", ["no longer"]),
        ("the nightly default since 2026-11-26", ["since <date>"]),
        ("TODO: write this", ["TODO/FIXME"]),
        ("fixed in issue #31", ["issue number"]),
        # behaviour, not history
        ("Exit code: `0` when every source was ingested or unchanged", []),
        ("same pair_id as an earlier record of the split", []),
        ("encodes only the sentences no earlier run saw", []),
        ("An earlier run of the same command took 30 s", ["earlier code or run"]),
        ("Each pair's target is its task's field", []),
        ("The target can live in the nightly profile", []),
        ("scores it before any lock or claim; the markdown report", []),
        ("a stack's dev is out-of-fold", []),
    ],
)
def test_planning_pattern(line: str, expected: list[str]) -> None:
    assert planning_words(line) == expected


# ----------------------------------------------------------------------------------- the pages


def test_guides_found() -> None:
    names = {p.relative_to(REPO).as_posix() for p in guide_pages()}
    assert {"README.md", "docs/scoring.md", "configs/README.md", "infra/README.md"} <= names
    assert "docs/experiments.md" not in names


def test_no_commit_hashes_in_guides() -> None:
    found = _hits(hashes)
    assert not found, "commit hashes belong in docs/experiments.md, not in a guide:\n" + "\n".join(found)


def test_no_planning_or_history_words_in_guides() -> None:
    found = _hits(planning_words)
    assert not found, "history belongs in docs/experiments.md (dated):\n" + "\n".join(found)


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    out = set()
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


def test_relative_links_resolve() -> None:
    broken = []
    for page in guide_pages():
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            for m in LINK.finditer(line):
                target = m.group(1) or m.group(2)
                if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("<"):
                    continue  # http:, https:, mailto: ... are not files here
                path, _, anchor = target.partition("#")
                resolved = (page.parent / path).resolve() if path else page
                where = f"{page.relative_to(REPO)}:{number}: {target}"
                if not resolved.exists():
                    broken.append(f"{where}: no such file")
                elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
                    broken.append(f"{where}: no heading #{anchor}")
    assert not broken, "broken relative links:\n" + "\n".join(broken)


def test_benchmark_tables_are_what_the_generator_writes() -> None:
    """docs/benchmarks.md holds generated tables only: each block equals what benchmarks/pages.py makes
    of benchmarks/results/*.json, so a hand edit inside a block, or a page left behind by a change to
    the generator, fails here (`.venv/bin/python benchmarks/quality.py table` rewrites them)."""
    import importlib.util
    import sys

    sys.path.insert(0, str(REPO / "benchmarks"))  # pages.py imports its sibling score_tables.py
    try:
        spec = importlib.util.spec_from_file_location("simpair_bench_pages", REPO / "benchmarks" / "pages.py")
        assert spec and spec.loader
        pages = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(pages)
        stale = []
        for page, parts in pages.blocks().items():
            text = page.read_text(encoding="utf-8")
            for name, body in parts.items():
                if pages.replace_block(text, name, body) != text:
                    stale.append(f"{page.relative_to(REPO)}: block {name!r}")
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    assert not stale, "generated blocks differ from benchmarks/quality.py table:\n" + "\n".join(stale)
