"""Level collection files as people write them: boards with titles, metadata and comments.

Beyond the strict form ``parse_levels`` reads, collections carry heading lines without ``;``
(``Level 1``), ``Key: value`` lines (``Title:``, ``Author:``) and ``Comment:`` ...
``Comment-End`` blocks. A board row is a line of XSB characters holding a wall (or any line
that starts and ends with a wall); every other non-blank line is metadata.
"""

from __future__ import annotations

__all__ = ["FileLevel", "read_collection"]

import re
from dataclasses import dataclass

from engine.levels import MAX_CRATES, MAX_SIDE, Level, LevelError, parse_xsb

_BOARD_CHARS = frozenset("#@+$*.-_ ")
_KEY = re.compile(r"^([A-Za-z][A-Za-z0-9 _-]{0,30}):\s*(.*)$")
_COMMENT_START = re.compile(r"^comment\s*:\s*$", re.IGNORECASE)
_COMMENT_END = re.compile(r"^comment[\s_-]*end\s*:?\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class FileLevel:
    """One board of a collection file: its place in the file, its title and its level.

    ``level`` is None when the board is well formed but beyond what the engine searches
    (``too_large`` says why); it can then be reported and skipped rather than stop the file.
    """

    number: int
    line: int
    title: str
    text: str
    level: Level | None
    too_large: str | None = None

    def name(self, source: str) -> str:
        """How messages name the board: file, 1-based number, title and first line."""
        title = f" {self.title!r}" if self.title else ""
        return f"{source} level {self.number}{title} (line {self.line})"


@dataclass
class _Board:
    line: int
    rows: list[str]
    heading: list[str]       # free text and ; lines since the previous board, in order
    own_title: str | None    # a Title: line touching the board (no blank line between)


def read_collection(text: str, source: str = "input") -> list[FileLevel]:
    """Every board of a collection file, in file order; ``source`` names the file in errors.

    A malformed board raises ``LevelError`` naming ``source`` and the file line; a board
    larger than 16x16 or with more than 6 crates is returned with ``too_large`` set.
    """
    lines = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    boards: list[_Board] = []
    heading: list[str] = []
    current: _Board | None = None
    paragraph_keys: dict[str, str] = {}  # Title: etc. of the paragraph being read
    in_comment = False
    last_closed: _Board | None = None  # a board whose paragraph is still open
    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip()
        stripped = line.strip()
        if in_comment:
            in_comment = not _COMMENT_END.match(stripped)
            continue
        kind = _classify(line, inside=current is not None)
        if kind == "pad":
            continue
        if kind == "board":
            _check_characters(line, number, source)
            if current is None:
                title = paragraph_keys.get("title")
                current = _Board(number, [], heading, title)
                heading = []
            current.rows.append(line)
            continue
        if current is not None:
            boards.append(current)
            last_closed, current = current, None
            paragraph_keys = {}
        if not stripped:
            last_closed = None
            paragraph_keys = {}
            continue
        if _COMMENT_START.match(stripped):
            in_comment = True
            continue
        key = _KEY.match(stripped) if not stripped.startswith(";") else None
        if key:
            name, value = key.group(1).strip().lower(), key.group(2).strip()
            if last_closed is not None:
                if name == "title" and last_closed.own_title is None:
                    last_closed.own_title = value
            else:
                paragraph_keys[name] = value
            continue
        last_closed = None
        heading.append(stripped.lstrip(";").strip())
    if current is not None:
        boards.append(current)
    if in_comment:
        raise LevelError(f"{source}: a Comment: block is never closed by Comment-End")
    if not boards:
        raise LevelError(f"{source}: no level found")
    return [_level(i, board, source) for i, board in enumerate(boards, start=1)]


def _classify(line: str, inside: bool) -> str:
    """``board`` for a board row, ``pad`` for floor alone outside a board, ``other`` for
    metadata, blanks and comments."""
    stripped = line.strip()
    if not stripped or stripped.startswith(";"):
        return "other"
    chars = set(line)
    if chars <= _BOARD_CHARS:
        # a row without a wall continues a board (padding) but starts none
        return "board" if "#" in chars or inside else "pad"
    # a row framed by walls is a board row with a typo: refused, not read as a title
    return "board" if stripped.startswith("#") and stripped.endswith("#") else "other"


def _check_characters(line: str, number: int, source: str) -> None:
    for col, ch in enumerate(line, start=1):
        if ch not in _BOARD_CHARS:
            raise LevelError(f"{source} line {number}, column {col}: unknown character {ch!r} "
                             "in a board row")


def _level(number: int, board: _Board, source: str) -> FileLevel:
    title = board.own_title or (board.heading[-1] if board.heading else "")
    # an indented board is the same board: the margin every row shares is not part of it
    walled = [r for r in board.rows if "#" in r]
    margin = min(len(r) - len(r.lstrip(" -_")) for r in walled) if walled else 0
    text = "\n".join(r[margin:] for r in board.rows)
    rows = [r.rstrip(" -_") for r in text.split("\n")]
    height = len([r for r in rows if r])
    width = max(len(r) for r in rows)
    crates = text.count("$") + text.count("*")
    if height > MAX_SIDE or width > MAX_SIDE:
        return FileLevel(number, board.line, title, text, None,
                         f"board is {height}x{width}, larger than {MAX_SIDE}x{MAX_SIDE}")
    if crates > MAX_CRATES:
        return FileLevel(number, board.line, title, text, None,
                         f"{crates} crates, more than the engine's {MAX_CRATES}")
    try:
        level = parse_xsb(text, title=title)
    except LevelError as e:
        where = FileLevel(number, board.line, title, text, None).name(source)
        raise LevelError(f"{where}: {e}") from None
    return FileLevel(number, board.line, title, text, level)
