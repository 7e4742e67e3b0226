"""XSB parsing, writing, symmetry ids: what the engine accepts and how it says no."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.levels import (
    MAX_CRATES,
    MAX_SIDE,
    LevelError,
    State,
    canonical_id,
    parse_levels,
    parse_xsb,
    to_xsb,
    wall_layout_id,
    write_levels,
)

SIMPLE = "#####\n#@$.#\n#####"


def test_parse_reads_player_crates_goals_as_flat_cells():
    level = parse_xsb(SIMPLE)
    assert (level.height, level.width) == (3, 5)
    assert level.start == State(6, (7,))
    assert level.goal_cells == (8,)
    assert level.walls.sum() == 12 and level.floor.sum() == 3


@pytest.mark.parametrize("text", [
    SIMPLE,
    "######\n#+*$ #\n#    #\n######",
    "  ####\n###  #\n# $* #\n# .@ #\n######",
])
def test_xsb_round_trips(text):
    assert to_xsb(parse_xsb(text)) == text


def test_floor_aliases_are_accepted():
    assert to_xsb(parse_xsb("#####\n#@$.#\n#-_ #\n#####")) == "#####\n#@$.#\n#   #\n#####"


def test_rows_of_floor_aliases_around_a_board_are_padding_and_round_trip():
    levels = parse_levels("---\n#####\n#@$.#\n#####\n-_-\n\n#####\n#@$.#\n#####\n")
    assert [lv.height for lv in levels] == [3, 3]
    assert parse_levels(write_levels(levels)) == levels


@pytest.mark.parametrize("text, message", [
    ("#####\n# $.#\n#####", "no player"),
    ("######\n#@$.@#\n######", "2 players"),
    ("######\n#@$.$#\n######", "2 crates but 1 goals"),
    ("####\n#@ #\n####", "zero crates"),
    ("#####\n#@$x#\n#####", "unknown character 'x' at row 2, column 4"),
    ("#####\n#@$. \n#####", "unenclosed"),
    ("", "empty level"),
    ("#####\n#@$.#\n#####\n--\n###\n#.#", "row 4 is empty"),
])
def test_parse_errors_say_what_is_wrong(text, message):
    with pytest.raises(LevelError, match=message):
        parse_xsb(text)


def test_board_larger_than_supported_names_the_limit():
    side = MAX_SIDE + 1
    rows = ["#" * side] + ["#@$." + " " * (side - 5) + "#"] + ["#" * side] * (side - 2)
    with pytest.raises(LevelError, match=f"at most {MAX_SIDE}x{MAX_SIDE}"):
        parse_xsb("\n".join(rows))


def test_too_many_crates_names_the_limit():
    n = MAX_CRATES + 1
    text = "#" * (n + 3) + "\n#@" + "*" * n + "#\n" + "#" * (n + 3)
    with pytest.raises(LevelError, match=f"at most {MAX_CRATES}"):
        parse_xsb(text)


def test_a_16x16_board_with_six_crates_is_accepted():
    rows = ["#" * 16] + ["#" + " " * 14 + "#" for _ in range(14)] + ["#" * 16]
    rows[1] = "#@$$$$$$......" + " #"
    assert parse_xsb("\n".join(rows)).n_crates == MAX_CRATES


def test_file_of_levels_keeps_titles_and_order_and_round_trips():
    text = "; first\n" + SIMPLE + "\n\n; second\n; a comment\n#####\n#.$@#\n#####\n"
    levels = parse_levels(text)
    assert [lv.title for lv in levels] == ["first", "second"]
    assert [lv.start.player for lv in levels] == [6, 8]
    again = parse_levels(write_levels(levels))
    assert [to_xsb(lv) for lv in again] == [to_xsb(lv) for lv in levels]


def test_a_file_with_crlf_lines_and_a_byte_order_mark_parses_like_plain_text():
    text = "\ufeff; first\r\n" + SIMPLE.replace("\n", "\r\n") + "\r\n"
    [level] = parse_levels(text)
    assert (level.title, to_xsb(level)) == ("first", SIMPLE)


def test_error_in_a_file_names_the_level_by_index_and_its_first_line():
    with pytest.raises(LevelError, match=r"level 1 \(line 5\): no player"):
        parse_levels(SIMPLE + "\n\n#####\n# $.#\n#####")


def test_canonical_id_is_invariant_under_rotation_and_reflection():
    text = "#####\n#@  #\n# $ #\n#  .#\n#####"
    level = parse_xsb(text)
    grid = np.array([list(r) for r in text.split("\n")])
    for k in range(4):
        for g in (np.rot90(grid, k), np.rot90(grid, k)[:, ::-1]):
            other = parse_xsb("\n".join("".join(r) for r in g))
            assert canonical_id(other) == canonical_id(level)
            assert wall_layout_id(other) == wall_layout_id(level)


def test_canonical_id_tells_different_levels_apart():
    a = parse_xsb("#####\n#@  #\n# $ #\n#  .#\n#####")
    b = parse_xsb("#####\n#@  #\n# $.#\n#   #\n#####")
    assert canonical_id(a) != canonical_id(b)
    assert wall_layout_id(a) == wall_layout_id(b)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="# $.*@+-_\n;\r\t", max_size=80))
def test_any_text_either_parses_to_levels_that_round_trip_or_is_refused_in_words(tail):
    try:
        levels = parse_levels(SIMPLE + "\n" + tail)
    except LevelError as e:
        assert str(e)
        return
    assert parse_levels(write_levels(levels)) == levels
