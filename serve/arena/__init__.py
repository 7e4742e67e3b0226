"""The parts of ``serve.play.Arena``, one concern each: errors, keys, rounds, images, the
session cache, sessions, scorecards, replays and the leaderboard, with the review's marks.

May import ``serve.records``, ``serve.games``, ``serve.stores`` and ``serve.limits``; never a
face or the web layer.
"""
