"""Package layout that pyproject.toml cannot express: the shipped scenarios live in the top-level
scenarios/ directory of the repository (one copy) and are installed as the data-only package
``explorer.scenarios``, where explorer/config/shipped.py finds them.  Everything else is in
pyproject.toml."""
from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["explorer", "explorer.*"]) + ["explorer.scenarios"],
    package_dir={"explorer.scenarios": "scenarios"},
)
