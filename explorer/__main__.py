"""``python -m explorer``: see explorer/cli.py (which also handles a closed stdout pipe and Ctrl-C)."""
import sys

try:
    from .cli import main
except KeyboardInterrupt:       # Ctrl-C while the modules load: the same line and code as later
    print("interrupted", file=sys.stderr)
    sys.exit(130)

sys.exit(main())
