"""What grading costs on the boards a collection brings: each search a grade feature needs,
timed on boards from 8x8 to 16x16, beside the bounds past which an import imputes it.

Run: ``python benchmarks/import_grade.py``. Prints, per board, the dense index size and the
seconds of the forward solve, the solvable set, the reachable counts, the optimal-path count
and the whole bounded grading (``grade_group_within_limits``) with what it imputed.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

# Run as a script, this file's folder comes first on sys.path and would hide the packages.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent.resolve()]

from engine.levels import parse_xsb, to_xsb  # noqa: E402
from engine.search.index import DenseIndex, StateSpaceTooLarge  # noqa: E402
from engine.search.optimal_paths import MAX_COUNTED_STATES, optimal_paths  # noqa: E402
from engine.search.reachable import push_reachable_stats  # noqa: E402
from engine.search.reverse import MAX_SET_INDEX, solvable_set  # noqa: E402
from engine.search.solver import solve  # noqa: E402
from pipeline.stages.grade import BOUNDED_SET_INDEX, grade_group_within_limits  # noqa: E402


def room(side: int, crates: int) -> str:
    """An open ``side`` x ``side`` room with ``crates`` crates one push row above their goals."""
    rows = [["#"] + [" "] * (side - 2) + ["#"] for _ in range(side)]
    rows[0] = rows[-1] = ["#"] * side
    mid = side // 2
    for i in range(crates):
        col = 2 + 2 * i
        rows[mid - 1][col], rows[mid][col] = ".", "$"
    rows[mid + 2][side // 2] = "@"
    return "\n".join("".join(r) for r in rows)


BOARDS = {
    "8x8 room, 2 crates": room(8, 2),
    "8x8 room, 3 crates": room(8, 3),
    "10x10 room, 3 crates": room(10, 3),
    "12x12 room, 2 crates": room(12, 2),
    "13x13 room, 3 crates": room(13, 3),
    "14x14 room, 3 crates": room(14, 3),
    "16x16 room, 1 crate": room(16, 1),
    "16x16 room, 2 crates": room(16, 2),
    "16x16 room, 3 crates": room(16, 3),
}


def timed(fn):
    began = time.perf_counter()
    try:
        out = fn()
    except StateSpaceTooLarge:
        return "too large", None
    return f"{time.perf_counter() - began:.2f}", out


def main() -> None:
    print(f"bounds: solvable set for serving/grading {BOUNDED_SET_INDEX:,} (import), "
          f"{MAX_SET_INDEX:,} (engine); optimal paths {MAX_COUNTED_STATES:,}")
    head = ("board", "dense index", "solve s", "set s", "reach s", "paths s", "grade s",
            "imputed")
    print(" | ".join(head))
    for name, text in BOARDS.items():
        level = parse_xsb(text)
        size = DenseIndex.for_level(level, max_size=1 << 62).size
        result = solve(level)
        t_solve, _ = timed(lambda lv=level: solve(lv))
        t_set, sset = timed(lambda lv=level: solvable_set(lv, max_size=BOUNDED_SET_INDEX))
        if sset is None and size <= MAX_SET_INDEX:  # what the engine's own bound would cost
            t_set = f"too large ({timed(lambda lv=level: solvable_set(lv))[0]} unbounded)"
        t_reach = timed(lambda lv=level, s=sset: push_reachable_stats(lv, s))[0] \
            if sset is not None else "-"
        t_paths, _ = timed(lambda lv=level: optimal_paths(lv))
        item = [(to_xsb(level), result.moves, result.pushes, result.solution)]
        t_grade, feats = timed(lambda it=item: grade_group_within_limits(it))
        imputed = feats[0]["imputed_features"] or "none" if feats else "?"
        print(" | ".join([name, f"{size:,}", t_solve, t_set, t_reach, t_paths, t_grade,
                          imputed]))


if __name__ == "__main__":
    main()
