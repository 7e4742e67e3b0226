"""The parts of ``serve.play.Arena``, one concern each: errors, keys, rounds, images, sessions,
scorecards, replays and the leaderboard."""
