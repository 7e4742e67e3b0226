"""What a served game is made of: a version's checked levels (dataset), its episodes and
their score (episode), which version each game name plays (games), frames' gzip bodies.

May import ``serve.stores`` and ``serve.limits``; nothing of the play layer or the faces.
"""
