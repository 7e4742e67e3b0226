"""The pictures agents see: shapes, colours, the goal image, determinism."""

import numpy as np

from engine.levels import State, parse_xsb
from engine.pictures.render import (
    PALETTE,
    PLAYER,
    PLAYER_ON_GOAL,
    SIZE,
    render,
    render_goal,
    render_goal_indices,
    render_indices,
    sprites,
)

LEVEL = parse_xsb("\n".join([
    "########",
    "#  .   #",
    "# $$ # #",
    "#.@  * #",
    "#  #   #",
    "#      #",
    "#      #",
    "########",
]))


def test_observation_is_64x64_rgb_uint8_c_order():
    img = render(LEVEL)
    assert img.shape == (SIZE, SIZE, 3) and img.dtype == np.uint8 and img.flags.c_contiguous
    assert render_goal(LEVEL).shape == (SIZE, SIZE, 3)
    idx = render_indices(LEVEL)
    assert idx.shape == (SIZE, SIZE) and idx.dtype == np.uint8 and idx.max() <= 15


def test_rgb_is_the_palette_picture():
    assert np.array_equal(render(LEVEL), PALETTE[render_indices(LEVEL)])
    assert np.array_equal(render_goal(LEVEL), PALETTE[render_goal_indices(LEVEL)])


def test_every_tile_kind_has_its_own_picture():
    sheet = sprites(8)
    pictures = {sheet[k].tobytes() for k in range(len(sheet))}
    assert len(pictures) == len(sheet)


def test_tiles_are_8_pixels_on_an_8x8_board():
    tile = render_indices(LEVEL)[3 * 8 : 4 * 8, 2 * 8 : 3 * 8]  # the player's cell
    assert np.array_equal(tile, sprites(8)[PLAYER])


def test_goal_image_has_crates_on_goals_and_no_player():
    goal = render_goal_indices(LEVEL)
    player_colours = set(np.unique(sprites(8)[PLAYER])) - set(np.unique(sprites(8)[0:6]))
    assert player_colours, "the player must have a colour no other tile uses"
    assert not np.isin(goal, list(player_colours)).any()
    solved = State(LEVEL.start.player, LEVEL.goal_cells)
    rows, cols = np.nonzero(render_indices(LEVEL, solved) != goal)
    r, c = divmod(solved.player, LEVEL.width)
    assert rows.size and set(rows // 8) == {r} and set(cols // 8) == {c}  # only the player differs


def test_player_on_goal_differs_from_player_on_floor():
    on_goal = State(LEVEL.goal_cells[0], LEVEL.start.crates)
    r, c = divmod(on_goal.player, LEVEL.width)
    tile = render_indices(LEVEL, on_goal)[r * 8 : r * 8 + 8, c * 8 : c * 8 + 8]
    assert np.array_equal(tile, sprites(8)[PLAYER_ON_GOAL])


def test_same_input_same_bytes():
    assert render(LEVEL).tobytes() == render(LEVEL).tobytes()
    assert render_goal(LEVEL).tobytes() == render_goal(LEVEL).tobytes()


def test_smaller_boards_are_centred_with_integer_tiles():
    small = parse_xsb("#####\n#@$.#\n#####")
    idx = render_indices(small)
    tile = SIZE // 5
    top, left = (SIZE - 3 * tile) // 2, (SIZE - 5 * tile) // 2
    board = idx[top : top + 3 * tile, left : left + 5 * tile]
    assert np.array_equal(board[tile : 2 * tile, tile : 2 * tile], sprites(tile)[PLAYER])
    assert (idx[:top] == idx[0, 0]).all()
