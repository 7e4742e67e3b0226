"""The human pages: the landing page, the leaderboards, a scorecard, and play in the browser.

Server-rendered HTML with inline CSS, readable on a phone; the play page and a scorecard's
replay viewer add the package's own scripts (``serve/static``, same origin, nothing else).
"""

from __future__ import annotations

from typing import Any

__all__ = ["STYLE", "landing", "leaderboard", "play", "refusal", "scorecard"]

from html import escape

from serve.arc.arc_wire import game_id

STYLE = """
body{font:16px/1.45 system-ui,sans-serif;max-width:52rem;margin:0 auto;padding:1rem;color:#222}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:1.6rem}
code,pre{font:14px ui-monospace,monospace;background:#f3f3f3;border-radius:4px}
pre{padding:.6rem;overflow-x:auto}code{padding:0 .2rem}
table{border-collapse:collapse;width:100%;font-size:15px}
th,td{padding:.35rem .5rem;border-bottom:1px solid #ddd;text-align:right}
th:nth-child(2),td:nth-child(2){text-align:left}
.wrap{overflow-x:auto}nav a{margin-right:1rem}
.ok{color:#17692e;font-weight:600}.no{color:#a32020}.muted{color:#666}
.tag{display:inline-block;background:#eef;border-radius:3px;padding:0 .35rem;margin-right:.3rem;
font-size:14px;white-space:nowrap}
canvas.board{image-rendering:pixelated;image-rendering:crisp-edges;background:#111;
border-radius:4px;width:min(448px,90vw);height:auto;aspect-ratio:1}
canvas.goal{image-rendering:pixelated;width:128px;height:128px;border-radius:4px}
.boards{display:flex;gap:1rem;align-items:flex-start;flex-wrap:wrap}
.pad{display:grid;grid-template-columns:repeat(3,3.2rem);gap:.3rem;margin:.8rem 0}
.pad button{height:3rem;font-size:1.3rem}
button{font:inherit;padding:.3rem .8rem;border:1px solid #999;border-radius:4px;background:#f6f6f6;
cursor:pointer}button:disabled{opacity:.5;cursor:default}
.status{font-size:1.05rem;margin:.6rem 0}.message{min-height:1.5rem;font-weight:600}
input{font:inherit;padding:.25rem .4rem}td.l,th.l{text-align:left}
td[colspan]{text-align:left;color:#666}
table.board{table-layout:fixed}table.board th{width:5.6rem}table.board th:nth-child(1){width:2rem}
table.board th:nth-child(2){width:auto}table.board td:nth-child(2){overflow-wrap:anywhere}
""" + "".join(  # a ranking's columns after the name (success ... date), each as wide as it needs
    f"table.board:not(.line) th:nth-child({i}){{width:{w}rem}}"
    for i, w in enumerate((4.3, 5.2, 5.4, 4.9, 5.3, 3.4, 6), start=3))


def _page(title: str, body: str, scripts: tuple[str, ...] = ()) -> str:
    tags = "".join(f"<script src='/static/{escape(s)}'></script>" for s in scripts)
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8>"
            f"<meta name=viewport content='width=device-width,initial-scale=1'>"
            f"<title>{escape(title)}</title><link rel=icon href='/static/favicon.svg' "
            f"type='image/svg+xml'><style>{STYLE}</style></head><body>"
            f"<nav><a href='/'>sokoforge</a><a href='/leaderboard'>leaderboard</a>"
            f"<a href='/api/docs'>API</a></nav>{body}{tags}</body></html>")


def landing(spec: dict[str, Any], origin: str) -> str:
    """What is served, how to connect, and the spec's numbers."""
    rows = "".join(
        f"<tr><td>{t['index']}</td><td>{t['crates']} crate{'s' if t['crates'] > 1 else ''}</td>"
        f"<td>{t['levels']}</td><td>{t['range'][0]}-{t['range'][1]}</td>"
        f"<td>{t['optimal_moves']['min']}-{t['optimal_moves']['max']}</td>"
        f"<td>{t['max_steps']['min']}-{t['max_steps']['max']}</td></tr>" for t in spec["tiers"])
    limits = spec["limits"]
    o = escape(origin)
    boards = ", ".join(f"{h}x{w}" for h, w in spec["boards"])
    look = spec["look"]
    drawn = {"shared": "the shared Latent Sokoban environment's look",
             "arc": "the ARC 16-colour look",
             "themed": "a recoloured theme per level"}.get(look["name"], look["name"])
    if look["noise"]:
        drawn += ", with pixel noise"
    versions = [g["version"] for g in (spec.get("game_specs") or {}).values()] or [
        spec["version"]]
    named = ", ".join(f"<code>{escape(v)}</code>" for v in versions)
    body = f"""
<h1>sokoforge: version{'s' if len(versions) > 1 else ''} {named}</h1>{_games(spec)}
{_round_line(spec)}
<p>Game <code>{escape(spec['game'])}</code>: {spec['episodes']} {_what_set(spec)}, played
{_ORDER[spec.get('order', 'ramp')]}. Agents see only 64x64 RGB renders of the board and of its
goal; actions are 0 up, 1 down, 2 left, 3 right.</p>
<p>Boards: <span id=boards>{escape(boards)}</span>.
Look: <code id=look>{escape(look['name'])}</code> ({escape(drawn)}).</p>{_play_link(spec)}
<h2>Connect</h2>
<pre>sokoforge play --url {o} --register YOUR_NAME --agent random</pre>
<p>or by hand: <code>POST {o}/api/keys {{"name"}}</code>, then
<code>POST /api/scorecards</code>,
<code>POST /api/scorecards/ID/games/{escape(spec['game'])}/start</code>,
<code>POST /api/sessions/ID/act {{"action"}}</code> until
<code>GAME_OVER</code>, and <code>POST /api/scorecards/ID/close</code>. Details in the
<a href="/api/docs">API page</a>.</p>
<p>Agents built on the ARC-AGI-3 toolkit (<code>arc-agi</code>) play the same levels unchanged
as game <code>{escape(game_id(spec['version']))}</code>, ACTION1-4 moving up, down, left, right
(ACTION5-7 use a step and do nothing); an empty key gets an anonymous one:</p>
<pre>OPERATION_MODE=online ARC_BASE_URL={o} ARC_API_KEY=YOUR_KEY</pre>
<h2>The set</h2>
<div class=wrap><table><tr><th>tier</th><th>crates</th><th>levels</th><th>episodes</th>
<th>optimal moves</th><th>step budget</th></tr>{rows}</table></div>
<p>levels sha256 <code>{escape(spec['levels_sha256'][:16])}...</code></p>
<h2>Limits</h2>
<p>{limits['keys_per_address_per_day']} keys per address per day,
{limits['scorecards_per_key_per_day']} scorecards per key per day,
{limits['sessions_in_flight_per_key']} sessions in flight per key
({limits['sessions_in_flight_per_address']} per address, {limits['sessions_in_flight_total']} in the
server), up to {limits['max_parallel']} episodes
in parallel; a session expires after {limits['idle_minutes']:g} minutes idle.</p>
"""
    return _page(f"sokoforge {', '.join(versions)}", body)


# how a set is played, by its ``order``: a build's ramp, or an imported collection's files
_ORDER = {"ramp": "in order, easiest first", "file": "in the order of its files"}


def _what_set(spec: dict[str, Any]) -> str:
    """What the levels are, truthfully: public, from a public seed (anyone can redraw them,
    though people do not see them here), or hidden."""
    if spec.get("public"):
        return "public Sokoban levels"
    if spec.get("public_seed") is not None:
        return (f"Sokoban levels drawn from the public seed {escape(str(spec['public_seed']))}"
                " (not shown to people here)")
    return "hidden Sokoban levels"


def _round_line(spec: dict[str, Any]) -> str:
    """A paragraph per served game whose version has a round: open until when, or closed."""
    out = []
    for name, g in (spec.get("game_specs") or {"": spec}).items():
        rnd = g.get("round")
        if rnd:
            out.append(f"<p class=round>{_round_state(g['version'], rnd, name)}</p>")
    return "".join(out)


def _round_state(version: str, rnd: dict[str, Any], game: str = "", on_board: bool = False) -> str:
    """One sentence on a round: when it closes, or that it closed, its board (not on the
    board itself) and its final standings' files."""
    which = f"game <code>{escape(game)}</code>, " if game else ""
    v = escape(version)
    if not rnd["over"]:
        return (f"The round of {which}version <code>{v}</code> is open until "
                f"<b>{escape(rnd['closes'])}</b>; scorecards must be closed by then to be "
                "ranked.")
    files = rnd.get("standings") or {}
    if files:
        links = ", ".join(f"<a href='{escape(files[kind])}'>{label}</a>" for kind, label in (
            ("json", "JSON"), ("csv", "CSV"), ("sha256", "sha256")) if kind in files)
        final = (f"its final standings: {links} (sha256 <code>"
                 f"{escape(str(rnd.get('standings_sha256'))[:16])}...</code>)")
    else:
        final = "its final standings are written when the round is closed"
    board = "" if on_board else f"<a href='/leaderboard?version={v}'>its board</a> and "
    rule = ("published as a practice set, whose play is not ranked" if rnd.get("state") ==
            "published" else "no new scorecards or play")
    return (f"<b>The round of {which}version <code>{v}</code> is closed</b> (at "
            f"{escape(rnd['closes'])}): {rule}; {board}{final}.")


def _play_link(spec: dict[str, Any]) -> str:
    if not spec.get("public"):
        return ""
    return (f"<p>A public game: <a href='/play/{escape(spec['game'])}'>play it in the "
            "browser</a> with the arrow keys.</p>")


def _games(spec: dict[str, Any]) -> str:
    """Every served game, when there are several; the page below describes the first."""
    games = spec.get("game_specs") or {}
    if len(games) < 2:
        return ""
    items = "".join(
        f"<li><code>{escape(name)}</code>: version <code>{escape(g['version'])}</code>, "
        f"{g['episodes']} levels, restarts <code>{escape(g['restarts'])}</code> "
        f"(<a href='/leaderboard?game={escape(name)}'>leaderboard</a>"
        + (f", <a href='/play/{escape(name)}'>play it in the browser</a>" if g.get("public")
           else "") + ")</li>"
        for name, g in games.items())
    return f"<p>Games served (one scorecard may play each once):</p><ul>{items}</ul>"


def _pooled_table(board: dict[str, Any]) -> str:
    """An adaptive game's ranking: each name's ability pooled over its sessions, its equated
    success, and its raw success beside them (not comparable across games)."""
    rows = "".join(
        f"<tr><td>{e['rank']}</td><td><a href='/scorecards/{escape(e['scorecard_id'])}' "
        f"title='{escape(e['name'])}: its latest scorecard'>{escape(e['name'])}</a>"
        f"{_browser_tag(e.get('source'))}{_review_tag(e.get('review'))}"
        f"{_cleared_tag(e.get('cleared'))}</td>"
        f"<td>{e['ability']['theta']:+.2f}</td><td class=muted>{e['ability']['low']:+.2f} to "
        f"{e['ability']['high']:+.2f}</td><td>{_tie(e)}</td>"
        f"<td>{e['equated_success']['value']:.1%}</td><td class=muted>"
        f"{e['equated_success']['low']:.0%}&ndash;{e['equated_success']['high']:.0%}</td>"
        f"<td>{e['scorecards']}</td><td class=muted>{e['success_rate']:.0%}</td>"
        f"<td>{escape(e['submitted_at'] or '')[:10]}</td></tr>" for e in board["entries"])
    if not rows:
        rows = "<tr><td colspan=10>no closed scorecards yet</td></tr>"
    return ("<p class=muted>The adaptive game: each name is ranked by its ability pooled over "
            "all its closed scorecards (not its best one), with its 95% interval; equated "
            "success is the expected success on the standard game's ramp at that ability, "
            "which compares with the standard game. The raw success is near 50% by design: "
            "do not compare it across games.</p>"
            f"<div class=wrap><table class=board><tr><th>#</th><th>name</th><th>ability</th>"
            f"<th title='95% of the pooled posterior'>interval</th>"
            f"<th title='the posterior cannot tell the order with the entry above (p >= 0.05)'>"
            f"tied</th><th>equated success</th><th>interval</th><th>scorecards</th>"
            f"<th title='not comparable across games'>raw success</th><th>date</th></tr>{rows}"
            "</table></div>")


def _board_table(board: dict[str, Any], playable: bool) -> str:
    """One version's ranking (an adaptive game's by pooled ability, ``_pooled_table``); each
    name links to its scorecard's page."""
    rows = "" if board.get("adaptive") else "".join(
        f"<tr><td>{e['rank']}</td><td><a href='/scorecards/{escape(e['scorecard_id'])}' "
        f"title='{escape(e['name'])}'>{escape(e['name'])}</a>{_browser_tag(e.get('source'))}"
        f"{_review_tag(e.get('review'))}{_cleared_tag(e.get('cleared'))}</td>"
        f"<td>{e['success_rate']:.2%}</td><td class=muted>{_interval(e)}</td>"
        f"<td>{_tie(e)}</td><td>{e['move_efficiency']:.3f}</td><td>{e['deadlock_rate']:.2%}</td>"
        f"<td>{e['solved']}/{e['episodes']}</td><td>{escape(e['submitted_at'] or '')[:10]}</td>"
        f"</tr>" for e in board["entries"])
    if not rows:
        rows = "<tr><td colspan=9>no closed scorecards yet</td></tr>"
    game = f"game <code>{escape(board['game'])}</code>, " if board.get("game") else ""
    play = (f" <a class=tag href='/play/{escape(board['game'])}'>play it in the browser</a>"
            if playable else "")
    rnd = (f"<p class=round>{_round_state(board['version'], board['round'], on_board=True)}"
           "</p>"
           if board.get("round") else "")
    bound = (f"<p class=bound>Fair-play bound: {escape(board['bound']['text'])}.</p>"
             if board.get("bound") else "")
    head = f"<h2>{game}version <code>{escape(board['version'])}</code>{play}</h2>{rnd}{bound}"
    if board.get("adaptive"):
        return head + _pooled_table(board)
    return (f"{head}<div class=wrap><table class=board><tr><th>#</th><th>name</th><th>success</th>"
            f"<th title='95% over draws of levels'>interval</th>"
            f"<th title='a paired test over the levels cannot tell it from the entry above'>"
            f"tied</th><th>efficiency</th><th>deadlocks</th><th>solved</th><th>date</th></tr>{rows}"
            f"</table></div>")


def _interval(score: dict[str, Any]) -> str:
    """A Score's success interval as percentages, or nothing when it has none."""
    interval = score.get("success_interval")
    return f"{interval[0]:.0%}&ndash;{interval[1]:.0%}" if interval else ""


def _tie(entry: dict[str, Any]) -> str:
    """The mark of an entry a paired test cannot tell from the one above."""
    if not entry.get("indistinguishable_from_above"):
        return ""
    test = ("the posterior cannot order it with the entry above" if "ability" in entry else
            "paired test over the levels against the entry above")
    return (f"<span class=tag title='{test}: p = {entry['paired_p_above']:.2f}'>&asymp; above"
            "</span>")


def _review_tag(verdict: str | None) -> str:
    """The mark of an entry the fair-play review says needs a person's look (kept ranked)."""
    return (" <span class='tag flag' title='the fair-play review found play that needs a "
            "look (a flag, not a verdict: the ranking is unchanged)'>needs review</span>"
            if verdict == "needs review" else "")


def _cleared_tag(cleared: dict | None) -> str:
    """The mark of an entry a person cleared after reading its source, with the date."""
    if not cleared:
        return ""
    return (" <span class='tag cleared' title='a person read its source and cleared it (a "
            f"mark: the ranking is unchanged)'>cleared {escape(cleared['date'])}</span>")


def _browser_tag(source: str | None) -> str:
    return " <span class=tag title='played by a person in the browser'>browser</span>" if (
        source == "browser") else ""


def _line_table(line: dict[str, Any]) -> str:
    """A line's names on one ability scale, each beside its raw success per version."""
    rows = "".join(
        f"<tr><td>{e['rank']}</td><td>{escape(e['name'])}</td>"
        + (f"<td>{e['scale'] + 1}</td>" if len(line["scales"]) > 1 else "")
        + f"<td>{e['ability']:+.2f}</td><td class=muted>{e['ability_interval'][0]:+.2f} to "
          f"{e['ability_interval'][1]:+.2f}</td><td class=l>"
        + "; ".join(f"{escape(v)} {r['success_rate']:.0%} ({_interval(r)})"
                    for v, r in e["versions"].items()) + "</td></tr>"
        for e in line["entries"])
    scale = "<th>scale</th>" if len(line["scales"]) > 1 else ""
    notes = "".join(f"<li>{escape(n)}</li>" for n in line["notes"])
    return (f"<h2>line {escape(' → '.join(line['versions']))}: ability on one scale</h2>"
            "<p>An item-response model over every closed scorecard of the versions rotated "
            "from one another links them by the names that played several; ability and its "
            "95% interval, beside the raw success on each version played.</p>"
            + (f"<ul>{notes}</ul>" if notes else "")
            + f"<div class=wrap><table class='board line'><tr><th>#</th><th>name</th>{scale}"
              f"<th>ability</th><th>interval</th><th class=l>raw success</th></tr>{rows}"
              "</table></div>")


def leaderboard(boards: list[dict[str, Any]], playable: frozenset[str] = frozenset(),
                lines: list[dict[str, Any]] | None = None) -> str:
    """One ranking table per game and version, with links to the other versions' boards;
    the games in ``playable`` link to their play page; ``lines`` the linked abilities of
    served versions' lines."""
    shown = {b["version"] for b in boards}
    others = " ".join(f"<a href='/leaderboard?version={escape(v)}'>{escape(v)}</a>"
                      for v in boards[0]["versions"] if v not in shown)
    title = ", ".join(b["version"] for b in boards)
    body = ("<h1>Leaderboard</h1><p>Best closed scorecard per name, ranked by success rate, "
            "then move efficiency, then fewer episodes lost (deadlocked, or never played), "
            "then the earlier submission. A name "
            "links to its scorecard; <span class=tag>browser</span> marks a run a person "
            "played on the play page. The interval is where the success rate lies, at 95%, "
            "over other draws of the levels; <span class=tag>&asymp; above</span> marks an "
            "entry that a paired test over the levels cannot tell apart from the one above "
            "it (exact McNemar, p &ge; 0.05); <span class='tag flag'>needs review</span> "
            "an entry the fair-play review flags for a person to look at, and <span "
            "class='tag cleared'>cleared</span> one a person cleared after reading its "
            "source, with the date (neither changes the ranking).</p>"
            + "".join(_board_table(b, b.get("game") in playable
                                   and b["version"] == b["served"].get(b["game"]))
                      for b in boards)
            + "".join(_line_table(line) for line in lines or [])
            + (f"<p>Other versions: {others}</p>" if others else ""))
    return _page(f"sokoforge leaderboard {title}", body)


def refusal(status: int, title: str, detail: str) -> str:
    """A page that says why it cannot be shown (an unknown or hidden game, no scorecard)."""
    return _page(f"sokoforge: {title}", f"<h1>{escape(title)}</h1><p>{escape(detail)}</p>"
                 f"<p class=muted>HTTP {status}</p>")


def play(game: dict[str, Any]) -> str:
    """The play page of one public game: a key, the board, arrow keys and buttons; every move
    goes through the agent protocol (``serve/static/play.js``)."""
    g = {k: escape(str(game[k])) for k in ("name", "version", "episodes", "restarts")}
    restart = ("" if game["restarts"] == "none" else
               "<button id=restart type=button title='the level back to its start (R); the "
               "steps used stay used'>Restart level</button> ")
    body = f"""
<h1>Play <code>{g['name']}</code> <span class=muted>version {g['version']}</span></h1>
<div id=play data-game="{g['name']}" data-episodes="{g['episodes']}"
 data-restarts="{g['restarts']}">
<p>{g['episodes']} public levels, played {_ORDER[game.get('order', 'ramp')]}. Push every crate
onto a goal within the step budget; a move into a wall still uses a step. Your run is scored
and ranked like an agent's, marked <span class=tag>browser</span>.</p>
<section id=who>
<p>Your leaderboard name (leave it empty to play anonymously):
<input id=name maxlength=40 autocomplete=nickname placeholder="name">
<button id=begin type=button>Play</button></p>
<p class=muted>The key this creates is kept in this browser (localStorage) and sent as
<code>X-API-Key</code>, exactly as an agent sends its own. Have a key already?
<input id=paste size=28 placeholder="lsk-..."> <button id=use type=button>Use it</button></p>
</section>
<section id=game hidden>
<p class=status>Level <b id=level>-</b> of {g['episodes']} &middot; steps <b id=steps>-</b> /
<b id=budget>-</b> &middot; solved <b id=solved>0</b> &middot; playing as <b id=who-name></b></p>
<div class=boards><canvas id=obs class=board width=64 height=64
 aria-label="the board"></canvas>
<div><canvas id=goal class=goal width=64 height=64 aria-label="the goal"></canvas>
<p class=muted>the goal</p></div></div>
<p id=message class=message aria-live=polite></p>
<div class=pad><span></span><button type=button data-action=0 aria-label=up>&uarr;</button>
<span></span><button type=button data-action=2 aria-label=left>&larr;</button>
<button type=button data-action=1 aria-label=down>&darr;</button>
<button type=button data-action=3 aria-label=right>&rarr;</button></div>
<p class=muted>Arrow keys or the buttons move; {'R restarts the level; ' if restart else ''}
every move is one <code>act</code> of the agent protocol.</p>
<p>{restart}<button id=finish type=button>Finish and score</button>
<button id=show-solution type=button title="play this level's optimal solution on a board of
its own; your run goes on">Show the solution</button>
<a id=card-link hidden href="#">this run's scorecard</a></p>
<section id=solution hidden><p class=muted>The solution of <span id=solution-title></span></p>
<canvas id=solution-obs class=goal width=64 height=64
 aria-label="the level played by its solution"></canvas></section>
</section>
<p><a id=forget href="#">forget the key kept in this browser</a></p>
</div>"""
    return _page(f"play {game['name']}", body, ("board.js", "play.js"))


def _outcome_row(e: dict[str, Any], replay: bool, owner_only: bool = False) -> str:
    """One episode's outcome; its replay button, when it was played, is hidden for a hidden
    game until the page's script finds the kept key is the one that played it; a public
    game's level also shows its solution."""
    result = ("<span class=ok>solved</span>" if e["solved"] else
              "<span class=no>unsolved</span>" if e["finished"] else
              "<span class=muted>not finished</span>")
    button = (f"<button type=button data-episode={e['index']}"
              f"{' hidden' if owner_only else ''}>replay</button>"
              if replay and e["steps"] else "")
    if replay and not owner_only:
        # the level it played (an adaptive game's episode shows a level of its own choosing)
        button += (f" <button type=button data-solution={e.get('level', e['index'])}>"
                   "solution</button>")
    return (f"<tr><td>{e['index'] + 1}</td><td class=l>{result}</td><td>{e['steps']}</td>"
            f"<td>{e['optimal'] if e['optimal'] is not None else '-'}</td>"
            f"<td>{'yes' if e['deadlocked'] else 'no'}</td><td>{button}</td></tr>")


def _ability(score: dict[str, Any]) -> str:
    """An adaptive game's ability and equated success, and why its raw success is not read
    across games; nothing for a fixed game's Score."""
    ability, equated = score.get("ability"), score.get("equated_success")
    if not ability or not equated:
        return ""
    return (f"<p>Ability <b>{ability['theta']:+.2f}</b> (95% {ability['low']:+.2f} to "
            f"{ability['high']:+.2f}); equated success <b>{equated['value']:.1%}</b> "
            f"({equated['low']:.1%}&ndash;{equated['high']:.1%}): the expected success on the "
            "standard game's ramp at that ability. <span class=muted>The adaptive game shows "
            "each agent levels it solves about half the time, so its raw success rate stays "
            "near 50% and compares with no other game: read the equated success.</span></p>")


def _score(score: dict[str, Any] | None) -> str:
    if not score:
        return "<p class=muted>Not closed yet: no Score.</p>"
    interval = (f", 95% interval {_interval(score)} over draws of levels"
                if score.get("success_interval") else "")
    return _ability(score) + (f"<p>Solved <b>{score['solved']}/{score['episodes']}</b> "
            f"({score['success_rate']:.2%}{interval}), move efficiency "
            f"<b>{score['move_efficiency']:.3f}</b>, deadlocks "
            f"<b>{score['deadlock_rate']:.2%}</b>, "
            f"{score['total_actions']} actions.</p>")


def _review(review: dict[str, Any] | None, scorecard_id: str) -> str:
    """A scorecard's fair-play verdict; its evidence is filled in by the page's script for
    the key that played it."""
    if review is None:
        return ""
    return (f"<p>Fair-play review of <code>{escape(review['version'])}</code>: "
            f"<b>{escape(review['verdict'])}</b>{_review_tag(review['verdict'])}"
            f"{_cleared_tag(review.get('cleared'))}</p>"
            f"<section id=review-evidence data-scorecard='{escape(scorecard_id)}' hidden>"
            "<h2>Review evidence</h2>"
            "<p class=muted>Shown to the key that played this scorecard: each signal against "
            "what an honest agent within 256 dynamics calls a step would show. It triages for "
            "a person's look and proves nothing.</p><ul></ul></section>")


def scorecard(view: dict[str, Any]) -> str:
    """A scorecard's page: its tags, Score and each game's per-episode outcomes, with a
    replay viewer (``serve/static/scorecard.js``) for the episodes one may watch."""
    shown = [t for t in view["tags"] if not (view["source"] == "browser" and t == "browser")]
    tags = _browser_tag(view["source"]).strip() + "".join(
        f"<span class=tag>{escape(str(t))}</span>" for t in shown)
    state = (f"closed {escape(view['closed_at'] or '')}" if view["closed"]
             else "open (still being played)")
    url = view.get("source_url")
    source = f"<p>source: <code>{escape(url)}</code></p>" if url else ""
    games = ""
    for g in view["games"]:
        rows = "".join(_outcome_row(e, True, not g["public"]) for e in g["episodes"])
        who = ("Anyone may watch this public game's replays." if g["public"] else
               "A hidden game: its replays are shown only to the key that played it, when "
               "that key is kept in this browser.")
        # a game's own Score only when the card played several (else it is the card's)
        own = _score(g["score"]) if len(view["games"]) > 1 and g["score"] else ""
        games += (f"<h2>game <code>{escape(g['game'])}</code>, version "
                  f"<code>{escape(g['version'])}</code> <span class=muted>"
                  f"{escape(g['state'].lower().replace('_', ' '))}</span></h2>"
                  f"{own}<p class=muted>{who}</p>"
                  f"<div class=wrap><table data-session='{escape(g['session_id'])}' "
                  f"data-game='{escape(g['game'])}'"
                  f"{'' if g['public'] else ' data-owner-only'}>"
                  f"<tr><th>level</th><th class=l>outcome</th><th>steps</th><th>optimal</th>"
                  f"<th>deadlocked</th><th></th></tr>{rows}</table></div>")
    if not games:
        games = "<p class=muted>No game was started on this scorecard.</p>"
    body = f"""
<h1>Scorecard <code>{escape(view['scorecard_id'])}</code></h1>
<p>by <b>{escape(view['name'])}</b>, opened {escape(view['opened_at'] or '')}, {state}
{('<br>' + tags) if tags else ''}</p>{source}
{_score(view['score'])}
{_review(view.get('review'), view['scorecard_id'])}
{games}
<section id=replay hidden><h2>Replay <span id=replay-title></span></h2>
<div class=boards><canvas id=replay-obs class=board width=64 height=64></canvas>
<div><canvas id=replay-goal class=goal width=64 height=64></canvas><p class=muted>the goal</p>
</div></div>
<p class=status>step <b id=replay-step>0</b> of <b id=replay-steps>0</b>
<span id=replay-action class=muted></span></p>
<p><button id=replay-first type=button>start</button>
<button id=replay-prev type=button>&larr; step</button>
<button id=replay-play type=button>play</button>
<button id=replay-next type=button>step &rarr;</button>
<input id=replay-slider type=range min=0 max=0 value=0 aria-label=step></p></section>
<p id=replay-message class=message aria-live=polite></p>"""
    return _page(f"scorecard {view['scorecard_id']}", body, ("board.js", "scorecard.js"))
