"""The audit of a finished version: its checks (``audit``), its tables, plots and report.

May import every other subpackage of the pipeline, not the jobs at its top (rotate,
calibrate, trajectories).
"""
