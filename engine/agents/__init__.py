"""The search agents that play levels at a budget: the reference planner, the agent panel,
the validation agents and the compute ladder.

May import ``engine.search`` and the engine's top.
"""
