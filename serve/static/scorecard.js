// A scorecard's replay viewer: the episode's observations, rendered by the server from its
// stored actions, stepped through here. The key kept in this browser (if any) goes along as
// X-API-Key, so the key that played a hidden game sees its replays and no one else does.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const NAMES = {U: "up", D: "down", L: "left", R: "right", ".": "wait", "|": "restart"};
  let replay = null;
  let at = 0;
  let timer = null;

  function showStep(i) {
    at = Math.max(0, Math.min(i, replay.sequence.length - 1));
    Soko.draw($("replay-obs"), replay.pictures[replay.sequence[at]]);
    $("replay-step").textContent = at;
    $("replay-slider").value = at;
    $("replay-action").textContent = at ? `(${NAMES[replay.actions[at - 1]] || ""})` : "(start)";
  }

  function stop() {
    if (timer) clearInterval(timer);
    timer = null;
    $("replay-play").textContent = "play";
  }

  async function open(path) {
    stop();
    const reply = await Soko.api("GET", path);
    if (reply.status !== 200) {
      $("replay").hidden = true;
      $("replay-message").textContent = Soko.detail(reply);
      return;
    }
    replay = reply.data;
    $("replay-message").textContent = "";
    $("replay").hidden = false;
    const outcome = replay.solved ? "solved" : replay.deadlocked ? "deadlocked" : "unsolved";
    $("replay-title").textContent = replay.session_id === undefined
      ? `of level ${replay.episode + 1} (${replay.game}): its optimal solution, `
        + `${replay.steps} moves`
      : `of level ${replay.episode + 1} (${replay.game}): ${outcome} in ${replay.steps} steps, `
        + `optimal ${replay.optimal}`;
    $("replay-steps").textContent = replay.sequence.length - 1;
    $("replay-slider").max = replay.sequence.length - 1;
    Soko.draw($("replay-goal"), replay.goal);
    showStep(0);
    $("replay").scrollIntoView({behavior: "smooth", block: "start"});
  }

  document.querySelectorAll("table[data-session] button[data-episode]").forEach((b) => {
    const session = b.closest("table").dataset.session;
    b.addEventListener("click", () => open(`/api/replays/${session}/episodes/${b.dataset.episode}`));
  });
  // a public game's level played by its optimal solution, in the same viewer
  document.querySelectorAll("table[data-game] button[data-solution]").forEach((b) => {
    const game = b.closest("table").dataset.game;
    b.addEventListener("click", () => open(`/api/solutions/${game}/${b.dataset.solution}`));
  });

  // A hidden game's replay buttons stay hidden unless the key kept here played it.
  document.querySelectorAll("table[data-session][data-owner-only]").forEach(async (t) => {
    if (!Soko.key()) return;
    const reply = await Soko.api("GET", `/api/replays/${t.dataset.session}`);
    if (reply.status === 200 && reply.data && reply.data.owner_view) {
      t.querySelectorAll("button[data-episode]").forEach((b) => { b.hidden = false; });
    }
  });
  // The fair-play review's evidence, for the key that played this scorecard only.
  const evidence = $("review-evidence");
  if (evidence && Soko.key()) {
    Soko.api("GET", `/api/scorecards/${evidence.dataset.scorecard}`).then((reply) => {
      const review = reply.status === 200 && reply.data ? reply.data.review : null;
      if (!review || !review.evidence) return;
      const list = evidence.querySelector("ul");
      review.evidence.forEach((sentence) => {
        const item = document.createElement("li");
        item.textContent = sentence;
        list.appendChild(item);
      });
      evidence.hidden = false;
    });
  }
  $("replay-first").addEventListener("click", () => { stop(); showStep(0); });
  $("replay-prev").addEventListener("click", () => { stop(); showStep(at - 1); });
  $("replay-next").addEventListener("click", () => { stop(); showStep(at + 1); });
  $("replay-slider").addEventListener("input", (ev) => { stop(); showStep(Number(ev.target.value)); });
  $("replay-play").addEventListener("click", () => {
    if (timer) { stop(); return; }
    if (at >= replay.sequence.length - 1) showStep(0);
    $("replay-play").textContent = "pause";
    timer = setInterval(() => {
      if (at >= replay.sequence.length - 1) { stop(); return; }
      showStep(at + 1);
    }, 250);
  });
})();
