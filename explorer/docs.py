"""``python -m explorer.docs``: print the field table of docs/scenario-reference.md (see
:mod:`explorer.config.docs`)."""
from .config.docs import field_table

if __name__ == "__main__":
    print(field_table())
