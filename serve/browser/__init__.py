"""The browser face: the pages people read (the landing page, leaderboards, a scorecard, play)
and their routes (browser); their scripts are in ``serve/static``.

May import the other faces (``serve.native``, ``serve.arc``), ``serve.web`` and below.
"""
