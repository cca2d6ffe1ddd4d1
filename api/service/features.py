"""The service's features, each made on first use: its module is imported then, not before.

``LedgerService.runs``, ``.boards``, ``.search`` ... are :class:`Feature` attributes. A
command uses one or two features, and a short command's start-up is mostly imports: making
every feature when the service was made imported every feature's module (the boards' board
orders and operation specs, the registry, the log's bundle export ...) for each command. A
server uses them all; it makes each at its first request, once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

if TYPE_CHECKING:
    from api.service.admin import Admin
    from api.service.boards import Boards
    from api.service.compare import Comparisons
    from api.service.history import History
    from api.service.jobs import Jobs
    from api.service.keys import Keys
    from api.service.ledger_service import LedgerService
    from api.service.log import Log
    from api.service.records import Records
    from api.service.registry import Registry
    from api.service.runs import Runs
    from api.service.search import Search

T = TypeVar("T")


class Feature(Generic[T]):
    """A service attribute made by ``make(service)`` on first use and kept on the service.

    Made under the service's lock (``features_made``, reentrant: one feature's making uses
    another), so that two requests arriving at once share one. Once made, the value sits in
    the instance's ``__dict__`` and plain attribute lookup finds it there first (this is
    not a data descriptor): no call, no lock after the first use."""

    def __init__(self, make: Callable[[LedgerService], T]) -> None:
        self.make = make
        self.name = ""

    def __set_name__(self, owner: type[Any], name: str) -> None:
        self.name = name

    @overload
    def __get__(self, service: None, owner: type[Any] | None = None) -> Feature[T]: ...

    @overload
    def __get__(self, service: LedgerService, owner: type[Any] | None = None) -> T: ...

    def __get__(
        self, service: LedgerService | None, owner: type[Any] | None = None
    ) -> T | Feature[T]:
        if service is None:
            return self
        made: dict[str, Any] = service.__dict__
        with service.features_made:
            if self.name not in made:
                made[self.name] = self.make(service)
            value: T = made[self.name]
            return value

    @staticmethod
    def made(service: LedgerService, name: str) -> Any:
        """The feature ``name`` if it was made, else None (closing makes none)."""
        return service.__dict__.get(name)


# Each feature's making; the import is the point (PLC0415 throughout).
# ruff: noqa: PLC0415


def runs(service: LedgerService) -> Runs:
    from api.service.runs import Runs

    return Runs(service.views, service.public_url)


def history(service: LedgerService) -> History:
    from api.service.history import History

    return History(service.views)


def boards(service: LedgerService) -> Boards:
    from api.service.boards import Boards

    return Boards(service.views, service.runs)


def compare(service: LedgerService) -> Comparisons:
    from api.service.compare import Comparisons

    return Comparisons(service.views, service.runs)


def search(service: LedgerService) -> Search:
    from api.service.search import Search

    return Search(service.views)


def keys(service: LedgerService) -> Keys:
    from api.service.keys import Keys

    return Keys(service.views)


def log(service: LedgerService) -> Log:
    from api.service.log import Log

    return Log(service.views, service.runs, service.boards, service.witness_policy)


def jobs(service: LedgerService) -> Jobs:
    from api.service.jobs import Jobs

    return Jobs(service.views)


def admin(service: LedgerService) -> Admin:
    from api.service.admin import Admin

    return Admin(service.views)


def records(service: LedgerService) -> Records:
    from api.service.records import Records

    return Records(service.views)


def registry(service: LedgerService) -> Registry:
    from api.service.registry import Registry

    return Registry(service.views)
