"""The aiohttp server over the versions it serves: the agent scoring protocol (``native``),
its ARC-AGI-3 face (``serve.arc``) and the browser face (``serve.browser``).

At the top: the ``Arena`` every face plays through (play), the limits, the application (app),
the running server (run) and the reference client. The subpackages from the bottom: stores,
games, records, arena, web, then the faces (``tests/test_layers.py``).
"""
