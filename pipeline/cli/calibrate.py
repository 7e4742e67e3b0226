"""``sokoforge calibrate``: fit the difficulty model against the reference planner."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import click

from pipeline.cli.errors import USAGE, CliError, refusals


@click.command("calibrate")
@click.option("--seed", type=click.IntRange(0), default=None,
              help="Public pool seed (default: the fixed calibration seed).")
@click.option("--fit-per-tier", type=click.IntRange(2), default=600, show_default=True,
              help="Fitting-pool levels per crate count (1-4 crates).")
@click.option("--held-out-per-tier", type=click.IntRange(2), default=300, show_default=True,
              help="Held-out-pool levels per crate count.")
@click.option("--spec", "spec_name", default="standard", show_default=True,
              help="Template game: its tiers' bands, densities and step budget.")
@click.option("--jobs", type=click.IntRange(1, 256), default=2, show_default=True)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to write the model (default: pipeline/specs/difficulty.json); its "
                   "held-out reliability curve goes beside it as NAME_pool_curve.json.")
def calibrate_command(seed: int | None, fit_per_tier: int, held_out_per_tier: int,
                      spec_name: str, jobs: int, out: Path | None) -> None:
    """Draw two pools, play them with the reference planner and fit the difficulty model.

    Prints the held-out AUC of difficulty against planner failure beside the AUC of the
    optimal length alone, and Spearman correlations with length and crate count.
    """
    from pipeline.calibrate import POOL_SEED, PoolSize, calibrate, pool_curve
    from pipeline.difficulty import MODEL_PATH, save_model
    from pipeline.reliability import save_pool_curve
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
                               Workers(jobs=jobs))
        model = result.model
        save_model(model, target)
        save_pool_curve(pool_curve(model, result.held_out_pool),
                        target.with_name(f"{target.stem}_pool_curve.json"))
    for pool in ("fit", "held_out"):
        m = {k: "n/a" if v is None else f"{v:.3f}" if isinstance(v, float) else v
             for k, v in model.info[pool].items()}
        click.echo(f"{pool}: {m['levels']} levels, {m['planner_failures']} planner failures; "
                   f"AUC {m['auc']} (optimal length alone {m['auc_optimal_moves']}, "
                   f"crates alone {m['auc_n_crates']}); Spearman with optimal length "
                   f"{m['spearman_optimal_moves']}, with crates {m['spearman_n_crates']}")
    held = model.info["held_out"]
    click.echo(f"held-out planner outcomes unchanged at lookahead budgets "
               f"{' and '.join(map(str, held['outcome_same_at_budgets']))}: "
               f"{100 * held['outcome_stability']:.1f}% (how noisy the per-level label is)")
    click.echo(f"grade cut points {list(model.grade_cuts)}; model written to {target}")
