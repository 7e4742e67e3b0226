"""The ARC-AGI-3 face: the served version as one ARC game (arc), its wire shapes (arc_wire),
and a public version exported as a local game (arc_export; arc_game, that game's source).

May import ``serve.native``, ``serve.web`` and what is below them.
"""
