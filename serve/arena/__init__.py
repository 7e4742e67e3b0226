"""The parts of ``serve.play.Arena``, one concern each: errors, keys, rounds, images, the
session cache, sessions, scorecards, replays and the leaderboard."""
