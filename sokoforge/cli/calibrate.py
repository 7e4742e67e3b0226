"""``sokoforge calibrate``: fit the difficulty model against the reference planner."""

from __future__ import annotations

__all__ = ["calibrate_command", "report_lines"]

import os
import tempfile
from pathlib import Path

import click

from sokoforge.cli.errors import USAGE, CliError, refusals
from sokoforge.cli.progress_bar import terminal_progress


@click.command("calibrate")
@click.option("--seed", type=click.IntRange(0), default=None,
              help="Public pool seed (default: the fixed calibration seed).")
@click.option("--fit-per-tier", type=click.IntRange(2), default=100, show_default=True,
              help="Fitting-pool levels per tier of the template.")
@click.option("--held-out-per-tier", type=click.IntRange(2), default=100, show_default=True,
              help="Held-out-pool levels per tier of the template.")
@click.option("--spec", "spec_name", default="standard", show_default=True,
              help="Template game: its tiers' bands, densities and step budget.")
@click.option("--jobs", type=click.IntRange(1, 256), default=2, show_default=True)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to write the model (default: pipeline/specs/difficulty.json); its "
                   "held-out reliability curve goes beside it as NAME_pool_curve.json.")
def calibrate_command(seed: int | None, fit_per_tier: int, held_out_per_tier: int,
                      spec_name: str, jobs: int, out: Path | None) -> None:
    """Draw two pools, play them up the compute ladder and fit the difficulty model.

    Prints the predictor's held-out error beside optimal length alone, the test-retest
    stability of compute_to_solve and of the single-run label, and the within-tier AUC table
    of a second agent family's failures.
    """
    from pipeline.calibrate import POOL_SEED, PoolSize, calibrate, pool_curve
    from pipeline.difficulty.difficulty import MODEL_PATH, save_model
    from pipeline.difficulty.reliability import save_pool_curve
    from pipeline.spec import load_spec
    from pipeline.workers import Workers

    target = MODEL_PATH if out is None else out
    if not (target.parent.is_dir() and os.access(target.parent, os.W_OK)):
        # Refused before the pools are drawn and played, not after.
        raise CliError(f"cannot write the model to {target}: no writable folder there", USAGE)
    with refusals():
        template = load_spec(spec_name)
        with tempfile.TemporaryDirectory(prefix="sokoforge-calibrate-") as work:
            result = calibrate(template, POOL_SEED if seed is None else seed,
                               PoolSize(fit_per_tier, held_out_per_tier), Path(work),
                               Workers(jobs=jobs, display=terminal_progress))
        model = result.model
        save_model(model, target)
        save_pool_curve(pool_curve(model, result.held_out_pool),
                        target.with_name(f"{target.stem}_pool_curve.json"))
    for line in report_lines(model.info):
        click.echo(line)
    click.echo(f"curves' slope {model.slope}; model written to {target}")


def report_lines(info: dict) -> list[str]:
    """The calibration figures as printed: predictor, test-retest, generalisation table."""
    lines = []
    for pool in ("fit", "held_out"):
        m = info[pool]
        lines.append(
            f"{pool}: {m['levels']} levels ({m['censored']} censored); predicted "
            f"compute_to_solve MAE {m['mean_absolute_error']} (optimal length alone "
            f"{m['length_only_mean_absolute_error']}), Spearman {m['spearman']} (optimal "
            f"length alone {m['spearman_optimal_moves']}), grade agreement "
            f"{m['grade_agreement']}")
    r = info["test_retest"]
    lines.append(
        f"test-retest on {r['levels']} held-out levels, seeds {r['seed_sets'][0]} vs "
        f"{r['seed_sets'][1]}: compute_to_solve Pearson {r['compute_to_solve_pearson']}, "
        f"Spearman {r['compute_to_solve_spearman']}; single-run label (solved at 256 calls, seed 0 "
        f"vs each retest seed) Pearson {r['single_run_label_pearson']}, agreement "
        f"{r['single_run_label_agreement']}")
    head = ("crates", "agent", "levels", "failures", "auc_compute_to_solve",
            "auc_predicted_compute", "auc_optimal_moves", "gain")
    rows = [[str(row[h]) for h in head] for row in info["generalisation"]]
    widths = [max(len(x) for x in col) for col in zip(head, *rows, strict=True)]
    for row in [list(head), *rows]:
        lines.append("  ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)))
    return lines
