"""Markdown tables as data: the report builds them, templates render them with `| table`.

Cells are strings already formatted by the analysis step; rendering only escapes them, so a
pipe or a newline inside a label can never break a table's column count.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]] = field(default_factory=list)
    # "l" or "r" per column; numbers read better right-aligned.
    align: list[str] | None = None

    def add(self, *cells: object) -> None:
        if len(cells) != len(self.header):
            raise ValueError(f"row has {len(cells)} cells, table has {len(self.header)} columns")
        self.rows.append(["" if c is None else str(c) for c in cells])

    def __bool__(self) -> bool:
        return bool(self.rows)


def escape(cell: str) -> str:
    return cell.replace("\\", "\\\\").replace("|", "\\|").replace("\r", "").replace("\n", "<br>")


def render(t: Table) -> str:
    align = t.align or ["l"] * len(t.header)
    rule = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(escape(h) for h in t.header) + " |",
             "| " + " | ".join(rule) + " |"]
    lines += ["| " + " | ".join(escape(c) for c in row) + " |" for row in t.rows]
    return "\n".join(lines)


def parse(markdown: str) -> list[list[list[str]]]:
    """Every table in a Markdown text as rows of cells (header first, rule row dropped).

    Used by tests to check that what the report prints is well formed; it splits on
    unescaped pipes only.
    """
    tables: list[list[list[str]]] = []
    cur: list[list[str]] | None = None
    for line in markdown.splitlines():
        s = line.strip()
        if s.startswith("|") and s.endswith("|"):
            cells = _split(s[1:-1])
            if cur is None:
                cur = []
                tables.append(cur)
            if all(set(c.strip()) <= set("-:") and c.strip() for c in cells):
                continue
            cur.append([c.strip() for c in cells])
        else:
            cur = None
    return tables


def _split(s: str) -> list[str]:
    out, buf, i = [], [], 0
    while i < len(s):
        ch = s[i]
        if ch == "\\" and i + 1 < len(s):
            buf.append(s[i:i + 2])
            i += 2
            continue
        if ch == "|":
            out.append("".join(buf))
            buf = []
        else:
            buf.append(ch)
        i += 1
    out.append("".join(buf))
    return out
