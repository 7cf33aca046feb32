"""``FleetGuard`` and its types under the import path the fleet docs give
(``from guard.fleet import FleetGuard``); they live in ``guard.sessions.fleet``."""

from guard.sessions.fleet import *  # noqa: F403
from guard.sessions.fleet import __all__ as __all__
