// The play page: a person plays a public game through the agent protocol (a scorecard with
// source "browser", one session, one act per move), so the run is stored, scored and ranked.
"use strict";

(() => {
  const root = document.getElementById("play");
  const game = root.dataset.game;
  const episodes = Number(root.dataset.episodes);
  const restarts = root.dataset.restarts;
  const RUN = `sokoforge.run.${game}`;
  const $ = (id) => document.getElementById(id);
  const KEYS = {ArrowUp: 0, ArrowDown: 1, ArrowLeft: 2, ArrowRight: 3};
  let run = null;       // {card, session}
  let frame = null;     // the last Frame
  let solved = 0;
  const queue = [];     // moves waiting for the previous one's answer, in order
  let busy = false;

  const say = (text) => { $("message").textContent = text; };

  function show(f) {
    frame = f;
    $("game").hidden = false;
    $("who").hidden = true;
    $("who-name").textContent = localStorage.getItem(Soko.NAME) || "anonymous";
    const link = $("card-link");
    link.href = `/scorecards/${run.card}`;
    link.hidden = false;
    if (f.state === "GAME_OVER") {
      $("level").textContent = episodes;
      $("steps").textContent = f.episode.steps_used;
      $("budget").textContent = f.episode.max_steps;
      hideSolution();
      return;
    }
    // a solution on show follows the game to the level being played
    if (solutionOf !== null && solutionOf !== f.episode.index) showSolution(f.episode.index);
    $("level").textContent = f.episode.index + 1;
    $("steps").textContent = f.episode.steps_used;
    $("budget").textContent = f.episode.max_steps;
    Soko.draw($("obs"), f.observation.obs);
    Soko.draw($("goal"), f.observation.goal);
  }

  async function ensureKey() {
    if (Soko.key()) return true;
    const name = $("name").value.trim();
    const reply = name ? await Soko.api("POST", "/api/keys", {name})
                       : await Soko.api("GET", "/api/games/anonkey");
    if (reply.status !== 200 && reply.status !== 201) {
      say(Soko.detail(reply));
      return false;
    }
    Soko.keep(reply.data.api_key, name);
    return true;
  }

  async function resume() {
    const saved = JSON.parse(localStorage.getItem(RUN) || "null");
    if (!saved) return false;
    run = saved;
    const reply = await Soko.api("GET", `/api/sessions/${run.session}`);
    if (reply.status === 200 && reply.data.state === "IN_PROGRESS") {
      show(reply.data);
      say("Welcome back: your run goes on where you left it.");
      return true;
    }
    localStorage.removeItem(RUN);
    run = null;
    return false;
  }

  async function begin() {
    if (!(await ensureKey())) return;
    if (await resume()) return;
    const card = await Soko.api("POST", "/api/scorecards",
                                {source: "browser", tags: ["browser"]});
    if (card.status !== 200) { say(Soko.detail(card)); return; }
    const id = card.data.scorecard_id;
    const start = await Soko.api("POST", `/api/scorecards/${id}/games/${game}/start`);
    if (start.status !== 200) { say(Soko.detail(start)); return; }
    run = {card: id, session: start.data.session_id};
    localStorage.setItem(RUN, JSON.stringify(run));
    solved = 0;
    $("solved").textContent = 0;
    show(start.data);
    say("Level 1: go.");
  }

  async function finish() {
    const reply = await Soko.api("POST", `/api/scorecards/${run.card}/close`);
    localStorage.removeItem(RUN);
    if (reply.status !== 200) { say(Soko.detail(reply)); return; }
    const s = reply.data;
    say(`Scored: ${s.solved} of ${s.episodes} levels solved. See the scorecard below.`);
    document.querySelectorAll(".pad button, #restart, #finish").forEach((b) => {
      b.disabled = true;
    });
  }

  async function act(action) {
    const before = frame.episode;
    const reply = await Soko.api("POST", `/api/sessions/${run.session}/act`, {action});
    if (reply.status !== 200) { say(Soko.detail(reply)); return; }
    const f = reply.data;
    show(f);
    if (f.last && f.last.episode_done) {
      const level = before.index + 1;
      if (f.last.solved) {
        solved += 1;
        $("solved").textContent = solved;
        say(f.state === "GAME_OVER" ? `Level ${level} solved: that was the last one.`
                                    : `Level ${level} solved in ${before.steps_used + 1} steps! `
                                      + `Next: level ${level + 1}.`);
      } else {
        say(f.state === "GAME_OVER" ? `Out of steps on level ${level}: that was the last one.`
                                    : `Out of steps on level ${level}. Next: level ${level + 1}.`);
      }
      if (f.state === "GAME_OVER") await finish();
    } else {
      say("");
    }
  }

  async function restart() {
    const reply = await Soko.api("POST", `/api/sessions/${run.session}/reset`, {});
    if (reply.status !== 200) { say(Soko.detail(reply)); return; }
    show(reply.data);
    say(reply.data.restarted === "game" ? "The whole game starts again."
                                        : "The level is back at its start.");
  }

  // moves and restarts run one at a time, in the order they were asked for
  function enqueue(job) {
    queue.push(job);
    if (!busy) drain();
  }

  async function drain() {
    busy = true;
    while (queue.length) {
      const job = queue.shift();
      if (!frame || frame.state !== "IN_PROGRESS") { queue.length = 0; break; }
      try { await job(); } catch (e) { say("The server could not be reached; try again."); }
    }
    busy = false;
  }

  document.addEventListener("keydown", (ev) => {
    if ($("game").hidden || ev.target.tagName === "INPUT") return;
    if (ev.key in KEYS) {
      ev.preventDefault();
      enqueue(() => act(KEYS[ev.key]));
    } else if ((ev.key === "r" || ev.key === "R") && restarts !== "none") {
      enqueue(restart);
    }
  });
  document.querySelectorAll(".pad button").forEach((b) => {
    b.addEventListener("click", () => enqueue(() => act(Number(b.dataset.action))));
  });
  if ($("restart")) $("restart").addEventListener("click", () => enqueue(restart));

  // The current level's optimal solution, played on its own board beside the game (a public
  // game's levels are public; the run goes on untouched), until the game moves on.
  let shown = null;       // the timer of the solution's animation
  let solutionOf = null;  // the level (episode index) whose solution is asked for or shown

  function hideSolution() {
    clearInterval(shown);
    solutionOf = null;
    $("solution").hidden = true;
  }

  async function showSolution(index) {
    solutionOf = index;
    const reply = await Soko.api("GET", `/api/solutions/${game}/${index}`);
    if (solutionOf !== index) return;  // the game moved on meanwhile
    if (reply.status !== 200) { say(Soko.detail(reply)); return; }
    const s = reply.data;
    clearInterval(shown);
    $("solution").hidden = false;
    $("solution-title").textContent =
      `level ${s.episode + 1}: ${s.steps} moves (${s.actions})`;
    let at = 0;
    Soko.draw($("solution-obs"), s.pictures[s.sequence[0]]);
    shown = setInterval(() => {
      at = at + 1 < s.sequence.length ? at + 1 : 0;
      Soko.draw($("solution-obs"), s.pictures[s.sequence[at]]);
    }, 300);
  }

  $("show-solution").addEventListener("click", () => {
    if (!frame || !frame.episode || frame.state !== "IN_PROGRESS") return;
    showSolution(frame.episode.index);
  });
  $("finish").addEventListener("click", () => { queue.length = 0; finish(); });
  $("begin").addEventListener("click", begin);
  $("name").addEventListener("keydown", (ev) => { if (ev.key === "Enter") begin(); });
  $("use").addEventListener("click", () => {
    const key = $("paste").value.trim();
    if (key) { Soko.keep(key, ""); begin(); }
  });
  $("forget").addEventListener("click", (ev) => {
    ev.preventDefault();
    Soko.forget();
    localStorage.removeItem(RUN);
    location.reload();
  });
  if (Soko.key()) begin();
})();
