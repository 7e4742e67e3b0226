"""The reference documentation under docs/reference/, written from the code it describes.

The names, types and defaults come from the code (the spec parser, ``LEVEL_COLUMNS``, the
manifest writer, the server's route declarations); only the meanings are written here, and
writing a page fails when a name has none or a meaning names something the code lacks, so
the pages cannot drift (``python -m sokoforge.reference`` rewrites them; a test compares).
"""

from __future__ import annotations

__all__ = [
    "DOCS", "PAGES", "levels_page", "protocol_page", "spec_defaults", "spec_page", "write_pages",
]

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs" / "reference"

# -- game specs ---------------------------------------------------------------------------------
# TOML field -> (type, meaning); the default is read from the parser (``spec_defaults``).
SPEC_FIELDS = {
    "name": ("string", "the game's name: the version's `game`, the server's game name"),
    "height": ("integer 3-16", "board rows"),
    "width": ("integer 3-16", "board columns"),
    "method": ("`goal_first` or `scatter`", "how candidate levels are drawn: backwards from "
               "the solved state (goal-first), or crates scattered then solved"),
    "candidates_per_slot": ("integer 1-64", "candidates drawn per slot before select chooses"),
    "max_attempts": ("integer 1-100000", "wall layouts tried per slot before the build "
                     "fails naming the slot"),
    "budget": ("table", "the step-budget rule: `multiple` and `floor`, or `fixed`"),
    "budget.multiple": ("integer 1-100", "a level's budget is `multiple` x its optimum ..."),
    "budget.floor": ("integer 0-30000", "... and at least `floor` steps"),
    "budget.fixed": ("integer 1-30000", "every level's budget, instead of `multiple` and "
                     "`floor` (excludes both)"),
    "tiers": ("array of tables", "the tiers in play order; a tier is a run of levels with "
              "one crate count"),
    "tiers.levels": ("integer 1-10000", "levels (slots) in the tier"),
    "tiers.crates": ("integer 1-6", "crates of every level of the tier"),
    "tiers.wall_density": ("float 0 <= d < 1", "share of the interior cells that are walls"),
    "tiers.band_start": ("[lo, hi]", "optimal-moves band of the tier's first slot; the band "
                         "slides linearly to `band_end` over the slots"),
    "tiers.band_end": ("[lo, hi]", "optimal-moves band of the tier's last slot"),
    "tiers.band": ("[lo, hi]", "one flat band for every slot (excludes `band_start` and "
                   "`band_end`): levels spread over it"),
    "look": ("`shared`, `arc` or `themed`", "how boards become 64x64 pictures"),
    "noise": ("boolean", "Gaussian pixel noise on a themed look, a function of (level, step)"),
    "compute": ("`predicted` or `measured`", "where `compute_to_solve` comes from: the "
                "difficulty model's prediction, or the compute ladder played on every level"),
    "restarts": ("`none`, `level` or `game`", "what RESET may do when served; unset: `none` "
                 "for a hidden set, `game` for a practice set (public seed, imported, public)"),
    "visibility": ("`hidden` or `public`", "whether the versions may be shipped (public: "
                   "seed in the manifest, a play page) or are a hidden set"),
    "min_first_push_traps": ("integer 0-64", "first pushes of every level that must lead "
                             "into a dead state (the audit checks it)"),
    "panel_tolerance": ("integer 0-10000", "how many levels a rotation may move any panel "
                        "agent's solved count before it is refused"),
    "adaptive": ("table", "an adaptive game's pool: its tiers' `levels` become their shares "
                 "of `pool` levels (bands kept), and sessions choose their levels "
                 "(`pipeline.scores.adaptive`); unset for a fixed game"),
    "adaptive.pool": ("integer 1-10000, at least `episodes`", "levels in the pool (serve 500 or "
                      "more: no level in more than a quarter of sessions)"),
    "adaptive.episodes": ("integer 1-`pool`", "levels each session shows"),
    "adaptive.parallel": ("integer 1-`episodes`", "levels chosen at a time, each block "
                          "once the last one's episodes ended"),
}

# A theme's fields (engine.pictures.look.Theme): the colours and switches a look draws with.
THEME = {
    "floor": "floor cells, and the canvas around the board",
    "floor_alt": "the checker's other floor colour",
    "wall": "wall cells",
    "wall_edge": "a wall cell's outermost pixel rows and columns",
    "goal": "the square of a goal cell",
    "box": "a crate",
    "box_edge": "a crate's outline",
    "box_on_goal": "a crate on a goal",
    "player": "the player",
    "checker": "floor cells with (row + column) odd drawn in `floor_alt`",
    "noise_std": "standard deviation of the Gaussian pixel noise (0: none)",
}

# -- levels.parquet -------------------------------------------------------------------------------
COLUMNS = {
    "index": "play order, from 0 (level N of a message is index N-1)",
    "tier": "the tier, from 0",
    "n_crates": "crates on the board",
    "height": "board rows",
    "width": "board columns",
    "xsb": "the board in XSB text (`#` wall, `@` player, `$` crate, `.` goal, `*` crate on "
           "goal, `+` player on goal)",
    "optimal_moves": "fewest moves that solve it (proven by breadth-first search)",
    "optimal_pushes": "pushes of the stored solution",
    "solution": "an optimal solution in LURD (upper case: a push)",
    "max_steps": "the episode's step budget, by the spec's rule",
    "difficulty": "the chance of failing at 256 dynamics calls per step (from "
                  "`compute_to_solve`)",
    "grade": "1-5, fixed cut points on `compute_to_solve` (grade >= 4 iff difficulty > 0.5)",
    "canonical_id": "hash of the level under its 8 rotations and reflections (an indentation "
                    "margin ignored)",
    "theme": "the level's theme as JSON (themed looks; else null)",
    "noise_seed": "the noise key hashed from the version seed (noisy looks; else null)",
    "slot": "the slot within the tier it was selected for",
    "band_lo": "the slot's optimal-moves band, low end (null for imported levels)",
    "band_hi": "the slot's optimal-moves band, high end",
    "wall_layout_id": "hash of the wall layout under the 8 symmetries",
    "box_changes": "times the solution switches from pushing one crate to another",
    "reachable_states": "states reachable from the start",
    "dead_fraction": "share of the reachable states from which it cannot be solved",
    "first_push_traps": "first pushes that lead straight into a dead state",
    "detour_pushes": "pushes of the solution beyond the crates' summed goal distances",
    "optimal_solutions": "how many optimal solutions there are",
    "branching_factor": "mean successors per state of the search",
    "states_expanded": "states the optimal search expanded",
    "compute_to_solve": "log2 of the dynamics calls per step at which the reference planner "
                        "solves it half the time (2-18)",
    "compute_censored": "`compute_to_solve` lies above the ladder (stored as 18)",
    "compute_measured": "`compute_to_solve` was measured on the ladder (else predicted)",
    "solve_rates": "the planner's solve rate at each ladder budget (measured only)",
    "ladder_played": "the rungs of the ladder played (measured only)",
    # imported collections add these
    "source_file": "imported: the file the board came from",
    "source_level": "imported: its 1-based number in that file",
    "title": "imported: its title (a `Title:` line, a heading or a `;` line)",
    "author": "imported: its `Author:` line, else the file header's",
    "imputed_features": "imported: grade features set to the model's neutral value (search "
                        "too large), else null",
}

# -- manifest.json ------------------------------------------------------------------------------
MANIFEST = {
    "format": "the manifest format (1)",
    "version": "the version's name (its folder)",
    "game": "the game's name, as served",
    "spec": "the spec it was built from, as plain data (the TOML's shape)",
    "seed_commitment": "`{salt, sha256}`: the salted sha256 of the seed (null for an "
                       "imported version); `reveal` and `verify` open it",
    "seed_source": "`secret`, `public` or `imported`",
    "public_seed": "the seed, when it was public from the start",
    "files": "`{\"levels.parquet\": {sha256, rows}}`",
    "generator": "`package_version`, `method`, `libraries` (their versions) and "
                 "`difficulty_model` (the sha256 of the model that graded it)",
    "excluded_versions": "the versions whose levels it excludes: `{version, sha256}`",
    "rotated_from": "the version it replaces (a rotation), else null",
    "rotation": "a rotation's `from` and `excluded_files` (name and sha256)",
    "created": "when it was published (UTC)",
    "origins": "per level in play order, the draw that makes it from the seed",
    "visibility": "`public`, or absent (hidden)",
    "sources": "imported: each source file's `name`, `sha256`, `levels` and `imported`",
    "import": "imported: the `tier` rule, `skip_unsolvable`, `skipped` and "
              "`imputed_features`",
}
# The files a version's folder may hold beside levels.parquet and manifest.json.
FOLDER = {
    "levels.parquet": "the levels (immutable)",
    "manifest.json": "what the version is and how to check it (immutable)",
    ".gitignore": "a hidden version's: everything, so git never offers it",
    "sources/": "imported: the source files, kept for `verify`",
    "stages/": "the build's stage outputs (not committed)",
    "report/": "the audit's report, `checks.json`, `equivalence.json` of a rotation, "
               "`irt.json`, `people.md`, `panel.parquet` (each panel agent's solved, steps "
               "and pushes per level), `review.json` and `review.md` of `sokoforge review` "
               "(not committed)",
    "reveal.json": "the revealed seed and the commitment it opens",
    "round.json": "the round: opened, closes, closed, the standings' sha256",
    "standings.json": "the round's final standings",
    "standings.csv": "the same as CSV",
    "standings.sha256": "both files' sha256 (`sha256sum -c`); its own sha256 is in "
                        "round.json",
    "clearances.json": "the log of scorecards a person cleared after reading their source "
                       "(`sokoforge review --clear`, `--unclear`), each entry with its date",
    "clearances.sha256": "its sha256 (`sha256sum -c`), checked and published by "
                         "`round publish`",
}


# fields of which one form or the other is required
EITHER = ("budget.multiple", "budget.floor", "budget.fixed", "tiers.band_start",
          "tiers.band_end", "tiers.band")


def _cell(text: str) -> str:
    """Text for a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def spec_defaults() -> dict[str, object]:
    """Each optional spec field's default, as the parser applies it to a spec without it."""
    from pipeline.spec import DEFAULT_EPISODES, DEFAULT_PARALLEL, DEFAULT_POOL, spec_from_dict

    minimal = {"name": "g", "height": 8, "width": 8, "method": "goal_first",
               "candidates_per_slot": 1, "max_attempts": 1,
               "budget": {"multiple": 3, "floor": 0},
               "tiers": [{"levels": 1, "crates": 1, "wall_density": 0.1, "band": [1, 2]}]}
    spec = spec_from_dict(minimal)
    return {"look": spec.look, "noise": spec.noise, "compute": spec.compute,
            "restarts": spec.restarts, "visibility": spec.visibility,
            "min_first_push_traps": spec.min_first_push_traps,
            "panel_tolerance": spec.panel_tolerance, "adaptive": None,
            "adaptive.pool": DEFAULT_POOL, "adaptive.episodes": DEFAULT_EPISODES,
            "adaptive.parallel": DEFAULT_PARALLEL}


def _check(names: set[str], described: set[str], what: str) -> None:
    missing, stale = sorted(names - described), sorted(described - names)
    if missing or stale:
        raise ValueError(f"{what}: undocumented {missing}, documented but absent {stale}")


def spec_page() -> str:
    from pipeline import spec as specs

    names = (set(specs._TOP_FIELDS) | {f"budget.{f}" for f in specs._BUDGET_FIELDS}
             | {f"tiers.{f}" for f in specs._TIER_FIELDS}
             | {f"adaptive.{f}" for f in specs._ADAPTIVE_FIELDS})
    _check(names, set(SPEC_FIELDS), "spec fields")
    defaults = spec_defaults()

    def shown(field: str) -> str:
        if field in defaults:
            value = defaults[field]
            if value is None:
                return "unset"
            return f"`{str(value).lower()}`" if isinstance(value, bool) else f"`{value}`"
        return "one form" if field in EITHER else "required"

    rows = "\n".join(f"| `{f}` | {_cell(t)} | {shown(f)} | {_cell(m)} |"
                     for f, (t, m) in SPEC_FIELDS.items())
    from dataclasses import MISSING, fields

    from engine.pictures.look import SHARED_THEME, Theme

    theme = {f.name: f for f in fields(Theme)}
    _check(set(theme), set(THEME), "theme fields")

    def kind(name: str) -> str:
        return "RGB [r, g, b]" if "tuple" in str(theme[name].type) else str(theme[name].type)

    themes = "\n".join(
        f"| `{n}` | {kind(n)} | "
        f"{'required' if theme[n].default is MISSING else f'`{theme[n].default}`'} | "
        f"`{getattr(SHARED_THEME, n)}` | {_cell(m)} |" for n, m in THEME.items())
    return f"""# Game specs

A spec is a TOML file (`pipeline/specs/NAME.toml`, or any path given to `--spec`) that says
how many levels of which kind a version holds. Every field is checked when it is read; an
unknown or bad field is named in the error. `[budget]` takes `multiple` and `floor`, or
`fixed` alone; each `[[tiers]]` takes `band_start` and `band_end` (a ramp), or `band` alone.

| field | type | default | meaning |
| --- | --- | --- | --- |
{rows}

## Themes

A look draws with a theme: `shared` with the shared Latent Sokoban environment's own (below),
`themed` with one per level, drawn from the version seed and stored in the `theme` column of
`levels.parquet` as JSON (`sokoforge render --theme FILE.json` draws with any). A board of
h x w cells is drawn with cells of `c = 64 // max(h, w)` pixels, centred on the 64x64 canvas
(top offset `(64 - h*c) // 2`, left `(64 - w*c) // 2`); a column of spaces every row begins
with is part of the board.

| field | type | default | shared look | meaning |
| --- | --- | --- | --- | --- |
{themes}
"""


def levels_page() -> str:
    from pipeline.stages.importing import IMPORT_COLUMNS
    from pipeline.stages.write import LEVEL_COLUMNS
    from pipeline.versions.manifest import IMPORTED

    _check(set(LEVEL_COLUMNS) | set(IMPORT_COLUMNS), set(COLUMNS), "levels.parquet columns")
    types = {**LEVEL_COLUMNS, **IMPORT_COLUMNS}
    columns = "\n".join(f"| `{c}` | {types[c]} | {_cell(m)} |" for c, m in COLUMNS.items())
    fields = "\n".join(f"| `{k}` | {_cell(m)} |" for k, m in MANIFEST.items())
    folder = "\n".join(f"| `{k}` | {_cell(m)} |" for k, m in FOLDER.items())
    return f"""# A version: its folder, levels.parquet and manifest.json

`datasets/VERSION/` (or `--datasets`, `$SOKOFORGE_DATASETS`) holds one version. It appears
only when finished (a build, rotation or import renames it into place); `levels.parquet` and
`manifest.json` never change after that, and everything later (reveal, round, audit) is a
file of its own beside them.

| file | what it is |
| --- | --- |
{folder}

## levels.parquet

One row per level, in play order. Types are Polars'; an imported version
(`seed_source` `{IMPORTED}`) adds the last columns.

| column | type | meaning |
| --- | --- | --- |
{columns}

## manifest.json

| field | meaning |
| --- | --- |
{fields}
"""


def _shape(schema: dict, prefix: str = "") -> list[str]:
    """One table row per field of a JSON schema object, nested objects flattened as a.b."""
    rows = []
    required = set(schema.get("required", ()))
    for name, sub in (schema.get("properties") or {}).items():
        kind = sub.get("type", "any")
        if kind == "array":
            kind = f"array of {(sub.get('items') or {}).get('type', 'any')}"
        if "enum" in sub:
            kind += " (" + ", ".join(f"`{v}`" for v in sub["enum"]) + ")"
        if sub.get("nullable"):
            kind += " or null"
        rows.append(f"| `{prefix}{name}` | {kind} | "
                    f"{'always' if name in required else 'when given'} |")
        if sub.get("type") == "object":
            rows += _shape(sub, f"{prefix}{name}.")
    return rows


def protocol_page() -> str:
    from pipeline.scores.currency import CALL
    from serve.app import all_routes
    from serve.arena.scorecards import SCORE_FIELDS
    from serve.native import FRAME, SCORE

    rows = []
    for r in all_routes():
        statuses = "; ".join(f"{code} {what}" for code, what in sorted(r.responses.items()))
        rows.append(f"| {r.method} `{r.path}` | {r.tag or ''} | {'yes' if r.auth else 'no'} | "
                    f"{_cell(r.summary)} | {_cell(statuses)} |")
    fields = []
    for r in all_routes():
        given = [*((f, "path") for f in r.params), *((f, "query") for f in r.query),
                 *((f, "body") for f in r.body or ())]
        for f, where in given:
            fields.append(f"| {r.method} `{r.path}` | `{f.name}` ({where}) | "
                          f"{'required' if f.required else 'optional'} | "
                          f"{_cell(f.description)} |")
    score = ", ".join(f"`{f}`" for f in SCORE_FIELDS)
    return f"""# The wire protocol

The server (`sokoforge serve`) speaks the agent protocol of the public Latent Sokoban server
(keys, scorecards, one session per game, frames of base64 64x64x3 images, scores, a
leaderboard) and the ARC-AGI-3 agent API over the same store; a running server describes
every route in `/api/openapi.json` and `/api/docs`. Requests and answers are JSON; a key
(`api_key` in the answer of `POST /api/keys`, shown once) goes in the `X-API-Key` header; a
scorecard (`scorecard_id` in the answer of `POST /api/scorecards`) is the `{{scorecard_id}}`
of the routes below; actions are 0 up, 1 down, 2 left, 3 right. A refusal is
`{{"detail": "..."}}` (ARC routes: `{{"error", "message"}}`) with 401 (key), 404 (unknown,
expired or another key's), 409 (over: a session, a scorecard, or the version's round),
422 (malformed; 400 on the ARC face), 429 (a limit, with `Retry-After`). A request body may
be sent gzipped (`Content-Encoding: gzip` or `x-gzip`; any other coding is a 415 before the
body is read); a number in it must be finite (`NaN`, `Infinity` or `1e999` anywhere is a 400).
A Score has
{score} (`success_interval` is `[lo, hi]`, 95%, over draws of levels). The
leaderboard keeps each name's best closed scorecard per version, ranked by `success_rate`,
then `move_efficiency`, then fewer episodes lost (deadlocked, or never played), then the
earlier submission. An adaptive game's board ranks each name instead by its ability pooled
over all its closed scorecards (`ability`, `equated_success`, with 95% intervals); its raw
`success_rate` is near 0.5 by design and compares with no other game, and its
`paired_p_above` reads the posterior probability of the order of two names.

The benchmark's rule is at most 256 dynamics calls per step, whatever the agent runs on.
{CALL}

## Routes

| route | face | key | what it does | answers |
| --- | --- | --- | --- | --- |
{chr(10).join(rows)}

## Inputs

| route | input | | meaning |
| --- | --- | --- | --- |
{chr(10).join(fields)}

## The Frame

What `start`, `act`, `reset` and `GET /api/sessions/{{id}}` answer; `obs` and `goal` are
base64 of the raw 64x64x3 uint8 bytes (C order); `episode` and `observation` with one episode
in flight, `episodes` (each with its `observation`), `tier` and `finished` with several.

| field | type | present |
| --- | --- | --- |
{chr(10).join(_shape(FRAME))}

## Safe retries

A change of a session (`act`, `reset`, and on the ARC face `ACTION1`-`ACTION7` and a `RESET`
that restarts) may carry `step`, the client's number for it: the session's changes stored so
far plus one. Every Frame says how many are stored (`step`: 0 at the start; actions and
restarts count, a `GET` does not); an ARC client counts its actions and restarts since the
`RESET` that started the game. Only the change numbered one past the stored ones is played. A
step already stored is not played again: it is answered with the answer it first had (the same
Frame or FrameData, observation, state and score, replayed from the stored steps), even after
later steps; sent for a different change it is a 409 that says what the step was. A step
further ahead is a 409 (`STEP_AHEAD` on the ARC face) naming the next one. A step that this
server played a moment ago but has not yet stored is a 503: retry it. So a client that lost an
answer (the connection closed after it sent the request, or a 503) sends the same request
again, as `sokoforge play` does; this holds across a server's workers and servers sharing a
PostgreSQL store. Several episodes in flight at once (`parallel` above 1) are numbered each
on its own: an `act` sends `episode` with `episode_step`, the episode's changes stored so far
plus one (each episode of a Frame says its `step`: 0 when it comes into flight, and a game
restart begins it again), instead of `step`. The same rules hold per episode: one already
stored is answered as it first was (even once the episode is over), one further ahead is a
409, so each client connection retries its own episode's lost answer by sending the same
request again, as `sokoforge play --parallel N` does. Acts on different episodes that race
are both played, in the order the store takes them: a process whose copy of the session is
behind plays the act again on the stored session inside the store's transaction, which holds
the session against every other worker and server, so a client's own concurrency is never a
503. Both numbers are optional: a client that sends neither is played as before.

## The Score

What `close` answers (its fields at the top level, and per game under `games`).

| field | type | present |
| --- | --- | --- |
{chr(10).join(_shape(SCORE))}
"""


PAGES = {"spec.md": spec_page, "version.md": levels_page, "protocol.md": protocol_page}


def write_pages(folder: Path = DOCS) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, page in PAGES.items():
        (folder / name).write_text(page(), encoding="utf-8")
        written.append(folder / name)
    return written


if __name__ == "__main__":
    if len(sys.argv) > 2 or sys.argv[1:2] and sys.argv[1].startswith("-"):
        sys.exit(f"usage: python -m sokoforge.reference [OUT_DIR]  (default {DOCS}): writes "
                 "the reference pages from the code")
    for path in write_pages(Path(sys.argv[1]) if len(sys.argv) > 1 else DOCS):
        print(path)
