"""The aiohttp server: the agent scoring protocol and its ARC-AGI-3 face over one version."""
