"""The looks: the shared environment's frames byte for byte, themes, noise and the ARC face."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from engine.levels import parse_xsb
from engine.pictures.look import (
    ARC,
    ARC_INDEX,
    ELEMENT_TO_ARC,
    ELEMENTS,
    SHARED,
    SHARED_THEME,
    Look,
    LookError,
    Theme,
    draw_theme,
    painter,
    stored_look,
)
from engine.rules import step

# The shared environment's reference frames (a copy of shared/reference/look), kept with the
# tests so that a clone alone runs them.
REFERENCE = Path(__file__).resolve().parent / "fixtures" / "reference_look"
CASES_FILE, FRAMES_FILE = "cases.json", "frames.npz"


def reference_dir() -> Path:
    """The reference frames' folder; missing, the test fails."""
    if (REFERENCE / CASES_FILE).is_file() and (REFERENCE / FRAMES_FILE).is_file():
        return REFERENCE
    pytest.fail(f"the shared environment's reference frames are missing from {REFERENCE}")


@pytest.fixture(scope="module")
def reference():
    folder = reference_dir()
    cases = json.loads((folder / CASES_FILE).read_text())
    with np.load(folder / FRAMES_FILE) as frames:
        return cases, {k: frames[k] for k in frames.files}


def case_look(case: dict) -> Look:
    return SHARED if case["theme"] is None else Look("themed", Theme.from_dict(case["theme"]))


def played(case: dict) -> tuple:
    level = parse_xsb(case["xsb"])
    states = [level.start]
    for action in case["actions"]:
        states.append(step(level, states[-1], action)[0])
    return level, states


def test_every_reference_frame_of_the_shared_environment_matches_byte_for_byte(reference):
    # painter(level, look).frame(state, step) is what serve.games.dataset precomputes and
    # serve.arena.images calls after every action
    cases, frames = reference
    assert len(cases) == 60
    sides = {max(parse_xsb(c["xsb"]).height, parse_xsb(c["xsb"]).width) for c in cases}
    assert min(sides) <= 7 and max(sides) >= 15  # cell sizes from 9 down to 4 pixels
    assert sum(c["theme"] is not None for c in cases) == 12
    for i, case in enumerate(cases):
        level, states = played(case)
        drawn = painter(level, case_look(case))
        got = np.stack([drawn.frame(s, n) for n, s in enumerate(states)])
        assert got.shape == frames[f"obs_{i}"].shape == (13, 64, 64, 3)
        assert got.tobytes() == frames[f"obs_{i}"].tobytes(), f"case {i} ({case['name']})"
        assert drawn.goal().tobytes() == frames[f"goal_{i}"].tobytes(), f"goal of case {i}"


def test_arc_face_shows_the_same_board_as_the_rgb_frame_at_every_step(reference):
    cases, _ = reference
    assert len(set(ELEMENT_TO_ARC.tolist())) == len(ELEMENTS)  # the map loses nothing
    assert list(ARC_INDEX) == list(ELEMENTS)
    for case in cases[::5]:
        level, states = played(case)
        drawn = painter(level, case_look(case))
        for n, state in enumerate(states):
            codes = drawn.elements(state)
            assert np.array_equal(drawn.frame(state, n), drawn.colours[codes])
            assert np.array_equal(drawn.arc(state), ELEMENT_TO_ARC[codes])


def test_arc_look_keeps_the_16_colour_picture_on_both_faces():
    from engine.pictures.render import PALETTE, render_indices

    level = parse_xsb("#####\n#@$.#\n#####")
    drawn = painter(level, ARC)
    assert np.array_equal(drawn.arc(None), render_indices(level))
    assert np.array_equal(drawn.frame(), PALETTE[render_indices(level)])


def test_spaces_outside_an_irregular_board_are_floor():
    level = parse_xsb("  ###\n###.#\n#@$ #\n#####")
    codes = painter(level, SHARED).elements()
    c = 64 // 5
    top = (64 - 4 * c) // 2
    outside = codes[top:top + c, 0:c]  # row 0, column 0: a space outside the walls
    assert set(np.unique(outside)) == {ELEMENTS.index("floor")}


def test_drawn_themes_keep_to_the_jitter_rules_and_are_reproducible():
    themes = [draw_theme(np.random.default_rng(s), noise=True) for s in range(300)]
    again = [draw_theme(np.random.default_rng(s), noise=True) for s in range(300)]
    assert themes == again
    limits = {"floor": 70, "wall": 70, "wall_edge": 30, "box_edge": 30, "goal": 45, "box": 45,
              "box_on_goal": 45, "player": 45}
    for t in themes:
        for name, k in limits.items():
            base = np.array(getattr(SHARED_THEME, name))
            v = np.array(getattr(t, name))
            assert ((v >= 20) & (v <= 235)).all()
            assert (np.abs(v - np.clip(base, 20, 235)) <= k).all(), name
        assert (np.abs(np.array(t.floor_alt) - np.array(t.floor)) <= 18).all()
        assert 0.0 <= t.noise_std <= 6.0
    assert {t.checker for t in themes} == {True, False}
    offsets = np.array([np.array(t.box) - np.array(SHARED_THEME.box) for t in themes])
    assert offsets.min() == -45 and offsets.max() == 45  # the whole range is drawn
    assert all(draw_theme(np.random.default_rng(s), noise=False).noise_std == 0 for s in range(9))


def test_noise_is_a_function_of_key_and_step_alone():
    level = parse_xsb("#####\n#@$.#\n#####")
    theme = Theme.from_dict({**SHARED_THEME.to_dict(), "noise_std": 4.0})
    noisy = painter(level, Look("themed", theme, 1234))
    clean = painter(level, Look("themed", Theme.from_dict({**theme.to_dict(), "noise_std": 0})))
    first = noisy.frame(None, 3)
    assert first.tobytes() == painter(level, Look("themed", theme, 1234)).frame(None, 3).tobytes()
    assert first.tobytes() != noisy.frame(None, 4).tobytes()
    assert first.tobytes() != painter(level, Look("themed", theme, 1235)).frame(None, 3).tobytes()
    diff = first.astype(int) - clean.frame(None, 3).astype(int)
    assert 2.0 < diff.std() < 6.0 and abs(diff.mean()) < 0.5
    assert np.array_equal(noisy.arc(None), clean.arc(None))  # the ARC face has no noise


def test_theme_json_round_trips_and_bad_fields_are_named():
    theme = draw_theme(np.random.default_rng(7), noise=True)
    assert Theme.from_json(theme.to_json()) == theme
    assert stored_look("shared", {"theme": theme.to_json(), "noise_seed": 9}) == Look(
        "themed", theme, 9)
    assert stored_look("arc", {"theme": None}) == ARC
    assert stored_look("shared", {}) == SHARED
    for bad, says in [({**theme.to_dict(), "goal": [1, 2, 300]}, "goal"),
                      ({**theme.to_dict(), "colour": 1}, "unknown field 'colour'"),
                      ({**theme.to_dict(), "checker": "yes"}, "checker"),
                      ({**theme.to_dict(), "noise_std": 9}, "noise_std"),
                      ([1, 2], "JSON object")]:
        with pytest.raises(LookError, match=says):
            Theme.from_dict(bad)
    with pytest.raises(LookError, match="has no theme"):
        stored_look("themed", {"theme": None})
    with pytest.raises(LookError, match="unknown look"):
        Look("sepia")
