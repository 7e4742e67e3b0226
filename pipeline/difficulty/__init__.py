"""The difficulty model and the panel: the compute ladder's curves, the calibrated predictor,
measured compute, the agent panel's outcomes, and the statistics that check them.

May import ``pipeline.versions`` and the pipeline's shared top modules.
"""
