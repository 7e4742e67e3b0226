"""The fair-play review: its statistics are exact, it flags a decoder that plays optimal
solutions (plain, detouring and giving up, or replaying what a key probed), passes the panel's
own agents within the rule, counts moves and pushes by replaying the stored actions, writes
its report (a hidden version's its owner's alone), and the boards mark what it flags."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import stat
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner
from review_support import T0, Card, card_id, levels_of, put_scorecards, solutions
from serve_support import Api, server

from engine.agents.panel import PANEL, PanelAgent, episode
from engine.agents.reference import REFERENCE_AGENTS, REFERENCE_TURNS, reference_episode
from engine.levels import parse_xsb, symmetries
from pipeline.difficulty.panel import PANEL_FILE, panel_of_version, pushes_of
from pipeline.difficulty.reference_play import REFERENCE_FILE, reference_of_version
from pipeline.scores.review import (
    PLAY_SCHEMA,
    RULE_BUDGET,
    THRESHOLD,
    VOTING,
    ScorecardPlay,
    ability,
    at_least,
    bound,
    raise_frontier,
    reference,
    review_scorecard,
    review_scorecards,
)
from pipeline.versions.hidden_files import GITIGNORE, keep_hidden_out_of_git
from pipeline.versions.version import open_version
from pipeline.workers import Workers
from sokoforge.cli import main

DEMO = Path(__file__).resolve().parent.parent / "datasets" / "demo"


def _letters(actions) -> str:
    return "".join("UDLR"[a] for a in actions)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """A datasets folder holding the demo (100 levels of the standard game) and its panel."""
    datasets = tmp_path_factory.mktemp("datasets")
    folder = datasets / "demo"
    folder.mkdir()
    for name in ("levels.parquet", "manifest.json"):
        shutil.copy(DEMO / name, folder / name)
    (folder / "report").mkdir()
    version = open_version(datasets, "demo")
    panel_of_version(version, Workers(show_progress=False)).write_parquet(
        folder / "report" / PANEL_FILE)
    reference_of_version(version, Workers(show_progress=False)).write_parquet(
        folder / "report" / REFERENCE_FILE)  # about a second: read by the review from here on
    return datasets


@pytest.fixture(scope="module")
def ref(demo):
    report = demo / "demo" / "report"
    return reference(levels_of(demo / "demo"), pl.read_parquet(report / PANEL_FILE),
                     pl.read_parquet(report / REFERENCE_FILE))


def _rows(levels: pl.DataFrame, plays: list[str]) -> pl.DataFrame:
    """A scorecard's rows for letters played per level (as the store replay makes them)."""
    from engine import episode as core
    from serve.games.episode import PLAYED

    out = []
    for row, letters in zip(levels.iter_rows(named=True), plays, strict=True):
        game = core.begin(parse_xsb(row["xsb"]), int(row["max_steps"]))
        moves = pushes = 0
        for letter in letters + "." * int(row["max_steps"]):
            if game.over:
                break
            game, step = core.step(game, PLAYED.index(letter))
            moves, pushes = moves + step.moved, pushes + step.pushed
        out.append({"index": row["index"], "played": True, "solved": game.solved,
                    "steps": game.steps, "moves": moves, "pushes": pushes, "restarts": 0,
                    "think_ms": None, "pace_ms": None})
    return pl.DataFrame(out, schema=PLAY_SCHEMA)


def _play(name: str, rows: pl.DataFrame, opened: float = T0, key: str = "") -> ScorecardPlay:
    return ScorecardPlay(f"sc-{name}", key or name, name, opened, opened + 1, rows)


def _agent(levels: pl.DataFrame, agent: PanelAgent, seed: int) -> list[str]:
    return [_letters(episode(parse_xsb(x), int(m), agent, seed).actions)
            for x, m in zip(levels["xsb"], levels["max_steps"], strict=True)]


# -- the statistics ------------------------------------------------------------------------------

def test_the_tail_is_the_exact_binomial_and_poisson_binomial_tail():
    for n, q in ((10, 0.05), (40, 0.3), (7, 0.9)):
        for k in range(n + 2):
            exact = sum(math.comb(n, j) * q ** j * (1 - q) ** (n - j) for j in range(k, n + 1))
            assert at_least(k, [q] * n) == pytest.approx(exact, rel=1e-9, abs=1e-300)
    chances = [0.1, 0.5, 0.8]
    both = 0.1 * 0.5 * 0.8
    two = both + 0.1 * 0.5 * 0.2 + 0.1 * 0.5 * 0.8 / 0.5 * 0.5 + 0.9 * 0.5 * 0.8
    assert at_least(3, chances) == pytest.approx(both)
    assert at_least(2, chances) == pytest.approx(two)
    assert at_least(0, chances) == 1.0 and at_least(4, chances) == 0.0


def test_the_ability_fit_gives_an_agent_its_own_expected_count():
    base = np.linspace(0.05, 0.95, 40)
    for solved in (3, 20, 37):
        theta = ability(base, solved)
        shifted = 1 / (1 + np.exp(-(np.log(base / (1 - base)) + theta)))
        assert shifted.sum() == pytest.approx(solved, abs=1e-6)
    assert ability(base, 5) < ability(base, 10)


def test_the_reference_marks_the_frontier_and_the_hard_levels_from_the_play_within_the_rule(
        demo, ref):
    panel = pl.read_parquet(demo / "demo" / "report" / PANEL_FILE)
    assert {"pushes"} <= set(panel.columns)
    played = pl.read_parquet(demo / "demo" / "report" / REFERENCE_FILE)
    within = pl.concat([panel.filter(pl.col("budget") <= RULE_BUDGET).select(
        "index", "solved"), played.select("index", "solved")]).cast({"index": pl.Int64})
    unsolved = set(within.group_by("index").agg(pl.col("solved").any()).filter(
        ~pl.col("solved"))["index"].to_list())  # by the panel within the rule and the reference
    assert set(ref.levels.filter(pl.col("frontier"))["index"].to_list()) == unsolved
    assert unsolved <= set(ref.levels.filter(pl.col("hard"))["index"].to_list())
    assert 0 < ref.hard_rate < 0.2


def test_a_panel_episodes_pushes_are_those_the_rules_count():
    level = parse_xsb("#######\n#@    #\n# $ . #\n#     #\n#######")
    played = episode(level, 30, PanelAgent("planner", 256))
    assert played.solved and pushes_of(level, played.actions) == 2


# -- verdicts on a small red team ------------------------------------------------------------------

def test_a_decoder_playing_optimal_solutions_needs_review_for_its_hard_optimal_levels(demo, ref):
    levels = levels_of(demo / "demo")
    review = review_scorecard(_play("decoder", _rows(levels, solutions(demo / "demo"))), ref)
    assert review.verdict == "needs review"
    flags = [s.name for s in review.signals if s.flags]
    assert "hard_optimal" in flags
    assert review.evidence[0].startswith("beyond the compute frontier: 100 solved")
    assert review.evidence[1].startswith(f"{int(ref.levels['hard'].sum())} of the ")


def test_a_decoder_that_detours_and_gives_up_a_quarter_is_still_flagged(demo, ref):
    levels = levels_of(demo / "demo")
    rng = np.random.default_rng(5)
    plays = []
    for solution in solutions(demo / "demo"):
        if rng.random() < 0.25:
            plays.append("")  # given up: the budget waited out
        else:
            cut = int(rng.integers(0, len(solution)))
            plays.append(solution[:cut] + "." * int(rng.integers(1, 4)) + solution[cut:])
    review = review_scorecard(_play("detours", _rows(levels, plays)), ref)
    assert review.verdict == "needs review"
    assert {"hard_optimal", "frontier"} <= {s.name for s in review.signals if s.flags}
    detours = next(s for s in review.signals if s.name == "detours")
    assert not detours.votes and "no-op" in detours.evidence


def test_a_decoder_that_wastes_a_push_on_every_level_is_flagged_beyond_the_compute_frontier(
        demo, ref):
    levels = levels_of(demo / "demo")
    rows = _rows(levels, solutions(demo / "demo")).with_columns(  # one wasted push, 4 moves
        pl.col("pushes") + 1, pl.col("steps") + 4, pl.col("moves") + 4)
    review = review_scorecard(_play("padded", rows), ref)
    signals = {s.name: s for s in review.signals}
    assert signals["hard_optimal"].value == 0 and not signals["hard_optimal"].flags
    assert signals["whole_score"].flags and review.verdict == "needs review"
    # judged as no stronger than the best panel agent within the rule, not as a perfect one
    assert signals["frontier"].reference < 0.5 * signals["frontier"].value


def test_the_panels_agents_within_the_rule_are_consistent_on_another_seed(demo, ref):
    levels = levels_of(demo / "demo")
    for agent in (a for a in PANEL if a.budget <= RULE_BUDGET):
        review = review_scorecard(_play(agent.name, _rows(levels, _agent(levels, agent, 7))),
                                  ref)
        assert review.verdict == "consistent", (agent, review.evidence)
        assert all(s.p_value is None or s.p_value >= THRESHOLD for s in review.signals
                   if s.votes)


def test_replaying_optimal_solutions_of_levels_a_key_only_probed_is_flagged_by_replay(demo, ref):
    levels = levels_of(demo / "demo")
    rng = np.random.default_rng(2)
    probe = ["".join(rng.choice(list("UDLR"), 12)) for _ in range(levels.height)]
    cards = [_play("probe", _rows(levels, probe), T0, "k"),
             _play("again", _rows(levels, solutions(demo / "demo")), T0 + 10, "k")]
    reviews = {r.scorecard_id: r for r in review_scorecards(cards, ref)}
    replay = next(s for s in reviews["sc-again"].signals if s.name == "replay")
    assert replay.flags and replay.value > 80
    assert reviews["sc-probe"].verdict == "consistent"
    # an honest agent playing the same way twice replays nothing it had only probed
    plan = _rows(levels, _agent(levels, PanelAgent("planner", 256), 0))
    twice = review_scorecards([_play("p1", plan, T0, "h"), _play("p2", plan, T0 + 10, "h")],
                              ref)
    assert [r.verdict for r in twice] == ["consistent", "consistent"]
    assert next(s for s in twice[1].signals if s.name == "replay").value == 0


def test_timing_alone_never_flags_a_scorecard(demo, ref):
    levels = levels_of(demo / "demo")
    rows = _rows(levels, _agent(levels, PanelAgent("planner", 256), 0)).with_columns(
        think_ms=(levels["reachable_states"].cast(pl.Float64).log() * 100),
        pace_ms=pl.lit(5.0))
    review = review_scorecard(_play("slow-starter", rows), ref)
    timing = next(s for s in review.signals if s.name == "timing")
    assert timing.value > 0.99 and timing.p_value < THRESHOLD and not timing.flags
    assert review.verdict == "consistent"


# -- the whole score against the compute frontier ---------------------------------------------

def _solving(levels: pl.DataFrame, solve: set[int], wasted: int = 2) -> pl.DataFrame:
    """A scorecard solving exactly ``solve`` (each with ``wasted`` pushes thrown away first and
    their moves), the rest waited out: a cheater that chooses what to solve."""
    return pl.DataFrame([
        {"index": i, "played": True, "solved": i in solve,
         "steps": om + 4 * wasted if i in solve else m, "moves": om + 4 * wasted if i in solve
         else m, "pushes": op + wasted if i in solve else 0, "restarts": 0, "think_ms": None,
         "pace_ms": None}
        for i, om, op, m in levels.select("index", "optimal_moves", "optimal_pushes",
                                          "max_steps").iter_rows()], schema=PLAY_SCHEMA)


def _easiest(ref, k: int) -> set[int]:
    order = ref.levels.sort("frontier_chance", "index", descending=[True, False])
    return set(order["index"].head(k).to_list())


def test_the_reference_beats_the_panels_best_within_the_rule_and_k_stays_near_it(demo, ref):
    panel = pl.read_parquet(demo / "demo" / "report" / PANEL_FILE)
    best_panel = int(panel.filter(pl.col("budget") <= RULE_BUDGET).group_by("agent")
                     .agg(pl.col("solved").sum())["solved"].max())
    assert ref.frontier_solved >= best_panel + 30  # 89 against 47 on the demo
    assert ref.frontier_solved <= bound(ref) <= ref.frontier_solved + 8
    assert ref.levels["frontier_chance"].sum() == pytest.approx(ref.frontier_solved, abs=1e-6)
    assert "on 4 turns of each board" in ref.name and "whole_score" in VOTING


def test_a_cheater_that_chooses_what_to_solve_passes_at_k_and_is_flagged_beyond_it(demo, ref):
    levels = levels_of(demo / "demo")
    k = bound(ref)
    at = review_scorecard(_play("at-k", _solving(levels, _easiest(ref, k))), ref)
    whole = next(s for s in at.signals if s.name == "whole_score")
    assert not whole.flags and at.solved == at.bound == k
    beyond = review_scorecard(_play("beyond", _solving(levels, _easiest(ref, k + 1))), ref)
    assert beyond.verdict == "needs review" and beyond.solved == k + 1
    assert beyond.reason == beyond.evidence[0] == next(
        s.evidence for s in beyond.signals if s.name == "whole_score")
    assert beyond.reason.startswith(f"beyond the compute frontier: {k + 1} solved where play "
                                    f"within the rule reaches at most {k}")
    record = beyond.to_dict()
    assert (record["solved"], record["bound"], record["frontier_solved"]) == (
        k + 1, k, ref.frontier_solved)


def test_human_like_timing_changes_no_verdict_of_a_cheater_that_chose_its_levels(demo, ref):
    """A cheater that waits before each level as a search would (longer on the levels with
    more states) and then plays at a person's pace: timing turns, the verdicts do not."""
    levels = levels_of(demo / "demo")
    states = dict(ref.levels.select("index", "reachable_states").iter_rows())
    for k in (bound(ref), bound(ref) + 1):
        rows = _solving(levels, _easiest(ref, k))
        timed = rows.with_columns(
            think_ms=pl.col("index").replace_strict(states).cast(pl.Float64).log1p() * 40.0,
            pace_ms=pl.lit(180.0))
        plain, human = (review_scorecard(_play("t", r), ref) for r in (rows, timed))
        timing = next(s for s in human.signals if s.name == "timing")
        assert not timing.votes and timing.value > 0.9  # it looks like search before play
        assert (human.verdict, human.reason) == (plain.verdict, plain.reason)
        assert human.verdict == ("consistent" if k == bound(ref) else "needs review")


def test_raising_the_frontier_raises_k_and_leaves_a_frontier_already_there_alone(ref):
    assert raise_frontier(ref, ref.frontier_solved - 5) is ref
    raised = raise_frontier(ref, 97.0)
    assert raised.levels["frontier_chance"].sum() >= 97.0 - 1e-6
    assert bound(raised) > bound(ref) and raised.frontier_solved == 97
    logits = lambda r: np.log(r.levels["frontier_chance"] / (1 - r.levels["frontier_chance"]))  # noqa: E731
    shift = (logits(raised) - logits(ref)).to_numpy()
    assert np.allclose(shift, shift[0])  # one logit shift for every level


def test_the_reference_on_boards_turned_as_it_was_never_played_is_consistent(demo, ref):
    levels = levels_of(demo / "demo")
    turn = max(set(range(8)) - set(REFERENCE_TURNS))
    rows = []
    for i, x, m in levels.select("index", "xsb", "max_steps").iter_rows():
        board = parse_xsb(symmetries(parse_xsb(x))[turn])
        e = reference_episode(board, int(m), REFERENCE_AGENTS[-1])
        rows.append({"index": i, "played": True, "solved": e.solved, "steps": e.steps,
                     "moves": e.steps, "pushes": pushes_of(board, e.actions), "restarts": 0,
                     "think_ms": None, "pace_ms": None})
    review = review_scorecard(_play("turned", pl.DataFrame(rows, schema=PLAY_SCHEMA)), ref)
    assert review.verdict == "consistent", review.evidence
    assert review.solved >= ref.frontier_solved - 8
    assert review.reason.startswith(f"consistent: {review.solved} solved, within the bound")


def test_a_reference_episode_is_deterministic_and_its_actions_solve_by_the_rules(demo):
    level = parse_xsb(levels_of(demo / "demo")["xsb"][60])
    first = reference_episode(level, 200, REFERENCE_AGENTS[1])
    assert first == reference_episode(level, 200, REFERENCE_AGENTS[1])
    from engine.rules import board_array, step_on

    board, state = board_array(level), level.start
    for action in first.actions:
        state = step_on(board, level.width, state, action)[0]
    assert first.solved and all(level.goals.flat[c] for c in state.crates)


def test_non_voting_signals_say_so_and_person_fit_says_nothing_of_none_or_all_solved(demo, ref):
    levels = levels_of(demo / "demo")
    for solve in (set(), set(levels["index"].to_list())):
        review = review_scorecard(_play("extreme", _solving(levels, solve)), ref)
        fit = next(s for s in review.signals if s.name == "person_fit")
        assert fit.p_value is None and fit.evidence.startswith("person fit undefined")
    review = review_scorecard(_play("some", _solving(levels, _easiest(ref, 60))), ref)
    for signal in review.signals:
        assert signal.votes == (signal.name in VOTING)
        if not signal.votes and signal.p_value is not None:
            assert "never voting" in signal.evidence, signal
    detours = next(s for s in review.signals if s.name == "detours")
    assert "honest play within the rule:" in detours.evidence
    assert [s.name for s in review.signals][:len(VOTING)] == list(VOTING)


# -- from the store: sokoforge review ----------------------------------------------------------

@pytest.fixture(scope="module")
def store(demo):
    """A store holding a decoder, the panel's reference planner, and a key that probes then
    replays, all on the demo."""
    levels = levels_of(demo / "demo")
    rng = np.random.default_rng(1)
    db = demo.parent / "store.sqlite"
    think = [int(20 + 40 * math.log(r)) for r in levels["reachable_states"]]
    put_scorecards(str(db), demo / "demo", [
        Card(card_id("decoder"), "key-decoder", "decoder", solutions(demo / "demo"),
             think_ms=think),
        Card(card_id("planner"), "key-planner", "planner",
             _agent(levels, PanelAgent("planner", 256), 0), opened=T0 + 1),
        Card(card_id("probe"), "key-prober", "prober",
             ["".join(rng.choice(list("UDLR."), 10)) + "|" for _ in range(levels.height)],
             opened=T0 + 2),
        Card(card_id("replay"), "key-prober", "prober", solutions(demo / "demo"), opened=T0 + 3000),
    ])
    return db


def test_sokoforge_review_prints_one_json_object_per_scorecard_and_writes_its_report(
        demo, store):
    out = CliRunner().invoke(main, ["review", "demo", "--db", str(store), "--datasets",
                                    str(demo), "--json"])
    assert out.exit_code == 0, out.output
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(x["scorecard_id"], x["verdict"]) for x in lines] == [
        (card_id("decoder"), "needs review"), (card_id("planner"), "consistent"),
        (card_id("probe"), "consistent"), (card_id("replay"), "needs review")]
    assert all(isinstance(s, str) for x in lines for s in x["evidence"])
    report = json.loads((demo / "demo" / "report" / "review.json").read_text())
    assert report["needs_review"] == 2 and report["threshold"] == THRESHOLD
    assert report["bound"] == max(x["bound"] for x in lines)  # K, read off the reviews
    assert report["frontier_solved"] == lines[0]["frontier_solved"] > 80
    assert all({"solved", "bound", "frontier_solved", "reason"} <= set(x) for x in lines)
    assert [c["scorecard_id"] for c in report["scorecards"]] == [x["scorecard_id"]
                                                                 for x in lines]
    markdown = (demo / "demo" / "report" / "review.md").read_text()
    assert f"| `{card_id('replay')}` | prober | needs review | 100 |" in markdown
    assert "On this version, more than " in markdown
    assert all(isinstance(x["solved"], int) and x["reason"] for x in lines)
    for name in ("hard_optimal", "frontier", "replay", "person_fit", "detours", "timing"):
        assert f"**{name}**" in markdown
    replayed = next(x for x in lines if x["scorecard_id"] == card_id("replay"))
    assert any(s["name"] == "replay" and s["flags"] for s in replayed["signals"])
    decoder = next(x for x in lines if x["scorecard_id"] == card_id("decoder"))
    timing = next(s for s in decoder["signals"] if s["name"] == "timing")
    assert timing["value"] > 0.9 and not timing["flags"]  # its think times grow, never voting
    text = CliRunner().invoke(main, ["review", "demo", "--db", str(store), "--datasets",
                                     str(demo)])
    assert text.exit_code == 0 and "4 closed scorecard(s), 2 need review" in text.output


def test_the_store_replay_counts_moves_pushes_no_ops_and_restarts_of_each_episode(demo, store):
    from serve.records.review import scorecard_play
    from serve.stores import read_store

    levels = {int(i): (parse_xsb(x), int(m)) for i, x, m in
              levels_of(demo / "demo").select("index", "xsb", "max_steps").iter_rows()}
    def play(word: str):
        return read_store(str(store), lambda s: scorecard_play(s, card_id(word), "demo", levels))

    probe, decoder = play("probe"), play("decoder")
    optimal = levels_of(demo / "demo")
    rows = decoder.rows.join(optimal.select("index", "optimal_moves", "optimal_pushes"),
                             on="index")
    assert (rows["moves"] == rows["optimal_moves"]).all()
    assert (rows["pushes"] == rows["optimal_pushes"]).all() and rows["solved"].all()
    assert decoder.rows["think_ms"].to_list()[:3] == [
        int(20 + 40 * math.log(r)) for r in optimal["reachable_states"][:3]]
    assert (decoder.rows["pace_ms"] == 20).all()
    noops = probe.rows["steps"] - probe.rows["moves"]
    assert (noops > 0).any() and (probe.rows["restarts"] <= 1).all()


def test_review_of_an_unknown_version_or_a_store_that_is_not_there_is_one_line_exit_2(
        demo, store, tmp_path):
    for args, says in ((["dmeo", "--db", str(store)], "did you mean 'demo'?"),
                       (["demo", "--db", str(tmp_path / "none.sqlite")], "no store at"),
                       (["demo", "--db", str(demo / "demo" / "manifest.json")],
                        "cannot review demo")):
        out = CliRunner().invoke(main, ["review", *args, "--datasets", str(demo)])
        assert out.exit_code == 2, out.output
        assert out.output.strip().splitlines()[-1].startswith("Error: cannot review ")
        assert says in out.output and "Traceback" not in out.output


def test_a_hidden_versions_review_stays_its_owners_and_out_of_git(demo, store, tmp_path):
    datasets = tmp_path / "datasets"
    shutil.copytree(demo / "demo", datasets / "hid")
    manifest = json.loads((datasets / "hid" / "manifest.json").read_text())
    manifest.update(visibility="hidden", version="hid")
    (datasets / "hid" / "manifest.json").write_text(json.dumps(manifest))
    keep_hidden_out_of_git(datasets / "hid", manifest)
    (datasets / "hid" / "report" / "review.json").unlink(missing_ok=True)
    from serve.records.review import review_store

    done = review_store(datasets, "hid", str(store))
    assert done.reviews == []  # the store played demo, not hid
    for path in done.files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
        assert path.parent.parent == datasets / "hid"
    assert (datasets / "hid" / GITIGNORE).read_text().strip().endswith("*")


# -- the boards mark it -------------------------------------------------------------------------

def test_the_board_marks_a_needs_review_entry_once_a_review_ran_keeping_its_rank_and_the_owner_sees_why(  # noqa: E501
        demo, store, tmp_path):
    from serve.games.dataset import load_version

    datasets = tmp_path / "datasets"
    shutil.copytree(demo / "demo", datasets / "demo")
    db = tmp_path / "store.sqlite"
    shutil.copy(store, db)
    (datasets / "demo" / "report" / "review.json").unlink(missing_ok=True)
    with server(load_version(datasets, "demo"), db) as running:
        anyone = Api(running.base)
        before = anyone.ok("GET", "/api/leaderboard")
        assert before["reviewed"] is False
        assert {e["review"] for e in before["entries"]} == {None}
        out = CliRunner().invoke(main, ["review", "demo", "--db", str(db), "--datasets",
                                        str(datasets)])
        assert out.exit_code == 0, out.output
        after = anyone.ok("GET", "/api/leaderboard")
        assert after["reviewed"] is True
        assert [e["scorecard_id"] for e in after["entries"]] == [
            e["scorecard_id"] for e in before["entries"]]  # a flag, not a removal
        marks = {e["name"]: e["review"] for e in after["entries"]}
        assert marks["decoder"] == "needs review" and marks["planner"] == "consistent"
        page = anyone.ok("GET", "/leaderboard")
        assert page.count(">needs review</span>") == 1 + sum(
            v == "needs review" for v in marks.values())  # the legend, and each entry
        decoder = card_id("decoder")
        card = anyone.ok("GET", f"/scorecards/{decoder}")
        assert "<b>needs review</b>" in card and "id=review-evidence" in card
        assert "of the 39 levels" not in card  # the evidence is the owner's to read
        owner = Api(running.base, "key-decoder")
        mine = owner.ok("GET", f"/api/scorecards/{decoder}")
        assert mine["review"]["verdict"] == "needs review"
        assert any("optimal pushes" in s for s in mine["review"]["evidence"])
        assert anyone.call("GET", f"/api/scorecards/{decoder}")[0] == 401


@pytest.mark.slow
def test_the_owners_scorecard_page_shows_the_review_evidence_and_no_one_elses(
        demo, store, tmp_path):
    import time

    from selenium.webdriver.common.by import By
    from test_browser_play import browser, until

    from serve.games.dataset import load_version
    from serve.records.review import review_store

    datasets = tmp_path / "datasets"
    shutil.copytree(demo / "demo", datasets / "demo")
    review_store(datasets, "demo", str(store))
    decoder = card_id("decoder")
    with server(load_version(datasets, "demo"), store) as running:
        driver = browser(tmp_path / "profile")
        try:
            shown = lambda: driver.find_element(By.ID, "review-evidence")  # noqa: E731
            for key in (None, "key-planner", "key-decoder"):
                driver.get(f"{running.base}/")
                driver.execute_script("localStorage.clear();" if key is None else
                                      f"localStorage.setItem('sokoforge.key', '{key}');")
                driver.get(f"{running.base}/scorecards/{decoder}")
                if key == "key-decoder":
                    until(lambda: shown().is_displayed(), "the owner's evidence")
                    items = shown().find_elements(By.TAG_NAME, "li")
                    assert any("optimal pushes" in i.text for i in items)
                else:
                    time.sleep(1)  # the script has asked by now, and been told no
                    assert not shown().is_displayed()
        finally:
            driver.quit()


# -- clearing after source review --------------------------------------------------------------

@pytest.fixture
def copied(demo, store, tmp_path):
    """A datasets folder holding a copy of the demo (its panel and reference) and a copy of
    the store, for a test that clears on it."""
    datasets = tmp_path / "datasets"
    shutil.copytree(demo / "demo", datasets / "demo")
    db = tmp_path / "store.sqlite"
    shutil.copy(store, db)
    return datasets, db


def _review(*args: str):
    return CliRunner().invoke(main, ["review", *args])


def test_a_clearing_is_logged_with_its_date_and_undone_and_a_wrong_one_is_one_line_exit_2(
        copied):
    from pipeline.versions.clearances import cleared, read_log

    datasets, db = copied
    where = ["--db", str(db), "--datasets", str(datasets)]
    decoder = card_id("decoder")
    out = _review("demo", "--clear", decoder, "--note", "read its source: banked compute",
                  *where)
    assert out.exit_code == 0 and "(decoder, 100 solved) cleared at" in out.output, out.output
    log = (datasets / "demo" / "clearances.json").read_bytes()
    sums = (datasets / "demo" / "clearances.sha256").read_text()
    assert sums == f"{hashlib.sha256(log).hexdigest()}  clearances.json\n"
    for args, says in (([decoder, "--note", "again"], "was cleared on"),
                       (["sc-" + "0" * 24, "--note", "x"], "no closed scorecard"),
                       ([card_id("planner")], "--clear needs --note")):
        wrong = _review("demo", "--clear", *args, *where)
        assert wrong.exit_code == 2 and says in wrong.output, wrong.output
        assert len(wrong.output.strip().splitlines()) == 1
    assert _review("demo", "--unclear", decoder, "--note", "wrong file", *where).exit_code == 0
    assert cleared(datasets / "demo") == {}
    assert [(c.action, c.note) for c in read_log(datasets / "demo")] == [
        ("clear", "read its source: banked compute"), ("unclear", "wrong file")]
    assert all(c.at.startswith(time.strftime("%Y-%m-%d", time.gmtime()))
               for c in read_log(datasets / "demo"))
    again = _review("demo", "--unclear", decoder, *where)
    assert again.exit_code == 2 and "is not cleared on demo" in again.output


@pytest.mark.slow
def test_a_clearing_raises_k_for_every_later_review_of_the_version_and_not_before_it(copied):
    from pipeline.scores.review import bound
    from serve.records.clearing import clear_scorecard
    from serve.records.review import store_reviews

    datasets, db = copied
    before = store_reviews(datasets, "demo", str(db))
    k = bound(before.reference)
    assert k < 100 and before.clearances == []
    done = clear_scorecard(datasets, "demo", str(db), card_id("decoder"), "read it",
                           now=T0 + 10_000)
    after = store_reviews(datasets, "demo", str(db))
    assert bound(after.reference) > k and after.reference.frontier_solved >= done.solved
    assert any("cleared on" in line and "frontier rises" in line for line in after.clearances)
    as_closed = store_reviews(datasets, "demo", str(db), cleared_before=T0)  # a close before
    assert bound(as_closed.reference) == k
    text = _review("demo", "--db", str(db), "--datasets", str(datasets))
    assert f"more than {bound(after.reference)} of 100 solved needs source review" in text.output
    assert "clearances: decoder" in text.output and "reviewed in " in text.output
    report = json.loads((datasets / "demo" / "report" / "review.json").read_text())
    assert report["bound"] == bound(after.reference) and report["levels"] == 100


def _line(datasets: Path, version: str, agents: list[dict]) -> None:
    (datasets / version / "report").mkdir(parents=True, exist_ok=True)
    (datasets / version / "report" / "line.json").write_text(json.dumps({
        "versions": ["demo", version], "scales": [["demo", version]], "links": [],
        "notes": [], "model": "2pl", "agents": agents}))


def test_a_clearing_raises_k_on_a_version_the_irt_line_links_and_says_why_where_it_cannot(
        copied, ref):
    from pipeline.scores.review import bound
    from pipeline.versions.clearances import Clearance, record_clearance
    from serve.records.clearing import cleared_reference

    datasets, _ = copied
    shutil.copytree(datasets / "demo", datasets / "demo-r1")
    manifest = json.loads((datasets / "demo-r1" / "manifest.json").read_text())
    (datasets / "demo-r1" / "manifest.json").write_text(json.dumps(
        {**manifest, "version": "demo-r1", "rotated_from": "demo"}))
    (datasets / "demo-r1" / "report" / "line.json").unlink(missing_ok=True)
    record_clearance(datasets / "demo", "demo", Clearance(
        "clear", card_id("decoder"), "decoder", 95, "read it", "2026-12-03T20:00:00.000Z"))
    unlinked = cleared_reference(datasets, "demo-r1", ref)
    assert unlinked.solved is None and unlinked.reference is ref
    assert any("no IRT line fit beside demo-r1" in n for n in unlinked.notes)

    def raw(solved: int) -> dict:
        return {"episodes": 100, "solved": solved, "success_rate": solved / 100}

    _line(datasets, "demo-r1", [
        {"name": "decoder", "scale": 0, "ability": 2.5, "versions": {"demo": raw(95)}},
        {"name": "planner", "scale": 0, "ability": 0.0, "versions": {"demo-r1": raw(47),
                                                                     "demo": raw(47)}},
        {"name": "prober", "scale": 0, "ability": -1.0, "versions": {"demo-r1": raw(12)}}])
    linked = cleared_reference(datasets, "demo-r1", ref)
    assert linked.solved is not None and 47 < linked.solved <= 100
    assert bound(linked.reference) > bound(ref)
    assert any("is expected to solve" in n for n in linked.notes)
    _line(datasets, "demo-r1", [
        {"name": "decoder", "scale": 0, "ability": 2.5, "versions": {"demo": raw(95)}},
        {"name": "planner", "scale": 1, "ability": 0.0, "versions": {"demo-r1": raw(47)}}])
    apart = cleared_reference(datasets, "demo-r1", ref)
    assert apart.solved is None and any("does not link demo and demo-r1" in n
                                        for n in apart.notes)


@pytest.mark.slow
def test_a_clearing_reaches_every_worker_and_survives_a_restart_marking_without_reranking(
        copied):
    from serve_support import Process

    datasets, db = copied
    assert _review("demo", "--db", str(db), "--datasets", str(datasets)).exit_code == 0
    decoder = card_id("decoder")
    served = Process(datasets, db, "--workers", "2", versions=("demo",))
    try:
        boards = [Api(served.base).ok("GET", "/api/leaderboard") for _ in range(8)]
        order = [e["scorecard_id"] for e in boards[0]["entries"]]
        assert all(e["cleared"] is None for b in boards for e in b["entries"])
        assert boards[0]["bound"]["text"].startswith("on this version, more than ")
        out = _review("demo", "--clear", decoder, "--note", "read its source", "--db", str(db),
                      "--datasets", str(datasets))
        assert out.exit_code == 0, out.output
        today = time.strftime("%Y-%m-%d", time.gmtime())
        for _ in range(12):  # fresh connections: both workers answer some of them
            board = Api(served.base).ok("GET", "/api/leaderboard")
            assert [e["scorecard_id"] for e in board["entries"]] == order  # a mark only
            marks = {e["scorecard_id"]: e["cleared"] for e in board["entries"]}
            assert marks[decoder]["date"] == today
            assert {k for k, v in marks.items() if v} == {decoder}
    finally:
        served.stop()
    again = Process(datasets, db, versions=("demo",))
    try:
        page = Api(again.base).ok("GET", "/leaderboard")
        assert f"cleared {today}</span>" in page and "Fair-play bound: on this version" in page
        card = Api(again.base).ok("GET", f"/scorecards/{decoder}")
        assert f"cleared {today}</span>" in card
    finally:
        again.stop()
