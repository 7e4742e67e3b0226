"""A version's folder and every file in it: the levels table and manifest (``version`` alone
knows the layout), hidden files, whether it is served, a round's record and standings
(``rounds``), the versions listing and reveal (``versions``), publishing a closed round.

May import the pipeline's shared top modules (errors, progress, workers, spec, seeds) alone.
"""
