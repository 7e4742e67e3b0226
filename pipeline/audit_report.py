"""The audit's outputs: plots, contact sheet, report.md, a self-contained report.html, summary.

Images are written as PNG files next to report.md and inlined as base64 in report.html, so the
HTML opens offline with nothing beside it.
"""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

from engine.render import render  # noqa: E402
from pipeline.audit import AuditResult, Check, VersionFacts, tier_summary  # noqa: E402
from pipeline.difficulty import load_model  # noqa: E402
from pipeline.tables import write_text  # noqa: E402

_TIER_COLOURS = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02")
_DPI = 110


def _colour(tier: int) -> str:
    return _TIER_COLOURS[tier % len(_TIER_COLOURS)]


def _png(fig: plt.Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=_DPI, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def plot_optima(facts: VersionFacts, other: VersionFacts | None = None) -> bytes:
    """Optimal moves against play order, each slot's band drawn as a bar behind its point."""
    t = facts.table
    fig, ax = plt.subplots(figsize=(11, 4.2))
    x = t["index"].to_numpy()
    ax.bar(x, t["band_hi"].to_numpy() - t["band_lo"].to_numpy() + 1,
           bottom=t["band_lo"].to_numpy() - 0.5, width=0.8, color="#cccccc", label="slot band")
    for tier, part in t.group_by("tier", maintain_order=True):
        ok = part["planner_solved"].to_numpy()
        px, py = part["index"].to_numpy(), part["optimal_moves"].to_numpy()
        ax.scatter(px[ok], py[ok], s=22, color=_colour(tier[0]), label=f"tier {tier[0]}")
        ax.scatter(px[~ok], py[~ok], s=30, facecolors="none", edgecolors=_colour(tier[0]),
                   linewidths=1.4)
    if other is not None:
        ax.plot(other.table["index"].to_numpy(), other.table["optimal_moves"].to_numpy(),
                color="black", lw=1, alpha=0.6, label=other.name)
    ax.set_xlabel("play order (index); hollow = reference planner failed")
    ax.set_ylabel("optimal moves")
    ax.set_title(f"{facts.name}: optimal moves and slot bands")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=9, ncol=3)
    return _png(fig)


def plot_difficulty(facts: VersionFacts, other: VersionFacts | None = None) -> bytes:
    """Difficulty against play order with the fixed grade cut points as horizontal lines."""
    t = facts.table
    fig, ax = plt.subplots(figsize=(11, 4.2))
    for cut in load_model().grade_cuts:
        ax.axhline(cut, color="#999999", lw=0.8, ls="--")
    for tier, part in t.group_by("tier", maintain_order=True):
        ax.plot(part["index"].to_numpy(), part["difficulty"].to_numpy(), "o-", ms=4,
                color=_colour(tier[0]), label=f"tier {tier[0]}")
    if other is not None:
        ax.plot(other.table["index"].to_numpy(), other.table["difficulty"].to_numpy(),
                color="black", lw=1, alpha=0.6, label=other.name)
    ax.set_xlabel("play order (index); dashed lines: grade cut points")
    ax.set_ylabel("difficulty (P planner fails)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(f"{facts.name}: difficulty along the ramp")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=9, ncol=3)
    return _png(fig)


def plot_histograms(facts: VersionFacts) -> bytes:
    """Per tier: histogram of optimal moves (top row) and of difficulty (bottom row)."""
    parts = list(facts.table.group_by("tier", maintain_order=True))
    fig, axes = plt.subplots(2, len(parts), figsize=(3.2 * len(parts) + 1, 5.4), squeeze=False)
    for col, (tier, part) in enumerate(parts):
        opt = part["optimal_moves"].to_numpy()
        axes[0, col].hist(opt, bins=range(int(opt.min()), int(opt.max()) + 2),
                          color=_colour(tier[0]))
        axes[0, col].set_title(f"tier {tier[0]} ({part.height} levels)")
        axes[0, col].set_xlabel("optimal moves")
        axes[1, col].hist(part["difficulty"].to_numpy(), bins=np.linspace(0, 1, 11),
                          color=_colour(tier[0]))
        axes[1, col].set_xlabel("difficulty")
    axes[0, 0].set_ylabel("levels")
    axes[1, 0].set_ylabel("levels")
    fig.tight_layout()
    return _png(fig)


def contact_sheet(facts: VersionFacts, per_row: int = 10, scale: int = 2) -> bytes:
    """Every level's 64x64 observation, labelled with index, optimum and grade."""
    n = len(facts.levels)
    per_row = max(1, min(per_row, n))
    rows = max(1, -(-n // per_row))
    tile, gap, label = 64 * scale, 8, 22
    cell_w, cell_h = tile + gap, tile + gap + label
    sheet = np.full((rows * cell_h, per_row * cell_w, 3), 255, dtype=np.uint8)
    for i, level in enumerate(facts.levels):
        r, c = divmod(i, per_row)
        y, x = r * cell_h + label, c * cell_w + gap // 2
        sheet[y:y + tile, x:x + tile] = np.kron(render(level), np.ones((scale, scale, 1),
                                                                        dtype=np.uint8))
    dpi = 100
    fig = plt.figure(figsize=(sheet.shape[1] / dpi, sheet.shape[0] / dpi + 0.4), dpi=dpi)
    ax = fig.add_axes((0, 0, 1, sheet.shape[0] / (sheet.shape[0] + 40)))
    ax.imshow(sheet, interpolation="nearest")
    ax.axis("off")
    for i, r in enumerate(facts.table.iter_rows(named=True)):
        row, col = divmod(i, per_row)
        mark = " x" if not r["planner_solved"] else ""
        ax.text(col * cell_w + gap // 2 + tile / 2, row * cell_h + label - 5,
                f"#{r['index']} opt {r['optimal_moves']} g{r['grade']}{mark}", ha="center",
                va="bottom", fontsize=9, color=_colour(r["tier"]))
    fig.suptitle(f"{facts.name}: every level as the agent sees it "
                 "(#index, optimal moves, grade; x = planner failed)", fontsize=11, y=0.995)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    return buf.getvalue()


def _md_table(df: pl.DataFrame) -> str:
    head = "| " + " | ".join(df.columns) + " |"
    sep = "| " + " | ".join("---" for _ in df.columns) + " |"
    body = ["| " + " | ".join(_cell(v) for v in row) + " |" for row in df.iter_rows()]
    return "\n".join([head, sep, *body])


def _cell(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.3f}".rstrip("0").rstrip(".") if v != int(v) else str(int(v))
    if isinstance(v, bool):
        return "yes" if v else "no"
    return "" if v is None else str(v)


def comparison_tiers(result: AuditResult) -> pl.DataFrame:
    """Per tier, both versions side by side: optimum, difficulty, grades, planner solved."""
    a, b = result.facts, result.against
    assert b is not None
    rows = []
    for t in sorted(set(a.table["tier"].to_list()) | set(b.table["tier"].to_list())):
        pa_, pb = a.table.filter(pl.col("tier") == t), b.table.filter(pl.col("tier") == t)
        rows.append({
            "tier": t, f"levels {a.name}": pa_.height, f"levels {b.name}": pb.height,
            f"opt mean {a.name}": _mean(pa_["optimal_moves"]),
            f"opt mean {b.name}": _mean(pb["optimal_moves"]),
            f"difficulty mean {a.name}": _mean(pa_["difficulty"]),
            f"difficulty mean {b.name}": _mean(pb["difficulty"]),
            f"planner {a.name}": f"{int(pa_['planner_solved'].sum())}/{pa_.height}",
            f"planner {b.name}": f"{int(pb['planner_solved'].sum())}/{pb.height}",
        })
    return pl.DataFrame(rows)


def _mean(s: pl.Series) -> float:
    return round(float(s.mean()), 3) if s.len() else float("nan")


def comparison_slots(result: AuditResult) -> pl.DataFrame:
    """Slot by slot (tier, slot): both versions' optimum, difficulty, grade, planner outcome."""
    a, b = result.facts, result.against
    assert b is not None
    cols = ["tier", "slot", "index", "n_crates", "optimal_moves", "difficulty", "grade",
            "planner_solved"]
    left = a.table.select(cols)
    right = b.table.select(cols)
    joined = left.join(right, on=["tier", "slot"], how="full", suffix=f" {b.name}",
                       coalesce=True, maintain_order="left_right")
    joined = joined.sort(["tier", "slot"], maintain_order=True)
    return joined.rename({c: f"{c} {a.name}" for c in cols[2:]}).with_columns(
        pl.col(f"difficulty {a.name}").round(3), pl.col(f"difficulty {b.name}").round(3))


class Report:
    """All pieces of one audit report, rendered as Markdown, HTML and a terminal summary."""

    def __init__(self, result: AuditResult) -> None:
        self.result = result
        facts, other = result.facts, result.against
        self.tiers = tier_summary(facts)
        self.images = {
            "optima.png": ("Optimal moves against play order", plot_optima(facts, other)),
            "difficulty.png": ("Difficulty against play order", plot_difficulty(facts, other)),
            "histograms.png": ("Per-tier histograms", plot_histograms(facts)),
            "contact_sheet.png": ("Contact sheet", contact_sheet(facts)),
        }
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
        game = r.facts.manifest.get("game") or r.facts.spec.name
        return (f"{r.facts.table.height} levels, game {game}; "
                f"reference planner solves {solved}/{r.facts.table.height}; {verdict}")

    def _model_note(self) -> str:
        model = load_model()
        held = model.info.get("held_out", {})
        fit = model.info.get("fit", {})
        return (f"difficulty = probability that the reference planner fails, from the model in "
                f"pipeline/specs/difficulty.json (fitted {model.info.get('fit_date', '?')} on "
                f"{fit.get('levels', '?')} levels; held-out AUC {held.get('auc', '?')}, optimal "
                f"length alone {held.get('auc_optimal_moves', '?')}); grade cut points "
                f"{list(model.grade_cuts)}")

    def markdown(self) -> str:
        r = self.result
        out = [f"# {self._title()}", "", self._headline(), "", self._model_note(), "",
               "## Tiers", "",
               _md_table(self.tiers), "", "## Checks", ""]
        for c in r.checks:
            out.append(f"- **{c.status}** {c.name}" + (f": {c.describe(50)}" if _detail(c)
                                                        else ""))
        if r.against is not None:
            out += ["", f"## {r.facts.name} against {r.against.name}", "",
                    _md_table(comparison_tiers(r)), "", "### Slot by slot", "",
                    _md_table(comparison_slots(r))]
        out += ["", "## Plots", ""]
        for name, (caption, _) in self.images.items():
            out += [f"### {caption}", "", f"![{caption}]({name})", ""]
        return "\n".join(out) + "\n"

    def html(self) -> str:
        r = self.result
        parts = [f"<h1>{html.escape(self._title())}</h1>",
                 f"<p class='head'>{html.escape(self._headline())}</p>",
                 f"<p>{html.escape(self._model_note())}</p>",
                 "<h2>Tiers</h2>", _html_table(self.tiers), "<h2>Checks</h2><ul>"]
        for c in r.checks:
            detail = f": {html.escape(c.describe(50))}" if _detail(c) else ""
            parts.append(f"<li><b class='{c.status.lower()}'>{c.status}</b> "
                         f"{html.escape(c.name)}{detail}</li>")
        parts.append("</ul>")
        if r.against is not None:
            parts += [f"<h2>{html.escape(r.facts.name)} against {html.escape(r.against.name)}"
                      "</h2>", _html_table(comparison_tiers(r))]
        for name, (caption, png) in self.images.items():
            data = base64.b64encode(png).decode("ascii")
            parts.append(f"<h2>{html.escape(caption)}</h2>"
                         f"<img alt='{html.escape(name)}' src='data:image/png;base64,{data}'>")
        if r.against is not None:
            parts += ["<h2>Slot by slot</h2>", _html_table(comparison_slots(r))]
        style = ("body{font-family:sans-serif;max-width:1400px;margin:1em auto;padding:0 1em}"
                 "table{border-collapse:collapse;font-size:13px}"
                 "td,th{border:1px solid #bbb;padding:3px 7px;text-align:right}"
                 "th{background:#eee}img{max-width:100%;display:block;margin:0.5em 0}"
                 ".pass{color:#1a7f37}.skip{color:#8a6d00}.fail{color:#c62828}.head{font-size:15px}")
        return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
                f"<title>{html.escape(self._title())}</title><style>{style}</style></head>"
                f"<body>{''.join(parts)}</body></html>\n")

    def summary(self) -> str:
        r = self.result
        lines = [self._title(), self._headline(), ""]
        cols = ["tier", "levels", "crates", "opt min", "opt median", "opt max", "difficulty mean",
                "grades 1-5", "planner solved"]
        lines += _text_table(self.tiers.select(cols))
        if r.against is not None:
            lines += ["", f"against {r.against.name}:"]
            lines += _text_table(comparison_tiers(r))
        lines.append("")
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
            "checks": [{"name": c.name, "passed": c.passed, "offenders": list(c.offenders),
                        "skipped": c.skipped or None} for c in r.checks],
        }, indent=2) + "\n"

    def write(self, folder: Path) -> list[Path]:
        """Write report.md, its PNGs, report.html and checks.json into ``folder``."""
        folder.mkdir(parents=True, exist_ok=True)
        written = []
        for name, (_, png) in self.images.items():
            (folder / name).write_bytes(png)
            written.append(folder / name)
        for name, text in (("report.md", self.markdown()), ("report.html", self.html()),
                           ("checks.json", self.checks_json())):
            write_text(text, folder / name)
            written.append(folder / name)
        return written


def _html_table(df: pl.DataFrame) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in df.columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_cell(v))}</td>" for v in row) + "</tr>"
                   for row in df.iter_rows())
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _text_table(df: pl.DataFrame) -> list[str]:
    cells = [list(df.columns)] + [[_cell(v) for v in row] for row in df.iter_rows()]
    widths = [max(len(row[i]) for row in cells) for i in range(len(df.columns))]
    return ["  ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)) for row in cells]


def _detail(check: Check) -> bool:
    """A check's detail is shown when it failed or was skipped (the reason)."""
    return not check.passed or bool(check.skipped)
