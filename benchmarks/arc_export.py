"""The exported ARC-AGI-3 local game's speed: frames/s offline beside the served ARC face.

Exports a public version (``sokoforge arc-export``) and plays the same stream of random
ACTION1-4 (RESET once the game is over) for the same time, one row after the other:

- ``game``: the exported ``ARCBaseGame`` alone (``perform_action``), as the toolkit loads it;
- ``offline``: ``arc_agi.Arcade`` in OFFLINE mode, ``env.step`` (the figure that matters);
- ``offline+rec``: the same with the toolkit's JSONL recording of every frame;
- ``served``: the server's ARC face (``sokoforge serve`` as a child process on 127.0.0.1)
  through the toolkit's ONLINE client, the HTTP path an offline game spares.

Frames counts every frame an answer holds (two when an action ends a level). Nothing leaves
the machine: OFFLINE mode, and the toolkit's base URL a closed loopback port.

    python benchmarks/arc_export.py [--version public-S] [--seconds 5]
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import random
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # this folder holds serve.py: import the packages instead
_spec = importlib.util.spec_from_file_location("serve_bench", ROOT / "benchmarks" / "serve.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

QUIET = logging.getLogger("arc-export-bench")
QUIET.addHandler(logging.NullHandler())
QUIET.propagate = False


def run(step, reset, seconds: float, seed: int = 7) -> dict:
    """Random ACTION1-4 through ``step`` (RESET through ``reset`` at the end of a game) until
    ``seconds`` pass: actions and frames per second."""
    from arcengine import GameAction, GameState

    rng = random.Random(seed)
    moves = [GameAction.from_id(n) for n in range(1, 5)]
    actions = frames = 0
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while time.perf_counter() < deadline:
        answer = step(rng.choice(moves))
        actions += 1
        frames += len(answer.frame)
        if answer.state in (GameState.WIN, GameState.GAME_OVER):
            frames += len(reset().frame)
            actions += 1
    elapsed = time.perf_counter() - t0
    return {"actions": actions / elapsed, "frames": frames / elapsed}


def game_class(folder: Path):
    """The exported class, loaded as the toolkit loads it (the source executed as a module)."""
    namespace: dict = {}
    exec(compile((folder / "sokoban.py").read_text(), str(folder / "sokoban.py"), "exec"),
         namespace)
    return namespace["Sokoban"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--version", default="public-S")
    parser.add_argument("--datasets", default=str(ROOT / "datasets"))
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    os.environ.update({"OPERATION_MODE": "offline", "ARC_BASE_URL": "http://127.0.0.1:9",
                       "ARC_API_KEY": "local-only"})
    from arc_agi import Arcade, OperationMode
    from arcengine import ActionInput, GameAction

    from serve.arc.arc_export import export_arc_game

    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        done = export_arc_game(Path(args.datasets), args.version, tmp_path / "games")
        print(f"{done.game_id}: {done.levels} levels, {args.seconds:g} s per row, one process")
        rows: dict[str, dict] = {}

        game = game_class(done.folder)()
        game.perform_action(ActionInput(id=GameAction.RESET), raw=True)
        rows["game"] = run(lambda a: game.perform_action(ActionInput(id=a), raw=True),
                           lambda: game.perform_action(ActionInput(id=GameAction.RESET),
                                                       raw=True), args.seconds)
        for name, record in (("offline", False), ("offline+rec", True)):
            arc = Arcade(operation_mode=OperationMode.OFFLINE,
                         environments_dir=str(tmp_path / "games"),
                         recordings_dir=str(tmp_path / "recordings"), logger=QUIET)
            env = arc.make(done.game_id, save_recording=record)
            rows[name] = run(env.step, env.reset, args.seconds)

        proc, base = bench.start_server(Path(args.datasets), args.version,
                                        tmp_path / "bench.sqlite", "normal")
        try:
            import asyncio

            key = asyncio.run(bench.register(base))
            arc = Arcade(arc_api_key=key, arc_base_url=base,
                         operation_mode=OperationMode.ONLINE, logger=QUIET)
            env = arc.make(done.game_id)
            rows["served"] = run(env.step, env.reset, args.seconds)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)

        print(f"{'path':>12} {'actions/s':>10} {'frames/s':>10} {'x offline':>10}")
        for name, r in rows.items():
            print(f"{name:>12} {r['actions']:>10.0f} {r['frames']:>10.0f} "
                  f"{r['frames'] / rows['offline']['frames']:>10.2f}")


if __name__ == "__main__":
    main()
