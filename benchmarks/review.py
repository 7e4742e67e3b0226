"""The review against a red team: detection per cheater, false flags per honest family.

For each seed: builds a hidden version of the standard game from that seed with its panel
(``sokoforge build``, ``sokoforge panel``; kept and reused with ``--cache DIR``), serves it
(``sokoforge serve`` on a free port, a fresh store), plays every agent of the red team
(``tests/red_team.py``: the plain, detouring, push-padded and throttled decoders and a
probe-then-replay key; the panel's families at 64 and 256 dynamics calls a step on turned
boards, an epsilon-greedy planner, random play, and the families at 1,024 calls) through
HTTP, stops the server and runs ``sokoforge review VERSION --json`` on the store. Prints one
row per agent: the seeds on which its scorecard was flagged ``needs review``, and its
success rate; then every cheater the review missed and every honest agent it flagged, with
the signals it saw.

    .venv/bin/python benchmarks/review.py --seeds 1 2 3 --cache /tmp/redteam-cache
                                          [--review-only]

``--review-only`` reviews the stores of an earlier run again (DIR/redteam-sSEED.sqlite)
without playing: to try the review's thresholds on the same scorecards.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)
sys.path.insert(1, str(ROOT / "tests"))

from red_team import (  # noqa: E402
    THROTTLE_SHARES,
    Card,
    chosen_sets,
    entrants,
    play_team,
    throttle_states,
)
from serve_support import Process  # noqa: E402

SOKOFORGE = [sys.executable, "-c", "from sokoforge.cli import main; main()"]
PUBLIC = ROOT / "datasets" / "demo"  # what the throttled decoder knows of the game's levels
SERVE_LIMITS = ("--keys-per-address", "1000", "--scorecards-per-day", "1000",
                "--sessions-per-key", "10", "--sessions-per-address", "200")


def sokoforge(*args: str) -> str:
    """Run one command; its stdout, or exit with its stderr."""
    done = subprocess.run([*SOKOFORGE, *args], capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"sokoforge {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def version_of(seed: int, cache: Path) -> str:
    """The hidden version of ``seed`` in ``cache`` (built unless there), its panel played
    again (seconds, the same bytes for the same code: a cached one may predate a column)."""
    version = f"redteam-s{seed}"
    if not (cache / version / "manifest.json").exists():
        sokoforge("build", version, "--seed", str(seed), "--datasets", str(cache), "--quiet")
    sokoforge("panel", version, "--datasets", str(cache), "--quiet")
    return version


KNOWS_ROWS = ("knows the", "the best reference", "shaped give-ups", "reference ")


def play_seed(seed: int, cache: Path, version: str, store: Path, limit: int,
              knows_only: bool = False) -> list[dict]:
    """Serve ``version`` on a fresh ``store`` and play the whole red team; one dict a card."""
    for stale in store.parent.glob(store.name + "*"):
        stale.unlink()
    server = Process(cache, store, *SERVE_LIMITS, versions=(version,))
    try:
        team = entrants(seed, PUBLIC, chosen=knows_the_review(cache / version, seed))
        if knows_only:  # the cheaters that read the review, and the reference turned
            team = [e for e in team if e.row.startswith(KNOWS_ROWS)]
        cards = asyncio.run(play_team(server.base, team, prefix=f"s{seed} ", at_once=limit))
    finally:
        server.stop()
    return [card_row(c) for c in cards]


def knows_the_review(folder: Path, seed: int) -> dict:
    """The level sets of the cheaters that have read the review (``red_team.chosen_sets``):
    unions of within-rule play plus k, and give-ups shaped by difficulty at the reference's
    best plus 0, 5 and 10 (each level solved with its frontier chance so shifted)."""
    import numpy as np
    import polars as pl

    from pipeline.scores import review as stats

    levels = pl.read_parquet(folder / "levels.parquet").sort("index")
    panel = pl.read_parquet(folder / "report" / "panel.parquet")
    played = pl.read_parquet(folder / "report" / "reference.parquet")
    ref = stats.reference(levels, panel, played)
    rng = np.random.default_rng(seed)
    shaped = {}
    for extra in (0, 5, 10):
        chances = stats.shifted(ref.levels["frontier_chance"].to_numpy(),
                                 ref.frontier_solved + extra)
        shaped[f"shaped give-ups, frontier + {extra}"] = [
            i for i, c in zip(ref.levels["index"], chances, strict=True) if rng.random() < c]
    return chosen_sets(levels, panel, played, shaped, ks=(0, 4, 8, 16))


def card_row(card: Card) -> dict:
    return {"row": card.entrant.row, "kind": card.entrant.kind, "turn": card.turn,
            "judged": card.judged, "scorecard_id": card.scorecard_id, "score": card.score}


def review(cache: Path, version: str, store: Path) -> dict[str, dict]:
    """``sokoforge review VERSION --json``: each scorecard's line, by scorecard id."""
    out = sokoforge("review", version, "--db", str(store), "--datasets", str(cache), "--json")
    lines = [json.loads(line) for line in out.splitlines() if line.strip()]
    return {line["scorecard_id"]: line for line in lines}


def run_seed(seed: int, cache: Path, review_only: bool, limit: int,
             knows_only: bool = False) -> list[dict]:
    """One seed's cards, each with its review line (kept in DIR/redteam-sSEED.json)."""
    version = version_of(seed, cache)
    store = cache / f"{version}.sqlite"
    played = cache / f"{version}.json"
    began = time.perf_counter()
    if review_only:
        cards = json.loads(played.read_text())["cards"]
    else:
        cards = play_seed(seed, cache, version, store, limit, knows_only)
        played.write_text(json.dumps({"seed": seed, "version": version, "cards": cards},
                                     indent=1))
    took = time.perf_counter() - began
    lines = review(cache, version, store)
    for card in cards:
        card["review"] = lines.get(card["scorecard_id"])
    played.write_text(json.dumps({"seed": seed, "version": version, "cards": cards}, indent=1))
    print(f"seed {seed}: {version}, {len(cards)} scorecards "
          f"({'reviewed again' if review_only else f'played in {took:.0f} s'})", flush=True)
    return cards


def verdict(card: dict) -> str:
    line = card.get("review")
    return "missing" if line is None else str(line["verdict"])


def voting_p(card: dict) -> float:
    """The smallest p-value of the card's voting signals (1 when none has one)."""
    line = card.get("review") or {}
    ps = [g["p_value"] for g in line.get("signals", []) if g["votes"] and g["p_value"] is not None]
    return min(ps, default=1.0)


def table(runs: dict[int, list[dict]]) -> list[str]:
    """One markdown row per agent: flagged / seeds, its mean success rate and move efficiency
    over the seeds, and the smallest voting p-value the review saw on any of its cards."""
    rows: dict[str, list[dict]] = defaultdict(list)
    for cards in runs.values():
        for card in cards:
            if card["judged"]:
                rows[card["row"]].append(card)
    kinds = {"cheater": "cheater", "honest": "honest, within the rule",
             "over": "honest, 1,024 calls (over the rule)"}
    out = ["| agent | kind | flagged `needs review` | rate | success rate | move efficiency "
           "| smallest voting p |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for row, cards in rows.items():
        flagged = sum(verdict(c) == "needs review" for c in cards)
        success = sum(c["score"]["success_rate"] for c in cards) / len(cards)
        efficiency = sum(c["score"].get("move_efficiency") or 0.0 for c in cards) / len(cards)
        smallest = min(voting_p(c) for c in cards)
        out.append(f"| {row} | {kinds[cards[0]['kind']]} | {flagged}/{len(cards)} | "
                   f"{flagged / len(cards):.2f} | {success:.2f} | {efficiency:.2f} | "
                   f"{smallest:.2g} |")
    return out


def signals(line: dict | None) -> str:
    """A review line's signals in one line: name value (reference, p)."""
    if not line:
        return "no review line"
    return "; ".join(f"{g['name']} {g['value']} (reference {g['reference']}, p {g['p_value']})"
                     for g in line.get("signals", []))


def per_seed(runs: dict[int, list[dict]]) -> list[str]:
    """Per seed: the reference's best, the bound K, honest cards within the rule flagged, each
    cheater row's verdict with its solved count, and the largest margin over the reference's
    best that an unflagged cheater reached."""
    out = []
    for seed, cards in runs.items():
        judged = [c for c in cards if c["judged"] and c.get("review")]
        if not judged:
            continue
        first = judged[0]["review"]
        honest = [c for c in judged if c["kind"] == "honest"]
        cheaters = [c for c in judged if c["kind"] == "cheater"]
        passed = [c["review"]["solved"] - c["review"]["frontier_solved"] for c in cheaters
                  if verdict(c) == "consistent"]
        above = [c for c in cheaters if verdict(c) == "consistent"
                 and c["review"]["solved"] > c["review"]["bound"]]
        out.append(f"seed {seed}: frontier {first['frontier_solved']}, K "
                   f"{max(c['review']['bound'] for c in judged)}; honest flagged "
                   f"{sum(verdict(c) != 'consistent' for c in honest)}/{len(honest)}; "
                   f"cheaters flagged {sum(verdict(c) == 'needs review' for c in cheaters)}/"
                   f"{len(cheaters)}, above K unflagged {len(above)}, largest unflagged margin "
                   f"{max(passed) if passed else '-'}")
        out += [f"  {c['row']}: {verdict(c)}, {c['review']['solved']} solved"
                for c in cheaters]
    return out


def surprises(runs: dict[int, list[dict]]) -> list[str]:
    """Each judged cheater card not flagged and each honest card within the rule flagged,
    with the signals the review saw."""
    out = []
    for seed, cards in runs.items():
        for card in cards:
            v = verdict(card)
            wrong = ((card["kind"] == "cheater" and v != "needs review")
                     or (card["kind"] == "honest" and v != "consistent"))
            if card["judged"] and wrong:
                out.append(f"seed {seed} {card['row']} ({card['kind']}, success "
                           f"{card['score']['success_rate']:.2f}): {v}; "
                           f"{signals(card.get('review'))}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--cache", type=Path, default=None,
                        help="folder keeping the built versions and the played stores")
    parser.add_argument("--review-only", action="store_true",
                        help="review the stores of an earlier run again, without playing")
    parser.add_argument("--at-once", type=int, default=4, help="keys playing at once")
    parser.add_argument("--knows-only", action="store_true",
                        help="only the cheaters that read the review and the reference turned")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sokoforge-redteam-") as tmp:
        cache = args.cache or Path(tmp)
        cache.mkdir(parents=True, exist_ok=True)
        runs = {s: run_seed(s, cache, args.review_only, args.at_once, args.knows_only)
                for s in args.seeds}
    bounds = ", ".join(f"{throttle_states(PUBLIC, share)} ({share:.2f} of them)"
                       for share in THROTTLE_SHARES)
    print(f"\nthe throttled decoders solve with the solver only where it expands at most "
          f"a bound of states that a share of the public demo's levels stay within: {bounds}\n")
    print("\n".join(table(runs)))
    print("\n" + "\n".join(per_seed(runs)))
    missed = surprises(runs)
    print("\nmissed cheaters and flagged honest agents within the rule:"
          + ("".join(f"\n- {m}" for m in missed) if missed else " none"))


if __name__ == "__main__":
    main()
