"""The design space: many scenarios at once — sweep, search, sensitivity, scaling (issue 11).

==============  ================================================================================
module          holds
==============  ================================================================================
base            the scenario a run starts from (:func:`open_base`), share links, cluster sizes
scores          scenarios -> figures: the vectorised estimator, or the full engine (one switch)
space           the layout space of a search and its fast, loader-exact scenario builder
sweep           the cartesian product of field values (:func:`sweep`)
search          the fastest layouts that fit in memory (:func:`search`)
sensitivity     which 2x upgrade buys the most (:func:`sensitivity`)
scaling         weak and strong scaling curves (:func:`scaling`)
executors       where the work runs: this process, a local process pool, a Dask cluster
pool            the local process pool, which Ctrl-C stops at once with its workers
chunks          how work is cut into chunks, and when it is small enough to stay in process
progress        the commands' progress line on stderr, by phase, and the line Ctrl-C leaves
cli_support     what the commands share (flags and their bounds, JSON, number formats)
==============  ================================================================================

Every function takes a :class:`Base` and returns frozen dataclasses with ``to_json()``; figures
are in :mod:`explorer.figures.design`.  Nothing here imports Streamlit; progress is a plain
``progress(done, total)`` callback (the CLI's also hears of phases: progress.next_phase).
"""
from .base import Base, cluster_overrides, open_base, share_query
from .executors import ExecutorSpec, map_chunks
from .scaling import ScalePoint, scaling
from .scores import Scores, estimator_available, score
from .search import SearchResult, search
from .search_verdict import Candidate
from .sensitivity import CHANGES, Sensitivity, sensitivity
from .space import Layout, Space, enumerate_layouts
from .sweep import Point, SweepResult, combinations, parse_vary, sweep

__all__ = ["CHANGES", "Base", "Candidate", "ExecutorSpec", "Layout", "Point", "ScalePoint", "Scores",
           "SearchResult", "Sensitivity", "Space", "SweepResult", "cluster_overrides", "combinations",
           "enumerate_layouts", "estimator_available", "map_chunks", "open_base", "parse_vary", "scaling",
           "score", "search", "sensitivity", "share_query", "sweep"]
