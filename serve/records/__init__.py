"""What the store's records say: the leaderboard's precision, a round's final standings,
the played episodes the difficulty refit reads (results), how people fared, the fair-play review.

May import ``serve.games`` and ``serve.stores``; nothing of the play layer or the faces.
"""
