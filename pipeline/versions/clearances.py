"""Clearances: scorecards a person cleared after reading their source, kept beside the version.

A flag of the fair-play review asks a person to read an agent's source; when it plays within
the rule (banked compute, say), ``sokoforge review V --clear SCORECARD --note TEXT`` records
it. ``clearances.json`` is an append-only log beside the manifest (each clearing and each
undoing with its time, the scorecard's name and solved count), and ``clearances.sha256`` its
digest in ``sha256sum`` format: a record apart from the round's sealed standings, whose bytes
never change, and one ``round publish`` commits with them. A hidden version's copy is its
owner's alone (0600). The last entry for a scorecard says whether it stands cleared.
"""

from __future__ import annotations

__all__ = ["CLEARANCES_FILES", "CLEARANCES_JSON", "CLEARANCES_SHA256", "Clearance",
           "check_clearances", "cleared", "entry", "read_log", "record_clearance", "to_view"]

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pipeline.errors import InputError, PipelineError
from pipeline.versions.hidden_files import is_hidden, private_writes
from pipeline.versions.manifest import read_manifest
from pipeline.versions.rounds import iso, parse_time
from pipeline.versions.tables import write_text
from pipeline.versions.version import MANIFEST_FILE

CLEARANCES_JSON = "clearances.json"
CLEARANCES_SHA256 = "clearances.sha256"
CLEARANCES_FILES = (CLEARANCES_JSON, CLEARANCES_SHA256)
CLEAR, UNCLEAR = "clear", "unclear"


@dataclass(frozen=True)
class Clearance:
    """One entry of the log: ``action`` clear or unclear of ``scorecard_id`` (its key's
    ``name`` and the levels it ``solved`` on the version) at ``at`` (ISO 8601, UTC), with the
    reviewer's ``note``."""

    action: str
    scorecard_id: str
    name: str
    solved: int
    note: str
    at: str

    @property
    def date(self) -> str:
        """The day of the entry (``2026-12-03``), as the boards show it."""
        return self.at[:10]


def read_log(folder: Path) -> list[Clearance]:
    """The version's clearances log, oldest first (empty when none was recorded);
    ``PipelineError`` for a file that is not one."""
    path = folder / CLEARANCES_JSON
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as e:
        raise PipelineError(f"{path} cannot be read ({e}): restore it from git or a "
                            "backup") from None
    try:
        return [Clearance(str(x["action"]), str(x["scorecard_id"]), str(x["name"]),
                          int(x["solved"]), str(x["note"]), str(x["at"])) for x in data["log"]]
    except (KeyError, TypeError, ValueError) as e:
        raise PipelineError(f"{path} is not a clearances log ({e!r} is missing or wrong)") from None


def cleared(folder: Path, before: float | None = None) -> dict[str, Clearance]:
    """Each scorecard that stands cleared (its last entry a clearing), by id, from the entries
    made before ``before`` (all when None); a log that cannot be read counts as none."""
    try:
        log = read_log(folder)
    except PipelineError:
        return {}
    if before is not None:
        log = [c for c in log if parse_time(c.at) < before]
    last = {c.scorecard_id: c for c in log}
    return {k: c for k, c in last.items() if c.action == CLEAR}


def record_clearance(folder: Path, version: str, entry: Clearance) -> Clearance:
    """Append ``entry`` to ``folder``'s log and write its digest; an undoing of a scorecard
    that is not cleared, or a clearing of one that is, is refused (``InputError``)."""
    log = read_log(folder)
    standing = cleared(folder)
    if entry.action == CLEAR and entry.scorecard_id in standing:
        raise InputError(f"{entry.scorecard_id} was cleared on {standing[entry.scorecard_id].at}"
                         f"; --unclear it first to clear it again")
    if entry.action == UNCLEAR and entry.scorecard_id not in standing:
        raise InputError(f"{entry.scorecard_id} is not cleared on {version}")
    parse_time(entry.at)  # a time the log can record
    body = (json.dumps({"format": 1, "version": version,
                        "log": [asdict(c) for c in [*log, entry]]}, indent=2) + "\n")
    digest = hashlib.sha256(body.encode()).hexdigest()
    manifest = read_manifest(folder / MANIFEST_FILE)
    with private_writes(is_hidden(manifest)):
        write_text(body, folder / CLEARANCES_JSON)
        write_text(f"{digest}  {CLEARANCES_JSON}\n", folder / CLEARANCES_SHA256)
    return entry


def check_clearances(folder: Path) -> tuple[Path, ...]:
    """The clearances files to publish with the round (none when nothing was ever cleared),
    after checking the log's bytes against its digest (``PipelineError`` when they differ)."""
    path, sums = folder / CLEARANCES_JSON, folder / CLEARANCES_SHA256
    if not path.is_file():
        return ()
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if not sums.is_file() or sums.read_text(encoding="utf-8").split()[:1] != [digest]:
        raise PipelineError(f"{path} does not match {sums.name} (sha256 {digest}): the log "
                            "was edited by hand; restore it, or clear again through "
                            "sokoforge review --clear")
    read_log(folder)
    return path, sums


def entry(action: str, scorecard_id: str, name: str, solved: int, note: str,
          now: float) -> Clearance:
    """A log entry made now."""
    return Clearance(action, scorecard_id, name, solved, note, iso(now))


def to_view(c: Clearance) -> dict[str, Any]:
    """What a board shows of a clearing: its time and date (the note stays in the log)."""
    return {"at": c.at, "date": c.date}
