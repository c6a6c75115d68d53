"""``python -m explorer``: see explorer/cli.py (which also handles a closed stdout pipe)."""
import sys

from .cli import main

sys.exit(main())
