"""The audit's report: report.md, a self-contained report.html and the terminal summary,
assembled from the pictures of ``pipeline.audit.audit_plots`` and the tables of
``pipeline.audit.audit_tables``.

Images are written as PNG files next to report.md and inlined as base64 in report.html, so the
HTML opens offline with nothing beside it.
"""

from __future__ import annotations

__all__ = ["Report", "swap_in"]

import base64
import html
import json
import os
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from engine.agents.ladder import LADDER_BUDGETS, LADDER_SEEDS
from engine.agents.planner import CALLS_PER_EXPANSION
from pipeline.audit.audit import (
    AuditResult,
    Check,
    deadlock_summary,
    is_imported,
    tier_summary,
)
from pipeline.audit.audit_plots import (
    colour_legend,
    contact_sheet,
    plot_calibration,
    plot_difficulty,
    plot_histograms,
    plot_information,
    plot_optima,
    plot_panel,
    plot_pushes_and_slack,
    version_curve,
)
from pipeline.audit.audit_tables import (
    bins_table,
    cell_text,
    comparison_slots,
    comparison_tiers,
    information_table,
    irt_agents,
    irt_levels,
    irt_note,
    md_table,
    panel_counts,
    version_metadata,
)
from pipeline.difficulty.compute_curve import RULE_BUDGET, grade_rule
from pipeline.difficulty.difficulty import load_model
from pipeline.difficulty.panel import PANEL_FILE
from pipeline.difficulty.reference_play import REFERENCE_FILE
from pipeline.difficulty.reliability import load_pool_curve
from pipeline.scores.currency import CALL
from pipeline.scores.equivalence import EQUIVALENCE_FILE, Equivalence
from pipeline.scores.irt import IRT_FILE
from pipeline.scores.items import ITEMS_FILE, ITEMS_FIT_FILE
from pipeline.scores.linking import LINE_FILE
from pipeline.versions.hidden_files import fresh_folder, is_hidden, make_private, private_writes
from pipeline.versions.manifest import visibility

_PANEL_NOTE = ("Each agent replans after every step within its budget of dynamics calls per "
               f"step ({CALL[0].lower()}{CALL[1:]}): planner = the reference planner (learning "
               "real-time A*), greedy = greedy "
               "best-first over box distances, breadth = a breadth-first lookahead, rollout = "
               "random rollouts. From report/panel.parquet (sokoforge panel).")


class Report:
    """All pieces of one audit report, rendered as Markdown, HTML and a terminal summary."""

    def __init__(self, result: AuditResult, audited_at: datetime | None = None) -> None:
        self.result = result
        self.audited_at = audited_at or datetime.now(UTC)
        facts, other, comparison = result.facts, result.against, result.comparison
        other_name = other.name if other is not None else ""
        self.tiers = tier_summary(facts)
        self.deadlocks = deadlock_summary(facts)
        self.metadata = version_metadata(facts, self.audited_at)
        self.rotation = (Equivalence.from_dict(facts.rotation)
                         if facts.rotation is not None else None)
        self.curve = version_curve(facts)
        self.pool_curve = load_pool_curve()
        self.images = {
            "optima.png": ("Optimal moves against play order",
                           plot_optima(facts, comparison, other_name)),
            "difficulty.png": ("Difficulty against play order",
                               plot_difficulty(facts, comparison, other_name)),
            "calibration.png": ("Calibration: predicted difficulty against planner failures",
                                plot_calibration(facts, self.curve, self.pool_curve)),
            "histograms.png": ("Per-tier histograms", plot_histograms(facts)),
            "pushes_slack.png": ("Pushes and budget slack per tier",
                                 plot_pushes_and_slack(facts)),
            "contact_sheet.png": ("Contact sheet", contact_sheet(facts)),
            "legend.png": ("Legend of the contact sheet", colour_legend(facts)),
        }
        self.panel = panel_counts(result)
        if self.panel is not None:
            sizes = {int(t): n for t, n in
                     facts.table.group_by("tier").len().sort("tier").iter_rows()}
            self.images["panel.png"] = ("Agent panel: levels solved per tier",
                                        plot_panel(self.panel, sizes))
        if result.information is not None:
            self.images["information.png"] = ("Information curve of the pool",
                                              plot_information(facts.name, result.information))
        if other is not None:
            self.images["against_contact_sheet.png"] = (f"Contact sheet of {other.name}",
                                                        contact_sheet(other))

    def _title(self) -> str:
        a = self.result.facts.name
        return f"Audit of {a}" + (f" against {self.result.against.name}"
                                  if self.result.against else "")

    def _headline(self) -> str:
        r = self.result
        solved = int(r.facts.table["planner_solved"].sum())
        verdict = "all checks pass" if r.passed else f"{len(r.failed)} check(s) FAIL"
        rotation = ""
        if self.rotation is not None:
            rotation = ("; rotation from " + self.rotation.prev + " "
                        + ("accepted" if self.rotation.accepted else "REFUSED"))
        game = r.facts.manifest.get("game") or r.facts.spec.name
        return (f"{r.facts.table.height} levels, game {game}; "
                f"reference planner solves {solved}/{r.facts.table.height}; {verdict}"
                f"{rotation}")

    def round_fitness(self) -> tuple[bool, list[str]]:
        """Whether the version may be a round's set, and why not: every check passes, its
        levels are hidden and secret (no public seed redraws them), and a rotation was
        accepted."""
        r = self.result
        manifest = r.facts.manifest
        why = []
        if not r.passed:
            why.append(f"{len(r.failed)} check(s) fail")
        if visibility(manifest) == "public":
            why.append("it is public: its levels may be seen")
        elif manifest.get("seed_source") == "public":
            why.append(f"it was built from the public seed {manifest.get('public_seed')}: "
                       "anyone can redraw its levels")
        if self.rotation is not None and not self.rotation.accepted:
            why.append(f"its rotation from {self.rotation.prev} was refused")
        return not why, why

    def fitness_line(self) -> str:
        """The one-line verdict every report carries: fit for a round, yes or no (and why)."""
        fit, why = self.round_fitness()
        line = "fit for a round: " + ("yes" if fit else "no (" + "; ".join(why) + ")")
        if fit and self.panel is None:
            line += (f"; no agent panel yet (sokoforge panel {self.result.facts.name} adds "
                     "it)")
        return line

    def hidden_warning(self) -> str | None:
        """For a hidden version with secret levels: its report shows every level, so it stays
        with the maintainer (a public seed's levels anyone can redraw: no secret to keep)."""
        manifest = self.result.facts.manifest
        if visibility(manifest) == "public" or manifest.get("seed_source") == "public":
            return None
        return (f"HIDDEN: this report shows every level of the hidden version "
                f"{self.result.facts.name}. It must not leave the maintainer: do not publish, "
                "commit or send it before the round is over.")

    def _model_note(self) -> str:
        model = load_model()
        held = model.info.get("held_out", {})
        t = self.result.facts.table
        if "compute_to_solve" not in t.columns:
            return ("graded before compute_to_solve existed: difficulty and grade are those "
                    "stored (the chance that the reference planner fails, from the model of "
                    "their day)")
        measured = int(t["compute_measured"].sum())
        return (f"compute_to_solve = log2 of the per-step budget in dynamics calls (the "
                f"rule's currency; one planner expansion is {CALLS_PER_EXPANSION} calls) at which "
                f"the reference planner solves half the time: measured by the ladder (budgets "
                f"{LADDER_BUDGETS[0]:,} to {LADDER_BUDGETS[-1]:,} calls per step, "
                f"{len(LADDER_SEEDS)} tie-break seeds) on {measured} of {t.height} levels, "
                f"predicted from grade features on the rest (pipeline/specs/difficulty.json, "
                f"fitted "
                f"{model.info.get('fit_date', '?')}; held-out MAE "
                f"{held.get('mean_absolute_error', '?')}, Spearman {held.get('spearman', '?')})."
                f" Grades: {grade_rule()}. difficulty = the curve's chance of failing at "
                f"{RULE_BUDGET} calls per step, "
                f"so the grade cut points in difficulty are "
                f"{[round(c, 3) for c in model.grade_cuts]}.")

    def calibration_lines(self) -> list[str]:
        """The Brier scores of the version and of the calibration pool, in words."""
        c = self.curve
        lines = [f"{self.result.facts.name}: Brier score {c['brier']:.4f} over {c['levels']} "
                 f"levels ({c['failures']} planner failures; predicting the base rate for every "
                 f"level would score {c['brier_base_rate']:.4f}); lower is better"]
        pool = self.pool_curve
        fitted = load_model().info.get("fit_date")
        if pool is None:
            lines.append("calibration pool: no stored curve (run scripts/pool_curve.py)")
        elif pool.get("model_fit_date") != fitted:
            lines.append(f"calibration pool: the stored curve belongs to the model fitted "
                         f"{pool.get('model_fit_date')}, not to this one ({fitted}); run "
                         "scripts/pool_curve.py")
        else:
            lines.append(f"calibration pool (held out, seed {pool['pool']['seed']}, "
                         f"{pool['levels']} levels, {pool['failures']} planner failures): "
                         f"Brier score {pool['brier']:.4f} (base rate "
                         f"{pool['brier_base_rate']:.4f}); model fitted "
                         f"{pool.get('model_fit_date', '?')}")
        return lines

    def calibration_tables(self) -> list[tuple[str, pl.DataFrame]]:
        """Bin by bin (deciles of predicted difficulty, fewer bins below 10 levels): the mean
        prediction and the observed failure rate, of the version and of the pool."""
        out = [(self.result.facts.name, bins_table(self.curve["bins"]))]
        if self.pool_curve is not None:
            out.append(("calibration pool", bins_table(self.pool_curve["bins"])))
        return out

    def rotation_table(self) -> pl.DataFrame:
        """The rotation verdict's tier figures, as the rotate command printed them."""
        e = self.rotation
        assert e is not None
        return pl.DataFrame([{
            "tier": t["tier"], "levels": t["levels"],
            f"opt mean {e.prev}": round(t["prev_mean_optimum"], 2),
            f"opt mean {e.new}": round(t["new_mean_optimum"], 2),
            f"difficulty mean {e.prev}": round(t["prev_mean_difficulty"], 4),
            f"difficulty mean {e.new}": round(t["new_mean_difficulty"], 4),
            f"planner {e.prev}": f"{t['prev_planner_solved']}/{t['levels']}",
            f"planner {e.new}": f"{t['new_planner_solved']}/{t['levels']}",
        } for t in e.tiers])

    def rotation_panel_table(self) -> pl.DataFrame:
        """The panel on PREV and NEW side by side: each agent's solved count on both."""
        e = self.rotation
        assert e is not None
        levels = e.solved["levels"]
        return pl.DataFrame([{
            "agent": a["agent"], f"solved {e.prev}": f"{a['prev']}/{levels}",
            f"solved {e.new}": f"{a['new']}/{levels}", "difference": f"{a['new'] - a['prev']:+d}",
            "within tolerance": "yes" if abs(a["new"] - a["prev"]) <= (e.panel_tolerance or 0)
            else "NO"} for a in e.panel])

    def markdown(self) -> str:
        r = self.result
        warning = self.hidden_warning()
        out = [f"# {self._title()}", "", *([f"> **{warning}**", ""] if warning else []),
               self._headline(), "", f"**{self.fitness_line()}**", "", self._model_note(), "",
               "## Version", "", "| field | value |", "| --- | --- |"]
        out += [f"| {k} | {v} |" for k, v in self.metadata]
        if self.rotation is not None:
            lines = self.rotation.lines()
            out += ["", "## Rotation verdict", "", lines[0], "", md_table(self.rotation_table()),
                    "", *[f"- {line}" for line in self.rotation.figure_lines()]]
            if self.rotation.panel:
                out += ["", md_table(self.rotation_panel_table())]
        out += ["", "## Checks", ""]
        for c in r.checks:
            out.append(f"- **{c.status}** {c.name}" + (f": {c.describe(50)}" if _detail(c)
                                                        else ""))
        out += ["", "## Tiers", "", md_table(self.tiers), "",
                "## Deadlocks", "", _DEADLOCK_NOTE, "", md_table(self.deadlocks), "",
                "## Calibration", "", *[f"- {line}" for line in self.calibration_lines()]]
        for name, table in self.calibration_tables():
            out += ["", f"{name}, by bin of predicted difficulty:", "", md_table(table)]
        if r.irt is not None:
            out += ["", "## Difficulty from real results", "", irt_note(r.irt), "",
                    md_table(irt_agents(r.irt)), "", "Hardest levels by empirical difficulty:",
                    "", md_table(irt_levels(r.irt))]
        if self.panel is not None:
            out += ["", "## Agent panel", "", _PANEL_NOTE, "", md_table(self.panel)]
        if r.information is not None:
            out += ["", "## Information curve", "", _INFORMATION_NOTE, "",
                    r.information.statement(), "", md_table(information_table(r.information))]
        if r.against is not None and r.comparison is not None:
            out += ["", f"## {r.facts.name} against {r.against.name}", "",
                    md_table(comparison_tiers(r)), ""]
            out += [f"- {note}" for note in r.comparison.not_compared] or [
                "- every tier and slot compared"]
            out += ["", "### Slot by slot", "", md_table(comparison_slots(r))]
        if r.move is not None:
            out += ["", _MOVE_HEADING, "", r.move.statement, "", md_table(r.move.table())]
        out += ["", "## Plots", ""]
        for name, (caption, _) in self.images.items():
            out += [f"### {caption}", "", f"![{caption}]({name})", ""]
            if name == "legend.png":
                out += [_LEGEND_NOTE, ""]
        return "\n".join(out) + "\n"

    def html(self) -> str:
        r = self.result
        imgs = {name: (caption, base64.b64encode(png).decode("ascii"))
                for name, (caption, png) in self.images.items()}

        def figure(name: str, note: str = "") -> str:
            caption, data = imgs[name]
            return (f"<figure><img alt='{html.escape(caption)}' "
                    f"src='data:image/png;base64,{data}'>"
                    + (f"<figcaption>{html.escape(note)}</figcaption>" if note else "")
                    + "</figure>")

        sections: list[tuple[str, str, str]] = []  # (anchor, heading, body)
        meta = "".join(f"<tr><th>{html.escape(k)}</th><td class='l'>{html.escape(v)}</td></tr>"
                       for k, v in self.metadata)
        sections.append(("version", "Version", f"<table class='meta'>{meta}</table>"))
        if self.rotation is not None:
            lines = self.rotation.lines()
            cls = "pass" if self.rotation.accepted else "fail"
            body = (f"<p><b class='{cls}'>{html.escape(lines[0])}</b></p>"
                    + _html_table(self.rotation_table())
                    + "<ul>" + "".join(f"<li>{html.escape(x)}</li>"
                                       for x in self.rotation.figure_lines())
                    + "</ul>")
            if self.rotation.panel:
                body += _html_table(self.rotation_panel_table())
            sections.append(("rotation", "Rotation verdict", body))
        checks = "".join(
            f"<li><b class='{c.status.lower()}'>{c.status}</b> {html.escape(c.name)}"
            + (f": {html.escape(c.describe(50))}" if _detail(c) else "") + "</li>"
            for c in r.checks)
        sections.append(("checks", "Checks", f"<ul>{checks}</ul>"))
        sections.append(("tiers", "Tiers", _html_table(self.tiers)))
        sections.append(("deadlocks", "Deadlocks",
                         f"<p>{html.escape(_DEADLOCK_NOTE)}</p>" + _html_table(self.deadlocks)))
        calibration = ("<div class='row'>" + figure("calibration.png") + "<div>"
                       + "<ul>" + "".join(f"<li>{html.escape(x)}</li>"
                                          for x in self.calibration_lines()) + "</ul>"
                       + "<div class='row'>" + "".join(
                           f"<div><p class='note'>{html.escape(name)}, by bin of predicted "
                           f"difficulty</p>{_html_table(table)}</div>"
                           for name, table in self.calibration_tables())
                       + "</div></div></div>")
        sections.append(("calibration", "Calibration", calibration))
        if r.irt is not None:
            sections.append(("irt", "Difficulty from real results",
                             f"<p>{html.escape(irt_note(r.irt))}</p>"
                             + _html_table(irt_agents(r.irt))
                             + "<p>Hardest levels by empirical difficulty:</p>"
                             + _html_table(irt_levels(r.irt))))
        if self.panel is not None:
            sections.append(("panel", "Agent panel",
                             f"<p class='note'>{html.escape(_PANEL_NOTE)}</p>"
                             + "<div class='row'>" + figure("panel.png")
                             + f"<div>{_html_table(self.panel)}</div></div>"))
        if r.information is not None:
            sections.append(("information", "Information curve",
                             f"<p class='note'>{html.escape(_INFORMATION_NOTE)}</p>"
                             f"<p>{html.escape(r.information.statement())}</p>"
                             "<div class='row'>" + figure("information.png")
                             + f"<div>{_html_table(information_table(r.information))}</div>"
                             "</div>"))
        if r.against is not None and r.comparison is not None:
            notes = r.comparison.not_compared or ("every tier and slot compared",)
            body = (_html_table(comparison_tiers(r)) + "<ul class='notes'>"
                    + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>")
            sections.append(("against", f"{r.facts.name} against {r.against.name}", body))
        if r.move is not None:
            sections.append(("move", _MOVE_HEADING.lstrip("# "),
                             f"<p>{html.escape(r.move.statement)}</p>"
                             + _html_table(r.move.table())))
        sections.append(("plots", "In file order" if is_imported(r.facts.manifest)
                         else "Along the ramp",
                         figure("optima.png") + figure("difficulty.png")))
        sections.append(("distributions", "Distributions per tier",
                         figure("histograms.png") + figure("pushes_slack.png")))
        sheet = figure("legend.png", _LEGEND_NOTE) + figure("contact_sheet.png")
        sections.append(("sheet", "Contact sheet", sheet))
        if "against_contact_sheet.png" in imgs:
            sections.append(("sheet-against", imgs["against_contact_sheet.png"][0],
                             figure("against_contact_sheet.png")))
        if r.against is not None and r.comparison is not None:
            sections.append(("slots", "Slot by slot", _html_table(comparison_slots(r))))
        nav = " &middot; ".join(f"<a href='#{a}'>{html.escape(h)}</a>" for a, h, _ in sections)
        body = "".join(f"<section id='{a}'><h2>{html.escape(h)}</h2>{b}</section>"
                       for a, h, b in sections)
        warning = self.hidden_warning()
        fit = self.round_fitness()[0]
        head = (f"<h1>{html.escape(self._title())}</h1>"
                + (f"<p class='warning'>{html.escape(warning)}</p>" if warning else "")
                + f"<p class='head {'pass' if r.passed else 'fail'}'>"
                f"{html.escape(self._headline())}</p>"
                f"<p class='head fitness {'pass' if fit else 'fail'}'>"
                f"{html.escape(self.fitness_line())}</p>"
                f"<p class='note'>{html.escape(self._model_note())}</p><nav>{nav}</nav>")
        return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
                f"<title>{html.escape(self._title())}</title><style>{_STYLE}</style></head>"
                f"<body>{head}{body}</body></html>\n")

    def summary(self) -> str:
        r = self.result
        warning = self.hidden_warning()
        lines = [self._title(), *([warning] if warning else []), self._headline(),
                 self.fitness_line(), ""]
        cols = ["tier", "levels", "crates", "opt min", "opt median", "opt max", "difficulty mean",
                "grades 1-5", "planner solved"]
        lines += _text_table(self.tiers.select(cols))
        if r.against is not None and r.comparison is not None:
            lines += ["", f"against {r.against.name}:"]
            if r.comparison.pairs:
                lines += _text_table(comparison_tiers(r))
            lines += [f"- {note}" for note in r.comparison.not_compared]
        if r.move is not None:
            lines += ["", r.move.statement]
        lines += ["", *self.calibration_lines(), ""]
        if r.information is not None:
            lines += [r.information.statement(), ""]
        for c in r.checks:
            lines.append(f"{c.status}  {c.name}" + (f": {c.describe(4)}" if _detail(c) else ""))
        return "\n".join(lines)

    def checks_json(self) -> str:
        """The verdict for programs (``sokoforge versions`` reads it), check by check."""
        r = self.result
        return json.dumps({
            "version": r.facts.name,
            "against": r.against.name if r.against else None,
            "passed": r.passed,
            "fit_for_round": self.round_fitness()[0],
            "checks": [{"name": c.name, "passed": c.passed, "offenders": list(c.offenders),
                        "skipped": c.skipped or None} for c in r.checks],
        }, indent=2) + "\n"

    def files(self) -> dict[str, bytes]:
        """Every file of the report by name: the PNGs, report.md, report.html, checks.json,
        and the rotation verdict (equivalence.json) of a rotated version."""
        out = {name: png for name, (_, png) in self.images.items()}
        out["report.md"] = self.markdown().encode("utf-8")
        out["report.html"] = self.html().encode("utf-8")
        out["checks.json"] = self.checks_json().encode("utf-8")
        if self.result.facts.rotation is not None:
            out[EQUIVALENCE_FILE] = (json.dumps(self.result.facts.rotation, indent=2)
                                     + "\n").encode("utf-8")
        return out

    def write(self, folder: Path) -> list[Path]:
        """Write the report into a fresh folder beside ``folder``, then swap it in: a report
        that fails half-way leaves the previous one whole. The files of ``KEPT`` (written
        there by other commands) are carried over."""
        folder.parent.mkdir(parents=True, exist_ok=True)
        hidden = is_hidden(self.result.facts.manifest)
        with private_writes(hidden):
            fresh = fresh_folder(folder.parent, f".{folder.name}-new-")
            try:
                files = self.files()
                for name, data in files.items():
                    (fresh / name).write_bytes(data)
                for name in KEPT:  # what other commands wrote there outlives a new report
                    if name not in files and (folder / name).is_file():
                        shutil.copy2(folder / name, fresh / name)
                if hidden:  # copy2 keeps the modes of the files it carried over
                    make_private(fresh)
                swap_in(fresh, folder)
            except BaseException:
                shutil.rmtree(fresh, ignore_errors=True)
                raise
        return [folder / name for name in sorted(os.listdir(folder))]


def swap_in(fresh: Path, folder: Path) -> None:
    """Replace ``folder`` (if any) by ``fresh`` with two renames; the old one is then removed.

    Between the renames there is no ``folder`` at all, never one mixing old and new files;
    if the second rename fails the old folder is put back.
    """
    if not folder.exists():
        os.rename(fresh, folder)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{folder.name}-old-", dir=folder.parent))
    os.rmdir(old)  # a free name to move the old report to
    os.rename(folder, old)
    try:
        os.rename(fresh, folder)
    except BaseException:
        os.rename(old, folder)
        raise
    shutil.rmtree(old, ignore_errors=True)


_DEADLOCK_NOTE = ("Recomputed from each board: dead fraction = share of the states reachable "
                  "from the start from which the level can no longer be solved; a first-push "
                  "trap = a push available at the start that leads straight into such a state.")
_INFORMATION_NOTE = (
    "Test information at each ability under the pool's item parameters (report/items.parquet): "
    "a level informs a^2 p (1 - p), a test its levels' sum, and one over the sum's square "
    "root is the standard error of the ability. A session's levels are those choose_block "
    "picks at that ability (content balance and exposure's random top few, mean of a few "
    "draws); the standard ramp's is 100 levels drawn as the pool's, by tier share. The "
    "floor checked: a session informs at least as much as the ramp over the abilities the "
    "ramp spans.")
_LEGEND_NOTE = ("Each kind of cell as the contact sheet below draws it (the agent's view), "
                "and the colours of the level labels.")
_STYLE = ("body{font-family:sans-serif;max-width:1400px;margin:1em auto;padding:0 1em;"
          "color:#222}h1{margin-bottom:0.2em}h2{border-bottom:1px solid #ccc;"
          "padding-bottom:2px;margin-top:1.4em}"
          "table{border-collapse:collapse;font-size:13px;margin:0.4em 0}"
          "td,th{border:1px solid #bbb;padding:3px 7px;text-align:right}"
          "th{background:#eee}td.l{text-align:left}table.meta th{text-align:left}"
          "img{max-width:100%;display:block;margin:0.5em 0}figure{margin:0.6em 0}"
          "figcaption{font-size:13px;color:#555}"
          ".row{display:flex;gap:1.5em;align-items:flex-start;flex-wrap:wrap}"
          ".row figure{flex:0 1 640px}.row>div{flex:1 1 420px}"
          ".pass{color:#1a7f37}.skip{color:#8a6d00}.fail{color:#c62828}.head{font-size:16px;font-weight:bold}"
          ".note{font-size:13px;color:#555}nav{font-size:14px;margin:0.6em 0}"
          "nav a{color:#1f5fa8}ul.notes li{color:#8a4b00}"
          ".warning{background:#fff3cd;border:2px solid #c62828;color:#7a1212;padding:0.5em "
          "0.8em;font-weight:bold}")


def _detail(check: Check) -> bool:
    """A check's detail is shown when it failed or was skipped (the reason)."""
    return not check.passed or bool(check.skipped)


def _html_table(df: pl.DataFrame) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in df.columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(cell_text(v))}</td>" for v in row) + "</tr>"
                   for row in df.iter_rows())
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _text_table(df: pl.DataFrame) -> list[str]:
    cells = [list(df.columns)] + [[cell_text(v) for v in row] for row in df.iter_rows()]
    widths = [max(len(row[i]) for row in cells) for i in range(len(df.columns))]
    return ["  ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
# report/ files other commands write: the difficulty refit, the line's fit, the agent panel,
# the reference's play, a pool's item parameters and their fit
KEPT = (IRT_FILE, LINE_FILE, PANEL_FILE, REFERENCE_FILE, ITEMS_FILE, ITEMS_FIT_FILE)
_MOVE_HEADING = "### How far one agent's score moves between the rounds"
