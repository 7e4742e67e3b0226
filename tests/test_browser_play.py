"""A person's run in a real browser: headless Chromium (through chromium-driver) plays a public
game with the arrow keys, sees the next level, and finds the solved episode on the scorecard
page; the play page, a scorecard page and the leaderboard are captured and checked non-blank.

``SOKOFORGE_SCREENSHOTS=docs`` also copies the captures there (the README shows them).
"""

from __future__ import annotations

import base64
import io
import os
import shutil
import time
from pathlib import Path

import pytest
from serve_support import Api, server, visible_version

from engine.rules import lurd_to_actions
from serve.games.dataset import load_version
from serve.games.games import Registry

pytestmark = pytest.mark.slow  # every test here takes seconds

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")


@pytest.fixture(autouse=True)
def _chromium_is_installed() -> None:
    # `make test` installs Debian's chromium and chromium-driver: this test runs, never skips.
    assert CHROMIUM and DRIVER, "chromium and chromium-driver are missing: run `make test`"

WAIT = 30.0
ARROWS = {0: "\ue013", 1: "\ue015", 2: "\ue012", 3: "\ue014"}  # WebDriver's arrow-key codes


def browser(profile: Path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--hide-scrollbars", f"--user-data-dir={profile}",
                 "--window-size=1100,1000"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # the console, to read
    return webdriver.Chrome(options=options, service=Service(executable_path=DRIVER))


def until(check, what: str):
    """``check()``'s first truthy value within ``WAIT`` seconds, else a failure naming it."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def capture(driver, path: Path) -> Path:
    """The whole page (beyond the window) as a PNG, checked to show something."""
    from PIL import Image

    size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True,
        "clip": {"x": 0, "y": 0, "width": 1100, "height": int(size["height"]) + 1,
                 "scale": 1}})
    data = base64.b64decode(shot["data"])
    image = Image.open(io.BytesIO(data)).convert("RGB")
    colours = image.getcolors(maxcolors=1 << 20)
    assert image.size[0] == 1100 and image.size[1] > 300
    assert colours is None or len(colours) > 20, f"{path.name} is blank"
    path.write_bytes(data)
    target = os.environ.get("SOKOFORGE_SCREENSHOTS")
    if target:
        shutil.copyfile(path, Path(target) / path.name)
    return path


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("datasets")
    public = visible_version(root, "p1", "practice", "public")["rows"]
    visible_version(root, "h1", "standard", None)
    return {"public": public, "games": Registry([load_version(root, "p1"),
                                                 load_version(root, "h1")])}


def agent_run(base: str, name: str, rows: list[dict], solve: int) -> None:
    """An agent's closed scorecard on the practice game, solving its first ``solve`` levels."""
    client = Api(base)
    client.key = client.ok("POST", "/api/keys", {"name": name}, status=201)["api_key"]
    card = client.ok("POST", "/api/scorecards", {"tags": ["agent"]})["scorecard_id"]
    frame = client.ok("POST", f"/api/scorecards/{card}/games/practice/start")
    for index in range(solve):
        for action in lurd_to_actions(rows[index]["solution"]):
            frame = client.ok("POST", f"/api/sessions/{frame['session_id']}/act",
                              {"action": action})
    client.ok("POST", f"/api/scorecards/{card}/close")


def test_a_person_plays_a_public_game_with_arrow_keys_and_finds_the_run_on_its_pages(
        data, tmp_path):
    from selenium.webdriver.common.by import By

    rows = data["public"]
    with server(data["games"], tmp_path / "s.sqlite") as srv:
        agent_run(srv.base, "planner-256", rows, 4)
        agent_run(srv.base, "random walk", rows, 0)
        driver = browser(tmp_path / "profile")
        try:
            text = lambda css: driver.find_element(By.CSS_SELECTOR, css).text  # noqa: E731
            driver.get(f"{srv.base}/play/standard")  # the hidden game: no play page
            assert "No game 'standard' to play here" in text("h1")
            driver.get(f"{srv.base}/play/practice")
            driver.find_element(By.ID, "name").send_keys("Ada in a browser")
            driver.find_element(By.ID, "begin").click()
            until(lambda: text("#level") == "1", "level 1 on the page")
            assert text("#budget") == str(rows[0]["max_steps"])
            body = driver.find_element(By.TAG_NAME, "body")
            solution = lurd_to_actions(rows[0]["solution"])
            body.send_keys(*(ARROWS[a] for a in solution))
            until(lambda: text("#level") == "2", "the next level after the solve")
            assert "Level 1 solved in" in text("#message")
            assert text("#solved") == "1" and text("#steps") == "0"
            body.send_keys(ARROWS[lurd_to_actions(rows[1]["solution"])[0]])
            until(lambda: text("#steps") == "1", "a move on level 2")
            body.send_keys("r")  # a public game allows restarts: the level, its step kept used
            until(lambda: "back at its start" in text("#message"), "the restarted level")
            assert (text("#level"), text("#steps")) == ("2", "1")
            body.send_keys(ARROWS[lurd_to_actions(rows[1]["solution"])[0]])
            until(lambda: text("#steps") == "2", "a move after the restart")
            capture(driver, tmp_path / "browser-play.png")
            driver.find_element(By.ID, "show-solution").click()  # the run goes on untouched
            until(lambda: driver.find_element(By.ID, "solution").is_displayed(), "a solution")
            assert text("#solution-title").startswith(
                f"level 2: {rows[1]['optimal_moves']} moves")
            assert (text("#level"), text("#steps")) == ("2", "2")

            card = driver.find_element(By.ID, "card-link").get_attribute("href")
            driver.get(card)
            table = driver.find_element(By.CSS_SELECTOR, "table[data-session]")
            first = table.find_elements(By.TAG_NAME, "tr")[1]
            cells = [c.text for c in first.find_elements(By.TAG_NAME, "td")]
            assert cells[:5] == ["1", "solved", str(len(solution)),
                                 str(rows[0]["optimal_moves"]), "no"]
            assert "browser" in text("body")
            first.find_element(By.CSS_SELECTOR, "button[data-episode='0']").click()
            until(lambda: driver.find_element(By.ID, "replay").is_displayed(), "the replay")
            assert text("#replay-steps") == str(len(solution))
            for _ in range(3):
                driver.find_element(By.ID, "replay-next").click()
            assert text("#replay-step") == "3"
            capture(driver, tmp_path / "browser-scorecard.png")
            table.find_element(By.CSS_SELECTOR, "button[data-solution='1']").click()
            until(lambda: "its optimal solution" in text("#replay-title"), "the solution")
            assert text("#replay-steps") == str(rows[1]["optimal_moves"])

            driver.back()  # back to the play page: the run resumes where it was
            until(lambda: text("#level") == "2" and text("#steps") == "2", "the resumed run")
            driver.find_element(By.ID, "finish").click()
            until(lambda: "Scored: 1 of 6" in text("#message"), "the closed scorecard")
            driver.get(f"{srv.base}/leaderboard")
            names = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "td a")]
            assert names == ["planner-256", "Ada in a browser", "random walk"]
            assert "browser" in driver.find_elements(By.CSS_SELECTOR, "tr")[2].text
            capture(driver, tmp_path / "browser-leaderboard.png")
        finally:
            driver.quit()


def test_a_hidden_games_replay_buttons_show_only_for_the_key_that_played_it(data, tmp_path):
    from selenium.webdriver.common.by import By

    with server(data["games"], tmp_path / "s.sqlite") as srv:
        owner, stranger = Api(srv.base), Api(srv.base)
        for client, name in ((owner, "owner"), (stranger, "stranger")):
            client.key = client.ok("POST", "/api/keys", {"name": name}, status=201)["api_key"]
        card = owner.ok("POST", "/api/scorecards")["scorecard_id"]
        frame = owner.ok("POST", f"/api/scorecards/{card}/games/standard/start")
        owner.ok("POST", f"/api/sessions/{frame['session_id']}/act", {"action": 0})
        driver = browser(tmp_path / "profile")
        try:
            buttons = lambda: driver.find_elements(  # noqa: E731
                By.CSS_SELECTOR, "table[data-owner-only] button[data-episode]")
            for key, shown in ((None, False), (stranger.key, False), (owner.key, True)):
                driver.get(f"{srv.base}/")
                driver.execute_script("localStorage.clear();" if key is None else
                                      f"localStorage.setItem('sokoforge.key', '{key}');")
                driver.get(f"{srv.base}/scorecards/{card}")
                assert buttons(), "the played episode has a replay button"
                if shown:
                    until(lambda: all(b.is_displayed() for b in buttons()), "the owner's")
                else:
                    time.sleep(1)  # the script has asked by now, and been told no
                    assert not any(b.is_displayed() for b in buttons())
        finally:
            driver.quit()


def test_the_solution_on_show_follows_the_level_played_and_long_names_stay_in_their_cell(
        data, tmp_path):
    from selenium.webdriver.common.by import By

    rows = data["public"]
    long_name = "W" * 40  # the longest name a key may have, with nowhere to break
    with server(data["games"], tmp_path / "s.sqlite") as srv:
        agent_run(srv.base, long_name, rows, 2)
        driver = browser(tmp_path / "profile")
        try:
            text = lambda css: driver.find_element(By.CSS_SELECTOR, css).text  # noqa: E731
            driver.get(f"{srv.base}/play/practice")
            driver.find_element(By.ID, "begin").click()
            until(lambda: text("#level") == "1", "level 1 on the page")
            driver.find_element(By.ID, "show-solution").click()
            until(lambda: text("#solution-title").startswith(
                f"level 1: {rows[0]['optimal_moves']} moves"), "level 1's solution")
            body = driver.find_element(By.TAG_NAME, "body")
            body.send_keys(*(ARROWS[a] for a in lurd_to_actions(rows[0]["solution"])))
            until(lambda: text("#level") == "2", "the next level after the solve")
            until(lambda: text("#solution-title").startswith(
                f"level 2: {rows[1]['optimal_moves']} moves"),
                "the solution of the level now played")
            capture(driver, tmp_path / "solution-follows.png")

            driver.get(f"{srv.base}/leaderboard")
            cell = driver.find_element(By.CSS_SELECTOR,
                                       "table.board tr:nth-child(2) td:nth-child(2)")
            name = cell.find_element(By.TAG_NAME, "a")
            success = driver.find_element(By.CSS_SELECTOR,
                                          "table.board tr:nth-child(2) td:nth-child(3)")
            assert name.text == name.get_attribute("title") == long_name  # cut short to fit
            right = name.rect["x"] + name.rect["width"]
            assert right <= cell.rect["x"] + cell.rect["width"] <= success.rect["x"] + 1
            capture(driver, tmp_path / "leaderboard-long-name.png")
            # every page so far has an icon: the console shows no failed request
            driver.get(f"{srv.base}/")
            until(lambda: driver.execute_script("return document.readyState") == "complete",
                  "the home page")
            failed = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
            assert failed == []
        finally:
            driver.quit()


def test_the_pages_say_what_each_set_is_and_an_archived_board_links_its_final_standings(
        tmp_path):
    """In the browser, as people read them: an imported public collection is public and in file
    order on its home and play pages, the demo is drawn from a public seed and not called
    hidden, and a closed round's board (not served any more) links its standings' files, not
    itself; the JSON link shows the standings its close wrote."""
    import json

    from selenium.webdriver.common.by import By
    from serve_support import LEVELS

    from pipeline.stages.importing import import_collection
    from pipeline.versions.rounds import RoundBook, open_round
    from pipeline.workers import Workers
    from serve.records.standings import GRACE_SECONDS, close_round

    root = tmp_path / "datasets"
    root.mkdir()
    source = tmp_path / "mine.xsb"
    source.write_text("\n".join(LEVELS))
    import_collection("mine", [source], datasets=root, game="mine",
                      workers=Workers(show_progress=False))
    rows = visible_version(root, "2026-12", "practice", None)["rows"]  # the round's hidden set
    db = tmp_path / "s.sqlite"
    closes = time.time() + 600
    open_round(root, "2026-12", closes)
    with server(Registry([load_version(root, "2026-12")]), db, rounds=RoundBook(root)) as srv:
        agent_run(srv.base, "ann", rows, 2)
    close_round(root, "2026-12", str(db), now=closes + GRACE_SECONDS)
    demo = load_version(Path(__file__).resolve().parent.parent / "datasets", "demo")
    driver = browser(tmp_path / "profile")
    try:
        text = lambda: " ".join(driver.find_element(By.TAG_NAME, "body").text.split())  # noqa: E731
        with server(Registry([load_version(root, "mine")]), db,
                    rounds=RoundBook(root)) as srv:
            driver.get(f"{srv.base}/")
            said = text()
            assert f"{len(LEVELS)} public Sokoban levels, played in the order of its files" in said
            assert "hidden" not in said and "easiest first" not in said
            driver.get(f"{srv.base}/play/mine")
            said = text()
            assert f"{len(LEVELS)} public levels, played in the order of its files" in said
            assert "easiest first" not in said
            driver.get(f"{srv.base}/leaderboard?version=2026-12")
            assert "The round of version 2026-12 is closed" in text()
            assert [a.text for a in driver.find_elements(By.CSS_SELECTOR, "td a")] == ["ann"]
            links = {a.text: a.get_attribute("href")
                     for a in driver.find_elements(By.CSS_SELECTOR, "p.round a")}
            assert links == {kind: f"{srv.base}/api/standings/2026-12{tail}" for kind, tail in (
                ("JSON", ""), ("CSV", "/standings.csv"), ("sha256", "/standings.sha256"))}
            for kind in ("CSV", "sha256"):
                status, _, body = Api(srv.base).raw("GET", links[kind].removeprefix(srv.base))
                name = "standings." + kind.lower()
                assert status == 200 and body == (root / "2026-12" / name).read_bytes()
            driver.find_element(By.LINK_TEXT, "JSON").click()
            until(lambda: driver.current_url == links["JSON"], "the standings")
            shown = json.loads(driver.find_element(By.TAG_NAME, "body").text)
            assert shown == json.loads((root / "2026-12" / "standings.json").read_text())
            assert [e["name"] for e in shown["entries"]] == ["ann"]
        with server(Registry([demo]), tmp_path / "demo.sqlite") as srv:
            driver.get(f"{srv.base}/")
            said = text()
            assert ("100 Sokoban levels drawn from the public seed 2026 (not shown to people "
                    "here), played in order, easiest first") in said
            assert "hidden" not in said
    finally:
        driver.quit()
