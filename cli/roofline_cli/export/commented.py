"""YAML whose fields say where their values come from.

Every exported value that the plan decided is a :class:`Note`: the value and a comment naming the
upstream field it fills, the measured numbers it came from and how it was derived. The renderer
writes the comment as ``#`` lines above the field, so the file stays ready to apply and every
reader sees why a number is what it is. Plain values (names, kinds) carry no comment.

The output is the YAML subset every Kubernetes tool reads alike: block mappings and sequences,
scalars that YAML 1.1 and 1.2 parse the same way (strings double-quoted unless they are plain
words, floats always with a decimal point), multi-line strings as literal blocks. What it writes
reads back as exactly the data it was given, whatever the strings hold: a character that ends a
line for some YAML reader (CR, NEL U+0085, U+2028, U+2029), one a reader refuses (NUL, ESC, DEL,
U+FFFE) and one a terminal or an editor acts on (bidi controls, zero-width characters) is
escaped inside a double-quoted scalar; a literal block is used only for text free of them; and
a comment holding one is never written (:class:`UnwritableText`), since a comment has no escapes.
Pure module.
"""

from __future__ import annotations

import math
import re
import textwrap
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Widest comment line, the ``#`` and indentation included.
COMMENT_WIDTH = 100
#: A string that needs no quotes: a word of letters, digits and ``-._/`` that no YAML version
#: reads as anything but a string.
_PLAIN = re.compile(r"[A-Za-z][A-Za-z0-9._/-]*")
#: Words YAML 1.1 reads as booleans or null.
_RESERVED = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "none", "~"}
#: Unicode categories written only as escapes: controls (C0, DEL, C1: CR, NEL, NUL, ESC),
#: format characters (bidi controls, zero-width characters, the byte-order mark), surrogates,
#: and the line and paragraph separators.
_ESCAPED_CATEGORIES = {"Cc", "Cf", "Cs", "Zl", "Zp"}
#: YAML's escapes for the characters that have a short one, as both YAML 1.1 and 1.2 read them.
_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


class UnwritableText(ValueError):
    """A string that cannot be written as it is: a comment holding a character that ends its
    line or that a reader refuses, or a lone surrogate; ``str()`` is one line naming it."""


def needs_escape(char: str) -> bool:
    """Whether ``char`` is written only as an escape: a control, format or separator character,
    or one outside YAML's printable set (U+FFFE, U+FFFF)."""
    return unicodedata.category(char) in _ESCAPED_CATEGORIES or char in "\ufffe\uffff"


def _named(char: str) -> str:
    name = unicodedata.name(char, "")
    return f"U+{ord(char):04X}" + (f" ({name})" if name else "")


def _escaped(char: str) -> str:
    if char in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[char]
    if unicodedata.category(char) == "Cs":
        raise UnwritableText(f"a string holds a lone surrogate, {_named(char)}: no YAML form")
    if needs_escape(char):
        code = ord(char)
        return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
    return char


def quoted(text: str) -> str:
    """``text`` as a double-quoted scalar, every character :func:`needs_escape` names escaped."""
    return '"' + "".join(_escaped(char) for char in text) + '"'


@dataclass(frozen=True)
class Note:
    """A value and the comment that explains it."""

    value: Any
    comment: str


def plain(value: Any) -> Any:
    """``value`` without its notes: the data the YAML holds."""
    if isinstance(value, Note):
        return plain(value.value)
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def scalar(value: Any) -> str:
    """One scalar as YAML text."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} has no YAML form every reader agrees on")
        text = repr(value)
        mantissa, _, exponent = text.partition("e")
        if "." not in mantissa:
            mantissa += ".0"
        return mantissa + (f"e{exponent}" if exponent else "")
    text = str(value)
    if _PLAIN.fullmatch(text) and text.lower() not in _RESERVED:
        return text
    return quoted(text)


def _check_comment(text: str) -> None:
    for char in text:
        if char != "\n" and needs_escape(char):
            raise UnwritableText(
                f"a comment would hold {_named(char)}, which a YAML comment cannot carry: "
                f"{quoted(text[:60])}"
            )


def _comment(text: str, indent: str) -> list[str]:
    _check_comment(text)
    width = max(40, COMMENT_WIDTH - len(indent) - 2)
    lines: list[str] = []
    for paragraph in text.split("\n"):
        wrapped = textwrap.wrap(paragraph, width, break_long_words=False, break_on_hyphens=False)
        lines.extend(f"{indent}# {line}" for line in wrapped or [""])
    return lines


def _is_block(value: Any) -> bool:
    raw = value.value if isinstance(value, Note) else value
    return (isinstance(raw, Mapping) and bool(raw)) or (
        isinstance(raw, (list, tuple)) and bool(raw)
    )


def _inline(value: Any, indent: str) -> str:
    """A value that fits after ``key:`` or ``-``: a scalar, an empty container or a literal."""
    if isinstance(value, Mapping):
        return "{}"
    if isinstance(value, (list, tuple)):
        return "[]"
    if isinstance(value, str) and _literal(value):
        inner = indent + "  "
        lines = [inner + line if line else "" for line in value.split("\n")[:-1]]
        return "|\n" + "\n".join(lines)
    return scalar(value)


def _literal(text: str) -> bool:
    """Whether ``text`` reads back exactly from a literal block (``|``, clipped): lines ending
    in one line feed, the first with content not indented (the block's indentation is taken from
    it, and there is one), no character that would need an escape."""
    if not text.endswith("\n") or text.endswith("\n\n"):
        return False
    first = next((line for line in text.split("\n") if line), "")
    if not first or first.startswith(" "):
        return False
    return not any(char != "\n" and needs_escape(char) for char in text)


def _mapping(data: Mapping[str, Any], indent: str) -> list[str]:
    lines: list[str] = []
    for key, value in data.items():
        raw = value
        if isinstance(value, Note):
            lines.extend(_comment(value.comment, indent))
            raw = value.value
        name = scalar(key)
        if _is_block(raw):
            lines.append(f"{indent}{name}:")
            lines.extend(_block(raw, indent + "  "))
        else:
            lines.append(f"{indent}{name}: {_inline(raw, indent)}")
    return lines


def _sequence(items: Sequence[Any], indent: str) -> list[str]:
    lines: list[str] = []
    for item in items:
        raw = item
        if isinstance(item, Note):
            lines.extend(_comment(item.comment, indent))
            raw = item.value
        if isinstance(raw, Mapping) and raw:
            body = _mapping(raw, indent + "  ")
            first = next(i for i, line in enumerate(body) if not line.lstrip().startswith("#"))
            lines.extend(body[:first])
            lines.append(f"{indent}- {body[first][len(indent) + 2 :]}")
            lines.extend(body[first + 1 :])
        elif _is_block(raw):
            lines.append(f"{indent}-")
            lines.extend(_block(raw, indent + "  "))
        else:
            lines.append(f"{indent}- {_inline(raw, indent)}")
    return lines


def _block(value: Any, indent: str) -> list[str]:
    if isinstance(value, Mapping):
        return _mapping(value, indent)
    return _sequence(value, indent)


def render_document(document: Mapping[str, Any] | Sequence[Any], header: str = "") -> str:
    """One YAML document (an object, or a list such as a JSON patch), its header comment
    first."""
    lines = _comment(header, "") if header else []
    lines.extend(_block(document, ""))
    return "\n".join(lines) + "\n"


def render(documents: Sequence[tuple[str, Mapping[str, Any] | Sequence[Any]]]) -> str:
    """``(header, document)`` pairs as one multi-document YAML stream."""
    return "---\n".join(render_document(doc, header) for header, doc in documents)
