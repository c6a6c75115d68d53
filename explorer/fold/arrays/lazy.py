"""A task list made only when it is read: what a result folded from array runs carries
(explorer/fold/arrays), since those runs hold no task objects."""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from ...engine.scheduler import Task


class LazyTasks(Sequence[Task]):
    """The full iteration's tasks, made by ``make`` on first read (the Gantt, a trace or a CSV),
    then kept; its length is known without making them."""

    def __init__(self, count: int, make: Callable[[], Sequence[Task]]) -> None:
        self._count = count
        self._make: Callable[[], Sequence[Task]] | None = make
        self._tasks: Sequence[Task] | None = None

    def resolve(self) -> Sequence[Task]:
        """The task list (a fold_tasks.FoldedTasks when the task fold proves the period too)."""
        if self._tasks is None:
            assert self._make is not None
            self._tasks, self._make = self._make(), None
        return self._tasks

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, i):
        return self.resolve()[i]

    def __iter__(self) -> Iterator[Task]:
        return iter(self.resolve())


def resolved(tasks: Sequence[Task]) -> Sequence[Task]:
    """``tasks`` itself, or the list a :class:`LazyTasks` stands for."""
    return tasks.resolve() if isinstance(tasks, LazyTasks) else tasks
