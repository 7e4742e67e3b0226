"""The two human pages: a landing page with the spec numbers and the leaderboard table.

Plain server-rendered HTML with inline CSS: fast, no scripts, readable on a phone.
"""

from __future__ import annotations

from html import escape

STYLE = """
body{font:16px/1.45 system-ui,sans-serif;max-width:52rem;margin:0 auto;padding:1rem;color:#222}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:1.6rem}
code,pre{font:14px ui-monospace,monospace;background:#f3f3f3;border-radius:4px}
pre{padding:.6rem;overflow-x:auto}code{padding:0 .2rem}
table{border-collapse:collapse;width:100%;font-size:15px}
th,td{padding:.35rem .5rem;border-bottom:1px solid #ddd;text-align:right}
th:nth-child(2),td:nth-child(2){text-align:left}
.wrap{overflow-x:auto}nav a{margin-right:1rem}
"""


def _page(title: str, body: str) -> str:
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8>"
            f"<meta name=viewport content='width=device-width,initial-scale=1'>"
            f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>"
            f"<nav><a href='/'>sokoforge</a><a href='/leaderboard'>leaderboard</a>"
            f"<a href='/api/docs'>API</a></nav>{body}</body></html>")


def landing(spec: dict, origin: str) -> str:
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
    body = f"""
<h1>sokoforge: version <code>{escape(spec['version'])}</code></h1>{_games(spec)}
<p>Game <code>{escape(spec['game'])}</code>: {spec['episodes']} hidden Sokoban levels, played in
order, easiest first. Agents see only 64x64 RGB renders of the board and of its goal; actions are
0 up, 1 down, 2 left, 3 right.</p>
<p>Boards: <span id=boards>{escape(boards)}</span>.
Look: <code id=look>{escape(look['name'])}</code> ({escape(drawn)}).</p>
<h2>Connect</h2>
<pre>sokoforge play --url {o} --register YOUR_NAME --agent random</pre>
<p>or by hand: <code>POST {o}/api/keys {{"name"}}</code>, then
<code>POST /api/scorecards</code>,
<code>POST /api/scorecards/ID/games/{escape(spec['game'])}/start</code>,
<code>POST /api/sessions/ID/act {{"action"}}</code> until
<code>GAME_OVER</code>, and <code>POST /api/scorecards/ID/close</code>. Details in the
<a href="/api/docs">API page</a>.</p>
<p>Agents built on the ARC-AGI-3 toolkit (<code>arc-agi</code>) play the same levels unchanged
as game <code>sokoban-{escape(spec['version'])}</code>, ACTION1-4 moving up, down, left, right
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
({limits['sessions_in_flight_total']} in the server), up to {limits['max_parallel']} episodes
in parallel; a session expires after {limits['idle_minutes']:g} minutes idle.</p>
"""
    return _page(f"sokoforge {spec['version']}", body)


def _games(spec: dict) -> str:
    """Every served game, when there are several; the page below describes the first."""
    games = spec.get("game_specs") or {}
    if len(games) < 2:
        return ""
    items = "".join(
        f"<li><code>{escape(name)}</code>: version <code>{escape(g['version'])}</code>, "
        f"{g['episodes']} levels, restarts <code>{escape(g['restarts'])}</code> "
        f"(<a href='/leaderboard?game={escape(name)}'>leaderboard</a>)</li>"
        for name, g in games.items())
    return f"<p>Games served (one scorecard may play each once):</p><ul>{items}</ul>"


def leaderboard(board: dict) -> str:
    """The ranking of one version as a table, with links to the other versions' boards."""
    rows = "".join(
        f"<tr><td>{e['rank']}</td><td>{escape(e['name'])}</td><td>{e['success_rate']:.2%}</td>"
        f"<td>{e['move_efficiency']:.3f}</td><td>{e['deadlock_rate']:.2%}</td>"
        f"<td>{e['solved']}/{e['episodes']}</td><td>{escape(e['submitted_at'] or '')[:10]}</td>"
        f"</tr>" for e in board["entries"])
    if not rows:
        rows = "<tr><td colspan=7>no closed scorecards yet</td></tr>"
    others = " ".join(f"<a href='/leaderboard?version={escape(v)}'>{escape(v)}</a>"
                      for v in board["versions"] if v != board["version"])
    body = (f"<h1>Leaderboard: version <code>{escape(board['version'])}</code></h1>"
            f"<p>Best closed scorecard per name, ranked by success rate, then move efficiency, "
            f"then fewer deadlocks, then the earlier submission.</p>"
            f"<div class=wrap><table><tr><th>#</th><th>name</th><th>success</th>"
            f"<th>efficiency</th><th>deadlocks</th><th>solved</th><th>date</th></tr>{rows}"
            f"</table></div>" + (f"<p>Other versions: {others}</p>" if others else ""))
    return _page(f"sokoforge leaderboard {board['version']}", body)
