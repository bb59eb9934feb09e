"""ioreg's text form (`ioreg -r -d 1 -w 0 -c CLASS`, without -a) read into Python values.

The harness runs ioreg with -a and reads its plist (harness.collect.host.applegpu); what people
publish is the text form, so this reader lets those outputs check the same readings. A
property line is `"key" = value`; a value is a number, Yes/No, a "string", <hex data>, a
{"key"=value,...} dictionary or a (value,...) array. A line that does not parse (ioreg cuts
long values without -w 0) is skipped, not guessed at.
"""

from __future__ import annotations

from typing import Any

_ENDS = ",})"


class _Scanner:
    """One property line, read left to right."""

    def __init__(self, text: str) -> None:
        self.text, self.i = text, 0

    def _peek(self) -> str:
        self._skip_space()
        return self.text[self.i] if self.i < len(self.text) else ""

    def _skip_space(self) -> None:
        while self.i < len(self.text) and self.text[self.i] in " \t":
            self.i += 1

    def _expect(self, char: str) -> None:
        if self._peek() != char:
            raise ValueError(f"expected {char!r} at {self.i}")
        self.i += 1

    def string(self) -> str:
        self._expect('"')
        end = self.text.find('"', self.i)
        if end < 0:
            raise ValueError("unterminated string")
        out, self.i = self.text[self.i:end], end + 1
        return out

    def value(self) -> Any:
        char = self._peek()
        if char == "{":
            return self._container("}", pairs=True)
        if char == "(":
            return self._container(")", pairs=False)
        if char == '"':
            return self.string()
        if char == "<":
            return self._data()
        return self._atom()

    def _container(self, close: str, *, pairs: bool) -> Any:
        self.i += 1
        items: list[Any] = []
        entries: dict[str, Any] = {}
        while self._peek() != close:
            if pairs:
                key = self.string()
                self._expect("=")
                entries[key] = self.value()
            else:
                items.append(self.value())
            if self._peek() == ",":
                self.i += 1
            elif self._peek() != close:
                raise ValueError(f"expected ',' or {close!r} at {self.i}")
        self.i += 1
        return entries if pairs else items

    def _data(self) -> bytes | str:
        # <6b100000> is hex; <"text"> is data ioreg shows as characters.
        end = self.text.find(">", self.i)
        if end < 0:
            raise ValueError("unterminated data")
        body, self.i = self.text[self.i + 1:end], end + 1
        try:
            return bytes.fromhex(body)
        except ValueError:
            return body

    def _atom(self) -> int | bool | str:
        start = self.i
        while self.i < len(self.text) and self.text[self.i] not in _ENDS:
            self.i += 1
        word = self.text[start:self.i].strip()
        if not word:
            raise ValueError(f"empty value at {start}")
        if word in ("Yes", "No"):
            return word == "Yes"
        try:
            return int(word)
        except ValueError:
            return word

    def at_end(self) -> bool:
        return self._peek() == ""


def parse_property(line: str) -> tuple[str, Any]:
    """`"key" = value` -> (key, value); ValueError when the line is not one whole property."""
    scan = _Scanner(line.strip())
    key = scan.string()
    scan._expect("=")
    value = scan.value()
    if not scan.at_end():
        raise ValueError("text after the value")
    return key, value


def parse_ioreg_text(text: str) -> list[dict[str, Any]]:
    """Every `+-o NAME  <class CLASS, ...>` entry -> its properties, with "IOObjectClass" from
    the header (as `ioreg -a` names it); property lines that do not parse are left out."""
    entries: list[dict[str, Any]] = []
    for raw in text.splitlines():
        line = raw.lstrip(" |")
        if line.startswith("+-o "):
            header = line[4:]
            cls = header.partition("<class ")[2].split(",")[0].rstrip(">").strip()
            entries.append({"IORegistryEntryName": header.split("  ")[0].strip(),
                            **({"IOObjectClass": cls} if cls else {})})
        elif line.startswith('"') and entries:
            try:
                key, value = parse_property(line)
            except ValueError:
                continue
            entries[-1][key] = value
    return entries
