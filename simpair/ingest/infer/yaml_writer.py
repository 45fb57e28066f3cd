"""Write a proposed contract as YAML that reads like the hand-written ones in data_contracts/.

Sections in block style, short leaves in flow style (`[0, 1]`, `{split: train}`), separators as escapes
on one line, a header of `# review:` notes, and a short `# comment` on the lines whose value was read
off the sample.
"""

from __future__ import annotations

import copy
import re
import textwrap
from typing import Any

import yaml


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


def contract_yaml(
    contract: dict[str, Any], header: list[str], notes: list[str], inline: dict[str, str]
) -> str:
    """`header` paragraphs and `review:` notes as comments, then the fields, some with a comment."""
    lines = [f"# {line}" for text in header for line in _wrap(text)]
    if notes:
        lines.append("#")
        for note in notes:
            wrapped = _wrap(f"review: {note}")
            lines.append(f"# {wrapped[0]}")
            lines.extend(f"#   {rest}" for rest in wrapped[1:])
    body = yaml.dump(
        _flow_marked(contract), Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=10_000
    )
    return "\n".join([*lines, *_with_comments(body.splitlines(), inline)]) + "\n"
