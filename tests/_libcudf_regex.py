"""The regular-expression syntax libcudf documents, as a checker that runs without a GPU.

libcudf's regex engine (cudf ``.str.contains/count/replace/split/...``) accepts a subset
of the usual syntax; anything else is "undefined behaviour" or an error at the first
call on the device. The rules below follow libcudf's "Regex Features" page
(docs.rapids.ai, libcudf_docs/md_regex) and its parser (cpp/src/strings/regex/
regcomp.cpp), which reads the pattern as NUL-terminated code points:

- no literal NUL (the parser stops there); other control characters may be literal;
- a non-ASCII character is written as itself, never as ``\\xHH`` or octal: the parser
  packs each character of the pattern into its UTF-8 bytes, as it does the text, while
  an escape gives the bare number (``\\x85`` is 0x85, and U+0085 in a text is 0xC285);
- escapes outside a class: ``\\t \\n \\r \\a \\f``, ``\\xHH`` (two hex digits), octal
  ``\\0``..``\\177``, ``\\w \\W \\s \\S \\d \\D \\b \\B \\A \\Z`` and a backslash before one of
  the listed punctuation characters; no ``\\v``, ``\\p{..}``, ``\\u``, ``\\z``;
- inside a class: ``\\n \\r \\t \\a \\b \\f``, ``\\xHH``, octal, ``\\w \\W \\s \\S \\d \\D`` and a
  backslash before punctuation; a ``-`` is a range between two single characters, never
  the first or last member (``[-z]``, ``[a-]`` are undefined); the END of a range is
  read as the character after the backslash, unconverted (``[\\x00-\\x7f]`` is
  ``[\\x00-x7f]`` there: NUL to ``x``, then ``7`` and ``f``), so it is written as
  itself; no empty class;
- groups ``( )`` and ``(?: )`` only (no lookaround, flags or named groups), no empty group;
- a quantifier (``* + ? {n} {n,} {n,m}``, each with a lazy ``?``) follows a character,
  a class, ``.`` or a group; counts 0..999, ``m >= n``;
- ``|`` never first.
"""

from __future__ import annotations

import re

# regcomp.cpp's escapable_chars: punctuation a backslash turns into a literal.
_ESCAPABLE = set(".-+*\\?^$|{}()[]<>\"~'`_@=;:!#%&,/ ")
_ESCAPES_OUTSIDE = set("tnrafwWsSdDbBAZ")
_ESCAPES_INSIDE = set("nrtabfwWsSdD") | _ESCAPABLE
_SHORTHANDS = set("wWsSdD")
_OCTAL = set("01234567")
_HEX = set("0123456789abcdefABCDEF")
_COUNTED = re.compile(r"\{(\d+)(,(\d*))?\}")


def _is_nul(ch: str) -> bool:
    return ch == "\x00"


def _numeric(value: int, i: int, problems: list[str]) -> str:
    if value >= 0x80:
        problems.append(
            f"escape for U+{value:04X} at {i}: libcudf matches the number, not the character's"
            " UTF-8 bytes; write the character itself"
        )
    return chr(value)


def _escape(pattern: str, i: int, inside: bool, problems: list[str]) -> tuple[int, str | None]:
    """Read the escape at ``pattern[i] == '\\\\'``; return (next index, char or None)."""
    if i + 1 >= len(pattern):
        problems.append(f"trailing backslash at {i}")
        return i + 1, None
    d = pattern[i + 1]
    if d == "x":
        digits = pattern[i + 2 : i + 4]
        if len(digits) != 2 or not set(digits) <= _HEX:
            problems.append(f"\\x needs two hex digits at {i}")
            return i + 2, None
        return i + 4, _numeric(int(digits, 16), i, problems)
    if d in _OCTAL:
        j = i + 2
        while j < len(pattern) and j < i + 4 and pattern[j] in _OCTAL:
            j += 1
        return j, _numeric(int(pattern[i + 1 : j], 8), i, problems)
    allowed = _ESCAPES_INSIDE if inside else _ESCAPES_OUTSIDE | _ESCAPABLE
    if d not in allowed:
        where = "inside a class" if inside else "outside a class"
        problems.append(f"escape \\{d} at {i} is not in libcudf's syntax ({where})")
        return i + 2, None
    if inside and d in _SHORTHANDS:
        return i + 2, None  # a set, not one character: cannot bound a range
    single = {"n": "\n", "r": "\r", "t": "\t", "a": "\a", "b": "\b", "f": "\f"}
    return i + 2, single.get(d, d)


def _class(pattern: str, i: int, problems: list[str]) -> int:
    """Check the class opening at ``pattern[i] == '['``; return the index after it."""
    j = i + 1
    if j < len(pattern) and pattern[j] == "^":
        j += 1
    members: list[str | None] = []
    while True:
        if j >= len(pattern):
            problems.append(f"unterminated class opened at {i}")
            return j
        ch = pattern[j]
        if ch == "]" and members:
            break
        if ch == "\\":
            j, member = _escape(pattern, j, True, problems)
            members.append(member)
            continue
        if ch == "-":
            if not members or j + 1 >= len(pattern) or pattern[j + 1] == "]":
                problems.append(f"incomplete range '-' at {j} (write \\- for a hyphen)")
                members.append("-")
                j += 1
                continue
            lo = members[-1]
            if pattern[j + 1] == "\\":
                # libcudf takes the character after the backslash as the range's end
                raw = pattern[j + 2 : j + 3]
                j, hi = _escape(pattern, j + 1, True, problems)
                if hi != raw:
                    problems.append(
                        f"range end written as an escape at {j}: libcudf ends the range at"
                        f" {raw!r}; write the end character itself"
                    )
            else:
                hi = pattern[j + 1]
                if _is_nul(hi):
                    problems.append(f"literal NUL at {j + 1}")
                j += 2
            if lo is None or hi is None:
                problems.append(f"range at {j} does not join two single characters")
            elif ord(hi) < ord(lo):
                problems.append(f"range {lo!r}-{hi!r} runs backwards")
            members.append(hi)
            continue
        if _is_nul(ch):
            problems.append(f"literal NUL at {j}")
        members.append(ch)
        j += 1
    return j + 1


def libcudf_regex_problems(pattern: str) -> list[str]:
    """Return what in ``pattern`` libcudf's documented regex syntax does not allow."""
    problems: list[str] = []
    depth = 0
    prev = "start"  # start | atom | quant | anchor
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            d = pattern[i + 1 : i + 2]
            i, _ = _escape(pattern, i, False, problems)
            prev = "anchor" if d in ("b", "B", "A", "Z") else "atom"
        elif ch == "[":
            i = _class(pattern, i, problems)
            prev = "atom"
        elif ch == "(":
            if pattern.startswith("(?", i):
                if not pattern.startswith("(?:", i):
                    opening = pattern[i : i + 3]
                    problems.append(f"group syntax {opening!r} at {i}: only ( ) and (?: )")
                i += 3
            else:
                i += 1
            if i < len(pattern) and pattern[i] == ")":
                problems.append(f"empty group at {i}")
            depth += 1
            prev = "start"
        elif ch == ")":
            depth -= 1
            if depth < 0:
                problems.append(f"unmatched ')' at {i}")
                depth = 0
            i += 1
            prev = "atom"
        elif ch in "*+?":
            if prev != "atom":
                problems.append(f"nothing to repeat at {i}")
            i += 1
            if i < len(pattern) and pattern[i] == "?":
                i += 1  # lazy
            prev = "quant"
        elif ch == "{" and (m := _COUNTED.match(pattern, i)):
            n = int(m.group(1))
            hi = m.group(3)
            if prev != "atom":
                problems.append(f"nothing to repeat at {i}")
            if n > 999 or (hi and int(hi) > 999):
                problems.append(f"repeat count over 999 at {i}")
            if hi and int(hi) < n:
                problems.append(f"repeat {{{n},{hi}}} at {i}: max below min")
            i = m.end()
            if i < len(pattern) and pattern[i] == "?":
                i += 1
            prev = "quant"
        elif ch == "|":
            if i == 0:
                problems.append("'|' first: nothing to repeat")
            i += 1
            prev = "start"
        elif ch in "^$":
            i += 1
            prev = "anchor"
        else:
            if _is_nul(ch):
                problems.append(f"literal NUL at {i}")
            i += 1
            prev = "atom"
    if depth:
        problems.append(f"{depth} unclosed '('")
    return problems
