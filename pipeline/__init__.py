"""Staged jobs that build, grade, select, audit and rotate dataset versions (the command line
that runs them is ``sokoforge.cli``).

At the top: what every subpackage may import (errors, progress, workers, spec, seeds,
precision) and the jobs that compose the subpackages (rotate, calibrate, trajectories). The
subpackages from the bottom: versions, difficulty, stages, scores, audit; each imports only
lower ones (``tests/test_layers.py``).
"""
