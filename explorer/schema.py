"""Moved to :mod:`explorer.config.schema`; this path stays for existing imports (explorer/ui)."""
from .config.schema import *  # noqa: F403
