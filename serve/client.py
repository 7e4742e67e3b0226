"""The reference client: play a whole served game with any agent, then close and report.

An agent is any class with ``reset()`` and ``act(obs, goal, action_history) -> int`` where
``obs`` and ``goal`` are (64, 64, 3) uint8 arrays. Each worker keeps one connection and one
agent; network faults, 429 and 5xx are retried with exponential backoff. Every action carries
its number, so an action whose answer was lost is sent again as it was and played once: played
one episode at a time, the session's step (the Frame's ``step`` plus one); several in flight at
once, each its episode's (``episode_step``: the actions this client sent in it, plus one).
"""

from __future__ import annotations

__all__ = [
    "BACKOFF_MAX", "BACKOFF_START", "ClientError", "Connection", "Progress", "RETRIES",
    "RETRY_AFTER_MAX", "RandomAgent", "decode", "load_agent", "play",
]

import asyncio
import base64
import importlib
import logging
import sys
from collections.abc import Callable
from typing import Any

import aiohttp
import click
import numpy as np

from engine.errors import SokoforgeError
from serve.arena.scorecards import ADAPTIVE_FIELDS, SCORE_FIELDS

RETRIES = 8
BACKOFF_START = 0.25
BACKOFF_MAX = 8.0
RETRY_AFTER_MAX = 120  # seconds; a server asking for longer is not waited for
log = logging.getLogger(__name__)


class ClientError(SokoforgeError):
    """The server refused a request for good (a 4xx other than 429), or stayed unreachable."""


class RandomAgent:
    """Uniformly random actions: the baseline every benchmark run should beat."""

    def __init__(self, seed: int | None = None) -> None:
        self.rng = np.random.default_rng(seed)

    def reset(self) -> None:
        pass

    def act(self, obs: np.ndarray, goal: np.ndarray, action_history: list[int]) -> int:
        return int(self.rng.integers(4))


def load_agent(spec: str, seed: int | None = None) -> Callable[[], Any]:
    """A factory of fresh agents: ``random`` or ``package.module:Class``."""
    if spec == "random":
        counter = iter(range(1 << 30))
        return lambda: RandomAgent(None if seed is None else seed + next(counter))
    module_name, sep, class_name = spec.partition(":")
    if not sep or not module_name or not class_name:
        raise ValueError("expected 'random' or module:Class")
    cls = getattr(importlib.import_module(module_name), class_name)
    for method in ("reset", "act"):
        if not callable(getattr(cls, method, None)):
            raise ValueError(f"{class_name} has no {method}() method")
    return cls


def decode(observation: dict) -> tuple[np.ndarray, np.ndarray]:
    shape = tuple(observation["shape"])
    obs = np.frombuffer(base64.b64decode(observation["obs"]), np.uint8).reshape(shape)
    goal = np.frombuffer(base64.b64decode(observation["goal"]), np.uint8).reshape(shape)
    return obs, goal


class Connection:
    """One keep-alive connection to the server, with the key and the retry policy."""

    def __init__(self, url: str, key: str | None = None, retries: int = RETRIES,
                 backoff: float = BACKOFF_START,
                 notify: Callable[[str], None] = log.warning) -> None:
        self.url = url.rstrip("/")
        self.key = key
        self.retries, self.backoff = retries, backoff
        self.notify = notify  # told of every retry: what is retried, why, and when
        self.http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1),
                                          timeout=aiohttp.ClientTimeout(total=60))

    async def close(self) -> None:
        await self.http.close()

    async def reach(self) -> dict:
        """The served spec, asked once: a server that cannot be reached at all (nothing
        listening, an unknown host) is said at once rather than retried; faults once play
        has begun are retried (``call``)."""
        try:
            async with self.http.get(self.url + "/api/spec") as res:
                if res.status < 400:
                    return await res.json(content_type=None)
        except aiohttp.ClientConnectorError as e:
            raise ClientError(f"cannot reach {self.url}: {e.os_error.strerror or e} (is the "
                              "server running there?)") from None
        except (TimeoutError, aiohttp.ClientError):
            pass
        return await self.call("GET", "/api/spec")  # reached but faulty: retried as usual

    async def call(self, method: str, path: str, body: dict | None = None,
                   params: dict | None = None) -> dict:
        """The answer to one request, retried on network faults, 429 and 5xx (a change of a
        session is sent numbered, so sending it again is safe)."""
        headers = {"X-API-Key": self.key} if self.key else {}
        delay = self.backoff
        problem = ""
        for attempt in range(self.retries + 1):
            if attempt:
                self.notify(f"retrying {method} {path} in {delay:g} s (retry {attempt} of "
                            f"{self.retries}): {problem}")
                await asyncio.sleep(delay)
                delay = min(delay * 2, BACKOFF_MAX)
            try:
                async with self.http.request(method, self.url + path, json=body, params=params,
                                             headers=headers) as res:
                    try:
                        data = await res.json(content_type=None)
                    except ValueError:
                        data = {"detail": (await res.text())[:200]}
                    if res.status < 400:
                        return data
                    detail = data.get("detail", data) if isinstance(data, dict) else data
                    problem = f"{method} {path}: {res.status} {detail}"
                    if res.status != 429 and res.status < 500:
                        raise ClientError(problem)
                    wait = res.headers.get("Retry-After", "")
                    if wait.isdigit() and int(wait) > RETRY_AFTER_MAX:
                        raise ClientError(problem)  # e.g. a daily limit: retrying is futile
                    if wait.isdigit():
                        delay = max(delay, float(wait))
            except (TimeoutError, aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as e:
                problem = f"{method} {path}: {type(e).__name__} {e}"
        raise ClientError(f"gave up after {self.retries} retries: {problem}")



class Progress:
    """A progress bar on a terminal, plain lines every tenth of the way otherwise."""

    def __init__(self, total: int, echo: Callable[[str], None]) -> None:
        self.total, self.done, self.echo = total, 0, echo
        self.bar = (click.progressbar(length=total, label="episodes", file=sys.stderr)
                    if sys.stderr.isatty() else None)
        if self.bar is not None:
            self.bar.__enter__()

    def advance(self, n: int = 1) -> None:
        before, self.done = self.done, self.done + n
        if self.bar is not None:
            self.bar.update(n)
        elif self.done * 10 // self.total != before * 10 // self.total or self.done == self.total:
            self.echo(f"episodes finished: {self.done}/{self.total}")

    def finish(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)


async def play(url: str, factory: Callable[[], Any], *, name: str | None = None,
               key: str | None = None, parallel: int = 1, game: str | None = None,
               echo: Callable[[str], None] = print, backoff: float = BACKOFF_START) -> dict:
    """Register (or use ``key``), open a scorecard, play every episode of ``game`` (default:
    the first served), close; the outcome. ``backoff`` is the first wait before a retry."""
    conns = [Connection(url, backoff=backoff, notify=echo) for _ in range(parallel)]
    try:
        first = conns[0]
        spec = await first.reach()
        if game is not None:  # refused before a key or scorecard is spent on it
            served = spec["games"]
            if game not in served:
                names = ", ".join(repr(g) for g in served)
                raise ClientError(f"--game {game!r}: this server plays {names}")
        if name is not None:
            made = await first.call("POST", "/api/keys", {"name": name})
            key = made["api_key"]
            echo(f"registered {name!r}; your key (shown once, keep it): {key}")
        for c in conns:
            c.key = key
        card = await first.call("POST", "/api/scorecards", {})
        game = game or card["games"][0]
        frame = await first.call("POST", f"/api/scorecards/{card['scorecard_id']}/games/"
                                 f"{game}/start", params={"parallel": str(parallel)})
        episodes = card.get("episodes_by_game", {}).get(game, card["episodes_per_game"])
        progress = Progress(episodes, echo)
        try:
            if parallel == 1:
                await _play_serial(first, factory(), frame, progress)
            else:
                await _play_parallel(conns, factory, frame, progress)
        finally:
            progress.finish()
        result = await first.call("POST", f"/api/scorecards/{card['scorecard_id']}/close", {})
        played = result.get("games", {}).get(game, result)  # the Score of the game played
        return {"score": {k: played[k] for k in (*SCORE_FIELDS, *ADAPTIVE_FIELDS) if k in played},
                "scorecard_id": card["scorecard_id"], "session_id": frame["session_id"],
                "replay_url": f"{first.url}/api/replays/{frame['session_id']}",
                "scorecard_url": f"{first.url}/scorecards/{card['scorecard_id']}"}
    finally:
        for c in conns:
            await c.close()


async def _play_serial(conn: Connection, agent: Any, frame: dict, progress: Progress) -> None:
    agent.reset()
    history: list[int] = []
    path = f"/api/sessions/{frame['session_id']}/act"
    while frame["state"] != "GAME_OVER":
        obs, goal = decode(frame["observation"])
        action = int(agent.act(obs, goal, list(history)))
        frame = await conn.call("POST", path, {"action": action, "step": frame["step"] + 1})
        history.append(action)
        if frame["last"]["episode_done"]:
            progress.advance()
            agent.reset()
            history = []


async def _play_parallel(conns: list[Connection], factory: Callable[[], Any], frame: dict,
                         progress: Progress) -> None:
    """Each worker claims an episode in flight, plays it to its end, then claims the next."""
    path = f"/api/sessions/{frame['session_id']}/act"
    seen: dict[int, dict] = {}  # episode -> its observation when first seen (never acted on)
    claimed: set[int] = set()
    finished: set[int] = set()
    over = asyncio.Event()
    news = asyncio.Condition()

    async def absorb(f: dict) -> None:
        for ep in f.get("episodes", []):
            seen.setdefault(ep["index"], ep["observation"])
        if f["state"] == "GAME_OVER":
            over.set()
        async with news:
            news.notify_all()

    async def worker(conn: Connection) -> None:
        agent = factory()
        while not over.is_set():
            free = sorted(i for i in seen if i not in claimed and i not in finished)
            if not free:
                async with news:
                    await news.wait()
                continue
            index = free[0]
            claimed.add(index)
            agent.reset()
            history: list[int] = []
            observation = seen[index]
            while True:
                obs, goal = decode(observation)
                action = int(agent.act(obs, goal, list(history)))
                f = await conn.call("POST", path, {"action": action, "episode": index,
                                                   "episode_step": len(history) + 1})
                history.append(action)
                await absorb(f)
                if f["last"]["episode_done"]:
                    finished.add(index)
                    progress.advance()
                    break
                observation = next(e["observation"] for e in f["episodes"]
                                   if e["index"] == index)

    await absorb(frame)
    await asyncio.gather(*(worker(c) for c in conns))
