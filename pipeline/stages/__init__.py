"""The staged build: generate, select, solve, grade and write (with layouts, slot draws and
origins), composed by ``build``; importing a collection and verifying a published version
run the same stages. May import ``pipeline.difficulty``, ``pipeline.versions`` and the
pipeline's shared top modules.
"""
