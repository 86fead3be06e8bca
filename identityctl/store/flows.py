"""Flow executions: the server-side state of a sign-in or sign-up in progress.

An execution is claimed before a step runs: a conditional UPDATE that moves ``version`` on
by one wins for exactly one of any number of concurrent continuations, on any instance.
The winner saves its outcome only if nobody claimed the execution after it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from identityctl.store.compiled import CompiledQuery, Row
from identityctl.store.models import FlowExecution, new_id

INCOMPLETE = "INCOMPLETE"


@dataclass(slots=True)
class ExecutionRecord:
    id: str
    flow_id: str
    application_id: str
    flow_type: str
    current_node: str
    context: dict[str, Any]
    status: str
    version: int
    auth_request_id: str | None
    expires_at: float


def _record(row: FlowExecution | Row) -> ExecutionRecord:
    return ExecutionRecord(
        id=row.id, flow_id=row.flow_id, application_id=row.application_id,
        flow_type=row.flow_type, current_node=row.current_node, context=row.context or {},
        status=row.status, version=row.version, auth_request_id=row.auth_request_id,
        expires_at=row.expires_at)


#: The statements of every flow step (a hot path), built once per kind of database.
#: ``context`` is JSON text (FlowExecution.context.db_value) in each.
_INSERT = CompiledQuery(
    lambda execution_id, flow_id, application_id, flow_type, current_node, context, status,
    version, auth_request_id, now, expires_at: FlowExecution.insert(
        id=execution_id, flow=flow_id, application=application_id, flow_type=flow_type,
        current_node=current_node, context=context, status=status, version=version,
        auth_request_id=auth_request_id, created_at=now, updated_at=now,
        expires_at=expires_at))
_BY_ID = CompiledQuery(lambda execution_id: FlowExecution.select().where(
    FlowExecution.id == execution_id))
_CLAIM = CompiledQuery(lambda now, execution_id, version, step=1, status=INCOMPLETE:
                       FlowExecution.update(version=FlowExecution.version + step,
                                            updated_at=now).where(
                           (FlowExecution.id == execution_id)
                           & (FlowExecution.version == version)
                           & (FlowExecution.status == status)))
_SAVE = CompiledQuery(lambda current_node, context, status, now, execution_id, version:
                      FlowExecution.update(current_node=current_node, context=context,
                                           status=status, updated_at=now).where(
                          (FlowExecution.id == execution_id)
                          & (FlowExecution.version == version)))


def create_execution(*, flow_id: str, application_id: str, flow_type: str,
                     auth_request_id: str | None, now: float,
                     expires_at: float) -> ExecutionRecord:
    record = ExecutionRecord(id=new_id(), flow_id=flow_id, application_id=application_id,
                             flow_type=flow_type, current_node="", context={},
                             status=INCOMPLETE, version=0, auth_request_id=auth_request_id,
                             expires_at=expires_at)
    _INSERT.execute(execution_id=record.id, flow_id=flow_id, application_id=application_id,
                    flow_type=flow_type, current_node=record.current_node,
                    context=FlowExecution.context.db_value(record.context),
                    status=record.status, version=record.version,
                    auth_request_id=auth_request_id, now=now, expires_at=expires_at)
    return record


def find_execution(execution_id: str) -> ExecutionRecord | None:
    row = _BY_ID.first(FlowExecution, execution_id=execution_id)
    return _record(row) if row else None


def claim(execution_id: str, *, version: int, now: float) -> bool:
    """Take the execution at ``version`` for one step; False when another request has it."""
    return _CLAIM.execute(now=now, execution_id=execution_id, version=version) == 1


def save(execution_id: str, *, claimed_version: int, current_node: str,
         context: dict[str, Any], status: str, now: float) -> bool:
    """Store a step's outcome; False when a later claim overtook this one."""
    return _SAVE.execute(current_node=current_node,
                         context=FlowExecution.context.db_value(context), status=status,
                         now=now, execution_id=execution_id, version=claimed_version) == 1


def purge_executions(*, expired_before: float) -> int:
    return FlowExecution.delete().where(FlowExecution.expires_at < expired_before).execute()
