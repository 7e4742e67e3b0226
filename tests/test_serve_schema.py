"""The OpenAPI document is the truth: schemathesis drives every operation from it, with every
check on, and the answers of a whole game played by hand match their declared schemas."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema_rs
import pytest
from serve_support import Api, server

from engine.rules import lurd_to_actions

HERE = Path(__file__).resolve().parent
EXAMPLES = 15  # per operation and phase: about 1,300 cases, 20 s or so on a shared core


@pytest.fixture(scope="module")
def srv(data, tmp_path_factory):
    db = tmp_path_factory.mktemp("db") / "store.sqlite"
    big = 10 ** 6  # the fuzzer opens many keys, scorecards and sessions: no limit may trip
    with server(data["served"], db, keys_per_address_per_day=big,
                scorecards_per_key_per_day=big, sessions_per_key=big,
                sessions_total=big) as running:
        yield running


@pytest.mark.slow
def test_schemathesis_finds_no_failure_with_every_check_on(srv, tmp_path):
    key = Api(srv.base).ok("POST", "/api/keys", {"name": "fuzzer"}, status=201)["api_key"]
    report = tmp_path / "junit.xml"
    run = subprocess.run(
        [sys.executable, "-m", "schemathesis.cli", "--config-file",
         str(HERE / "schemathesis.toml"), "run", f"{srv.base}/api/openapi.json",
         "--checks", "all", "--header", f"X-API-Key: {key}", "--max-examples", str(EXAMPLES),
         "--phases", "examples,coverage,fuzzing,stateful", "--workers", "1",
         "--seed", "2026", "--report", "junit", "--report-junit-path", str(report),
         "--no-color"],
        capture_output=True, text=True, timeout=900, cwd=tmp_path,  # its cache stays there
        env={**os.environ, "SCHEMATHESIS_HOOKS": ""})
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-8000:]
    cases = re.search(r"(\d+) generated, (\d+) passed", out)
    assert cases and int(cases.group(1)) > 1000, out[-3000:]
    print(f"schemathesis: {cases.group(0)}")


def _json_schema(node: object) -> object:
    """An OpenAPI 3.0 schema as plain JSON Schema: ``nullable`` becomes "or null"."""
    if isinstance(node, list):
        return [_json_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _json_schema(v) for k, v in node.items() if k != "nullable"}
    return {"anyOf": [out, {"type": "null"}]} if node.get("nullable") else out


def _validator(doc: dict, path: str, method: str, status: int) -> jsonschema_rs.Validator:
    schema = (doc["paths"][path][method]["responses"][str(status)]["content"]
              ["application/json"]["schema"])
    return jsonschema_rs.Draft4Validator(_json_schema({**schema,
                                                       "components": doc["components"]}))


def test_every_answer_of_a_played_game_matches_its_declared_schema(srv, data):
    """Schemathesis rarely reaches deep into a game; a whole game played in parallel and
    serial modes, closed and replayed, checks the frames and scores against the document."""
    anon = Api(srv.base)
    doc = anon.ok("GET", "/api/openapi.json")

    def check(path: str, method: str, status: int, body: object) -> None:
        errors = [e.message for e in _validator(doc, path, method, status).iter_errors(body)]
        assert not errors, (path, errors, json.dumps(body)[:500])

    created = anon.ok("POST", "/api/keys", {"name": "schema player"}, status=201)
    check("/api/keys", "post", 201, created)
    client = Api(srv.base, created["api_key"])
    for parallel in (1, 2):
        card = client.ok("POST", "/api/scorecards")
        check("/api/scorecards", "post", 200, card)
        sid = card["scorecard_id"]
        frame = client.ok("POST", f"/api/scorecards/{sid}/games/standard/start"
                                  f"?parallel={parallel}")
        start = "/api/scorecards/{scorecard_id}/games/{game}/start"
        check(start, "post", 200, frame)
        while frame["state"] != "GAME_OVER":
            episode = frame["episode"] if parallel == 1 else frame["episodes"][0]
            row = data["rows"][episode["index"]]
            body = {"action": lurd_to_actions(row["solution"])[episode["steps_used"]]}
            if parallel > 1:
                body["episode"] = episode["index"]
            frame = client.ok("POST", f"/api/sessions/{frame['session_id']}/act", body)
            check("/api/sessions/{session_id}/act", "post", 200, frame)
            check("/api/scorecards/{scorecard_id}", "get", 200,
                  client.ok("GET", f"/api/scorecards/{sid}"))
        check("/api/scorecards/{scorecard_id}/close", "post", 200,
              client.ok("POST", f"/api/scorecards/{sid}/close"))
        check("/api/scorecards/{scorecard_id}", "get", 200,
              client.ok("GET", f"/api/scorecards/{sid}"))
        for viewer in (client, anon):
            check("/api/replays/{session_id}", "get", 200,
                  viewer.ok("GET", f"/api/replays/{frame['session_id']}"))
    check("/api/leaderboard", "get", 200, anon.ok("GET", "/api/leaderboard"))
    check("/api/spec", "get", 200, anon.ok("GET", "/api/spec"))
    check("/api/games", "get", 200, anon.ok("GET", "/api/games"))
    arc = client.ok("POST", "/api/scorecard/open", {})
    game = anon.ok("GET", "/api/games")[0]["game_id"]
    reset = client.ok("POST", "/api/cmd/RESET", {"card_id": arc["card_id"], "game_id": game})
    check("/api/cmd/RESET", "post", 200, reset)
    moved = client.ok("POST", "/api/cmd/ACTION6", {"game_id": game, "guid": reset["guid"],
                                                   "x": 1, "y": 2, "reasoning": [1, None]})
    check("/api/cmd/ACTION6", "post", 200, moved)
    check("/api/scorecard/{card_id}", "get", 200,
          client.ok("GET", f"/api/scorecard/{arc['card_id']}"))
    check("/api/scorecard/close", "post", 200,
          client.ok("POST", "/api/scorecard/close", {"card_id": arc["card_id"]}))
