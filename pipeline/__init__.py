"""Staged jobs that build, grade, select, audit and rotate dataset versions, and the CLI."""
