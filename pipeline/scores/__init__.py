"""What the scores of closed rounds say: the difficulty refit (irt), one ability scale across
rounds (linking), how far a score moves between rounds, a rotation's matching and
equivalence, and simulated agents that check the statistics.
The review says which scorecards need a look.

May import ``pipeline.stages``, ``pipeline.difficulty``, ``pipeline.versions`` and the top.
"""
