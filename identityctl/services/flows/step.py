"""What one request to a flow execution works with (:class:`StepRequest`), and what an
executor is (:class:`Executor`): what it runs and which refusals leave the flow able to go
on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from identityctl.errors import (
    BadRequest,
    Conflict,
    Forbidden,
    IdentityError,
    NotFound,
)
from identityctl.flow.engine import TaskOutcome
from identityctl.services.context import ServiceContext
from identityctl.services.origin import RequestOrigin


@dataclass
class StepRequest:
    """What one request to an execution works with; ``context`` is saved afterwards."""

    ctx: ServiceContext
    execution_id: str
    application: dict[str, Any]
    context: dict[str, Any]
    inputs: dict[str, Any]
    #: Who asks (the actor is whoever the flow has signed in, once known) and from where.
    origin: RequestOrigin
    #: The language of the person's page (their browser's), for what is sent to them.
    language: str = "en"
    #: Set by an executor that sends the browser elsewhere (REDIRECTION).
    redirect_url: str | None = None
    #: Set by AuthAssertExecutor; returned once, never stored.
    assertion: str | None = None
    additional: dict[str, str] = field(default_factory=dict)

    @property
    def user_id(self) -> str | None:
        return self.context.get("userId")

    def text(self, name: str) -> str:
        value = self.inputs.get(name)
        return value.strip() if isinstance(value, str) else ""

    def signed_in(self, user_id: str, methods: list[str]) -> None:
        self.context["userId"] = user_id
        self.context["amr"] = sorted({*self.context.get("amr", []), *methods})


#: The refusals a person can answer within the flow (another password, another name, a
#: fresh try): an executor turns them into an ``incomplete`` outcome. Throttling (429), an
#: unavailable database (503) and the like are the request's errors, not the flow's.
CORRECTABLE_BY_THE_USER: tuple[type[IdentityError], ...] = (BadRequest, Forbidden, NotFound,
                                                            Conflict)


@dataclass(frozen=True, slots=True)
class Executor:
    """A flow executor: what it runs, and which refusals leave the flow able to go on."""

    run: Callable[[StepRequest, dict[str, Any]], TaskOutcome]
    recoverable: tuple[type[IdentityError], ...] = CORRECTABLE_BY_THE_USER
