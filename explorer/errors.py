"""The error a command reports as internal (exit 1): a result the simulator should never produce.
Errors in what a user wrote are :class:`explorer.config.ScenarioError` (exit 2)."""


class InternalError(Exception):
    """A result the simulator should never produce (e.g. not finite); reported as internal, exit 1."""
