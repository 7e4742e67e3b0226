"""``sokoforge serve`` and ``sokoforge play``: the server of a version and its reference client."""

from __future__ import annotations

__all__ = ["DB_ENV", "STOPPED_LINE", "play_command", "serve_command"]

import math
import os
import re
import signal
from pathlib import Path
from urllib.parse import urlsplit

import click

from sokoforge.cli.build import datasets_option
from sokoforge.cli.errors import USAGE, CliError, run_interruptibly
from sokoforge.cli.store_option import checked_store, store_location

DB_ENV = "SOKOFORGE_DB"
STOPPED_LINE = "stopped (Ctrl-C)"  # what serve says after Ctrl-C (its --help quotes it)


@click.command("serve")
@click.argument("versions", nargs=-1)
@click.option("--version", "version", default=None,
              help="One dataset version to serve (the same as giving it as an argument) "
              "[default: demo].")
@datasets_option
@click.option("--db", callback=checked_store, default=None,
              help="The store: a SQLite file, or a postgresql://user@host/db URL shared by "
              f"several servers [default: ${DB_ENV} or ./sokoforge.sqlite].")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 64),
              help="Processes serving on the one port, sharing the store.")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535),
              help="0 picks a free port (printed at start-up).")
@click.option("--sync", "synchronous", type=click.Choice(["normal", "full"]),
              default="normal", show_default=True,
              help="SQLite synchronous mode. Both commit every action before answering, "
              "which survives a killed server; full also syncs the disk at each "
              "commit, which survives power loss, at a cost in speed.")
@click.option("--trust-proxy", multiple=True, metavar="ADDR[/BITS]",
              help="Proxy whose X-Forwarded-For is believed (repeatable).")
@click.option("--keys-per-address", default=5, show_default=True, type=click.IntRange(0),
              help="New keys per client address per UTC day.")
@click.option("--scorecards-per-day", default=24, show_default=True, type=click.IntRange(0),
              help="Scorecards opened per key per UTC day.")
@click.option("--sessions-per-key", default=3, show_default=True, type=click.IntRange(0),
              help="Sessions in flight per key.")
@click.option("--sessions-total", default=200, show_default=True, type=click.IntRange(0),
              help="Sessions in flight in the whole server.")
@click.option("--sessions-per-address", default=None, type=click.IntRange(0),
              help="Sessions in flight per client address, whatever its keys (an IPv6 client "
              "counts as its /64)  [default: a 32nd of --sessions-total, at least "
              "--sessions-per-key]")
@click.option("--idle-minutes", default=60.0, show_default=True, type=click.FloatRange(0.01),
              help="A session expires after this long without an action.")
@click.option("--max-parallel", default=32, show_default=True, type=click.IntRange(1, 32),
              help="Largest parallel= a session may ask for.")
@click.option("--public-url", default=None, metavar="URL",
              help="The server's address as clients reach it, given in the pages' "
              "instructions [default: the listening address].")
@click.option("--header-timeout", default=10.0, show_default=True,
              type=click.FloatRange(0.1, 3600), help="Seconds a request may take to send its "
              "headers once it has started.")
@click.option("--body-timeout", default=30.0, show_default=True,
              type=click.FloatRange(0.1, 3600), help="Seconds a request may take to send its "
              "body after its headers.")
@click.option("--idle-timeout", default=60.0, show_default=True,
              type=click.FloatRange(0.1, 86400), help="Seconds a connection may stay open "
              "with no request under way.")
@click.option("--connections-per-address", default=64, show_default=True,
              type=click.IntRange(1), help="Open connections per client address (an IPv6 "
              "client counts as its /64; trusted proxies are not capped).")
@click.option("--as", "as_game", default=None, metavar="GAME",
              help="Serve the one version given as game GAME instead of its own game's name: a "
              "pool (an adaptive game) served alone as `standard` is played unchanged by "
              "clients that only play the game named standard.")
@click.option("--access-log", default=None, metavar="PATH|-",
              help="Write one JSON line per request (time, method, route template, status, "
              "latency, bytes, client address, key name; never a key) to PATH, appended, or "
              "to stdout with '-'.")
def serve_command(versions: tuple[str, ...], version: str | None, datasets: Path,
                  db: str | None, workers: int, host: str, port: int, synchronous: str,
                  trust_proxy: tuple[str, ...], keys_per_address: int,
                  scorecards_per_day: int, sessions_per_key: int, sessions_total: int,
                  sessions_per_address: int | None, idle_minutes: float, max_parallel: int,
                  public_url: str | None,
                  header_timeout: float, body_timeout: float, idle_timeout: float,
                  connections_per_address: int, as_game: str | None,
                  access_log: str | None) -> None:
    """Serve dataset versions, one game each, over the agent protocol (see /api/docs once
    running): sokoforge serve V1 [V2 ...].

    The start-up lines give the home page, the API docs, each public game's play page and
    the ARC-AGI-3 face's base URL. Ctrl-C or SIGTERM is the normal stop: the server finishes
    cleanly and exits 0 (after Ctrl-C with the one line "stopped (Ctrl-C)"); a store it could
    not leave as a clean stop does (its file replaced under it, a full disk) ends it with exit
    1 and one line saying what was kept.
    """
    from serve.app import public_url as parse_public_url
    from serve.games.dataset import DatasetError
    from serve.limits import ConnectionLimits, Limits, parse_networks
    from serve.run import StartError, StopError, serve_forever
    from serve.stores.location import is_postgres

    for option, value in (("--idle-minutes", idle_minutes), ("--header-timeout", header_timeout),
                          ("--body-timeout", body_timeout), ("--idle-timeout", idle_timeout)):
        if math.isnan(value):  # FloatRange lets nan through; no deadline would ever hold
            raise CliError(f"{option}: nan is not a number", 2)
    try:
        public = None if public_url is None else parse_public_url(public_url)
    except ValueError as e:
        raise CliError(f"--public-url: {e}", 2) from None
    try:
        proxies = parse_networks(trust_proxy)
    except ValueError as e:
        raise CliError(f"--trust-proxy: {e}", 2) from None
    limits = Limits(keys_per_address_per_day=keys_per_address,
                    scorecards_per_key_per_day=scorecards_per_day,
                    sessions_per_key=sessions_per_key, sessions_total=sessions_total,
                    sessions_per_address=sessions_per_address, idle_seconds=idle_minutes * 60,
                    max_parallel=max_parallel, trusted_proxies=proxies)
    connections = ConnectionLimits(header_seconds=header_timeout, body_seconds=body_timeout,
                                   idle_seconds=idle_timeout,
                                   per_address=connections_per_address)
    names = list(versions) + ([version] if version else [])
    names = names or ["demo"]
    if len(set(names)) < len(names):
        raise CliError(f"a version is given twice: {' '.join(names)}", USAGE)
    if as_game is not None:
        from serve.native import GAME_NAME

        if len(names) != 1:
            raise CliError(f"--as {as_game}: give one version to serve under it", USAGE)
        if not re.fullmatch(GAME_NAME, as_game):
            raise CliError(f"--as {as_game!r}: a game's name is 1-64 letters, digits, '_', "
                           "'.' or '-'", USAGE)
    db_path = store_location(db or os.environ.get(DB_ENV) or "sokoforge.sqlite")
    if not is_postgres(db_path) and not Path(db_path).resolve().parent.is_dir():  # a file path
        raise CliError(f"--db {db_path}: the folder {Path(db_path).parent} does not exist", USAGE)
    try:
        stopped_by = serve_forever(str(datasets), names, db_path, host, port, limits,
                                   synchronous=synchronous.upper(), public=public,
                                   connections=connections, workers=workers,
                                   access_log=access_log, as_game=as_game)
    except DatasetError as e:
        shown = names[0] if len(names) == 1 else " ".join(names)
        raise CliError(f"cannot serve {shown!r}: {e}", 2) from None
    except (StartError, StopError) as e:
        raise CliError(str(e), 1) from None
    if stopped_by == signal.SIGINT:  # Ctrl-C: the operator's normal stop, said in one line
        click.echo(STOPPED_LINE, err=True)


@click.command("play")
@click.option("--url", required=True, help="Server base URL, e.g. http://127.0.0.1:8000")
@click.option("--register", "name", default=None, help="Create a key bound to this name.")
@click.option("--key", default=None, envvar="SOKOFORGE_KEY",
              help="An existing key [env SOKOFORGE_KEY].")
@click.option("--agent", "agent_spec", default="random", show_default=True,
              help="'random' or module:Class with reset() and act(obs, goal, history) -> int.")
@click.option("--parallel", default=1, show_default=True, type=click.IntRange(1, 32),
              help="Episodes played at once, one connection and one agent each.")
@click.option("--seed", default=None, type=int, help="Seed of the random agent.")
@click.option("--game", default=None,
              help="Which served game to play (GET /api/spec lists them) [default: the first].")
def play_command(url: str, name: str | None, key: str | None, agent_spec: str, parallel: int,
                 seed: int | None, game: str | None) -> None:
    """Play a whole served game with an agent, close the scorecard, print the Score."""
    import json

    from serve.client import ClientError, load_agent, play

    if (name is None) == (key is None):
        raise CliError("give exactly one of --register NAME or --key KEY", 2)
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CliError(f"--url {url!r}: expected http://HOST[:PORT] or https://...", 2)
    try:
        factory = load_agent(agent_spec, seed)
    except (ImportError, AttributeError, ValueError) as e:
        raise CliError(f"--agent {agent_spec}: {e}", 2) from None
    try:
        outcome = run_interruptibly(play(url, factory, name=name, key=key, parallel=parallel,
                                         game=game, echo=lambda line: click.echo(line, err=True)))
    except ClientError as e:
        raise CliError(str(e), 1) from None
    click.echo(json.dumps(outcome["score"], indent=2))
    # the last line: the scorecard's page, which replays each episode
    click.echo(f"scorecard: {outcome['scorecard_url']}")
