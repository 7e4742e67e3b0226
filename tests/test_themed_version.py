"""A themed version: built twice from one seed it is the same bytes, it is served, rendered and
audited in each level's stored theme, and its noisy frames come back the same on replay."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import matplotlib.image
import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner
from serve_support import Api, server

from engine.episode import Game
from engine.levels import parse_xsb
from engine.pictures.look import ELEMENT_TO_ARC, Look, Theme, add_noise, painter
from pipeline import seeds
from pipeline.spec import load_spec, spec_from_dict
from pipeline.stages.build import build
from pipeline.stages.write import level_looks
from pipeline.workers import Workers
from serve.games.dataset import load_version
from sokoforge.cli import main

QUIET = Workers(show_progress=False)
ACTIONS = [0] * 7 + [2] * 7 + [1, 3]  # walks into walls: no-op steps draw new noise too


@pytest.fixture(scope="module")
def themed():
    return spec_from_dict({**load_spec("tiny").to_dict(), "look": "themed", "noise": True})


@pytest.fixture(scope="module")
def built(tmp_path_factory, themed):
    """The version ``th`` built twice: with a secret seed, then elsewhere from that seed."""
    secret_root = tmp_path_factory.mktemp("secret")
    first = build("th", datasets=secret_root, spec=themed, workers=QUIET).path
    seed = seeds.read_secret(secret_root, "th")
    second = build("th", datasets=tmp_path_factory.mktemp("public"), spec=themed, seed=seed,
                   workers=QUIET).path
    return {"root": secret_root, "path": first, "again": second, "seed": seed}


def table(path: Path) -> pl.DataFrame:
    return pl.read_parquet(path / "levels.parquet").sort("index")


def look_of(row: dict) -> Look:
    return Look("themed", Theme.from_json(row["theme"]), row["noise_seed"])


def test_same_seed_gives_the_same_bytes_and_every_level_its_own_theme(built, themed):
    assert (built["path"] / "levels.parquet").read_bytes() == \
        (built["again"] / "levels.parquet").read_bytes()
    df = table(built["path"])
    assert df["theme"].null_count() == 0 and df["noise_seed"].null_count() == 0
    assert df["theme"].n_unique() == df.height and df["noise_seed"].n_unique() == df.height
    manifest = json.loads((built["path"] / "manifest.json").read_text())
    assert (manifest["spec"]["look"], manifest["spec"]["noise"]) == ("themed", True)
    other = level_looks(themed, built["seed"] + 1, df["index"].to_list())
    assert set(other[0].to_list()).isdisjoint(df["theme"].to_list())


def test_the_secret_seed_is_in_no_file_of_the_version_and_not_served(built):
    secret = str(built["seed"])
    for path in (built["path"] / "levels.parquet", built["path"] / "manifest.json"):
        assert secret.encode() not in path.read_bytes()
    df = table(built["path"])
    assert built["seed"] not in df["noise_seed"].to_list()
    with server(load_version(built["root"], "th"), built["root"] / "db.sqlite") as running:
        status, spec = Api(running.base).call("GET", "/api/spec")
    assert status == 200 and secret not in json.dumps(spec)


def decoded(frame: dict) -> np.ndarray:
    raw = base64.b64decode(frame["observation"]["obs"])
    return np.frombuffer(raw, dtype=np.uint8).reshape(64, 64, 3)


def play_fixed(client: Api) -> tuple[str, list[np.ndarray]]:
    sid = client.ok("POST", "/api/scorecards")["scorecard_id"]
    frame = client.ok("POST", f"/api/scorecards/{sid}/games/tiny/start")
    frames = [decoded(frame)]
    for action in ACTIONS:
        frame = client.ok("POST", f"/api/sessions/{frame['session_id']}/act", {"action": action})
        if frame["episode"]["index"] != 0:
            break
        frames.append(decoded(frame))
    return frame["session_id"], frames


def play_fixed_arc(client: Api, steps: int) -> list[np.ndarray]:
    """The ARC face's grids of the first ``steps`` frames of the same fixed actions."""
    game = "sokoban-th"
    card = client.ok("POST", "/api/scorecard/open", {})["card_id"]
    frame = client.ok("POST", "/api/cmd/RESET", {"card_id": card, "game_id": game})
    grids = [np.array(frame["frame"][0])]
    for action in ACTIONS[:steps - 1]:
        frame = client.ok("POST", f"/api/cmd/ACTION{action + 1}",
                          {"game_id": game, "guid": frame["guid"]})
        grids.append(np.array(frame["frame"][0]))
    return grids


def test_served_frames_are_the_stored_themes_drawing_and_replay_the_same(built, tmp_path):
    row = table(built["path"]).row(0, named=True)
    level = parse_xsb(row["xsb"])
    drawn = painter(level, look_of(row))
    game = Game(level, row["max_steps"])
    expected = [drawn.frame(level.start, 0)]
    blocked = 0
    for n, action in enumerate(ACTIONS, 1):
        blocked += not game.act(action).moved
        if game.done:
            break
        expected.append(drawn.frame(game.state, n))
    assert blocked and look_of(row).noisy
    db = tmp_path / "store.sqlite"
    with server(load_version(built["root"], "th"), db) as running:
        client = Api(running.base)
        client.key = client.ok("POST", "/api/keys", {"name": "looker"}, status=201)["api_key"]
        session, frames = play_fixed(client)
        spec = client.ok("GET", "/api/spec")
        home = client.ok("GET", "/")
        goal = client.ok("GET", f"/api/sessions/{session}")["observation"]["goal"]
        _, again = play_fixed(client)
        grids = play_fixed_arc(client, len(frames))
    assert len(frames) == len(expected) > 3
    for n, (got, want) in enumerate(zip(frames, expected, strict=True)):
        assert got.tobytes() == want.tobytes(), f"step {n}"
    assert [f.tobytes() for f in again] == [f.tobytes() for f in frames]
    # both faces show one board: the ARC grid, read back as elements and coloured (with the
    # step's noise) by the level's theme, is the native frame of the same step
    to_element = {int(v): e for e, v in enumerate(ELEMENT_TO_ARC)}
    look = look_of(row)
    for n, (grid, native) in enumerate(zip(grids, frames, strict=True)):
        elements = np.vectorize(to_element.get)(grid).astype(np.uint8)
        coloured = drawn.colours[elements]
        if look.noisy:
            coloured = add_noise(coloured, look.theme.noise_std, look.noise_key, n)
        assert coloured.tobytes() == native.tobytes(), f"ARC face of step {n}"
    assert base64.b64decode(goal) == drawn.goal().tobytes()
    assert spec["look"] == {"name": "themed", "noise": True, "themed_levels": 8}
    assert spec["boards"] == [[8, 8]]
    assert "<code id=look>themed</code>" in home and "8x8" in home
    # a restarted server rebuilds the session from the store: the same frame, noise included
    with server(load_version(built["root"], "th"), db) as running:
        client.host, client.port = running.base.removeprefix("http://").split(":")
        now = client.ok("GET", f"/api/sessions/{session}")
    assert decoded(now).tobytes() == frames[-1].tobytes()


def test_render_of_a_version_folder_draws_the_levels_stored_theme(built, tmp_path):
    out = tmp_path / "level.png"
    result = CliRunner().invoke(main, ["render", str(built["path"]), "--index", "3",
                                       "--scale", "1", "--out", str(out)])
    assert result.exit_code == 0, result.output
    picture = (matplotlib.image.imread(out)[..., :3] * 255).round().astype(np.uint8)
    row = table(built["path"]).row(3, named=True)
    drawn = painter(parse_xsb(row["xsb"]), look_of(row))
    assert np.array_equal(picture[:, :64], drawn.frame())
    assert np.array_equal(picture[:, 68:], drawn.goal())


def test_contact_sheet_shows_each_level_in_its_theme(built):
    from pipeline.audit.audit import load_version as audit_facts
    from pipeline.audit.audit_plots import colour_legend, contact_sheet

    facts = audit_facts(built["root"], "th")
    sheet = matplotlib.image.imread(io.BytesIO(contact_sheet(facts)), format="png")
    colours = {tuple(c) for c in (sheet[..., :3] * 255).round().astype(int).reshape(-1, 3)}
    for row in table(built["path"]).iter_rows(named=True):
        wall = tuple(Theme.from_json(row["theme"]).wall)
        assert wall in colours or any(  # noise may move a wall pixel by a few levels
            max(abs(a - b) for a, b in zip(wall, c, strict=True)) <= 2 for c in colours)
    legend = matplotlib.image.imread(io.BytesIO(colour_legend(facts)), format="png")
    first = Theme.from_json(table(built["path"])["theme"][0])
    shown = {tuple(c) for c in (legend[..., :3] * 255).round().astype(int).reshape(-1, 3)}
    assert {first.wall, first.box, first.player} <= shown  # the legend speaks of this look


def test_a_themed_spec_without_a_version_seed_is_refused_in_words(themed):
    from pipeline.errors import PipelineError

    with pytest.raises(PipelineError, match="draws a theme per level from the version seed"):
        level_looks(themed, None, [0, 1])
    shared = spec_from_dict({**themed.to_dict(), "look": "shared", "noise": False})
    themes, keys = level_looks(shared, None, [0, 1])
    assert themes.null_count() == keys.null_count() == 2
