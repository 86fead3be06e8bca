"""Prometheus metrics (prometheus_client): what `GET /metrics` shows.

One process keeps them in memory; `serve --workers N` sets ``PROMETHEUS_MULTIPROC_DIR``
before anything imports prometheus_client, so every worker writes its figures to files
there and a scrape answered by any worker adds them all up (prometheus_client's
multiprocess mode).

Sign-ins, passkey registrations and throttle refusals are counted from the audit events
(services/audit.py records each once, wherever it happens); requests by the HTTP middleware;
tokens and flow executions where they are issued and end.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.registry import Collector

MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"
CONTENT_TYPE = CONTENT_TYPE_LATEST

REQUESTS = Counter("identityctl_http_requests", "HTTP requests answered, by route template, "
                   "method and status.", ["route", "method", "status"])
LATENCY = Histogram("identityctl_http_request_duration_seconds", "Time to answer a request, "
                    "by route template.", ["route"],
                    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                             2.5, 5.0))
SIGN_INS = Counter("identityctl_sign_ins", "Sign-in attempts, by method and outcome.",
                   ["method", "outcome"])
PASSKEY_REGISTRATIONS = Counter("identityctl_passkey_registrations",
                                "Passkeys registered (or refused), by outcome.", ["outcome"])
TOKENS = Counter("identityctl_tokens_issued", "Token responses issued, by grant type.",
                 ["grant"])
THROTTLED = Counter("identityctl_throttle_refusals", "Attempts refused by the brute-force "
                    "throttle (429), by action.", ["action"])
DATABASE_UNAVAILABLE = Counter("identityctl_database_unavailable", "Answers 503 because the "
                               "database was busy or down, by code.", ["code"])
FLOWS = Counter("identityctl_flow_executions", "Flow executions that ended, by flow type and "
                "status (COMPLETE, ERROR).", ["flow_type", "status"])

#: Audit events that are sign-in attempts -> the method.
SIGN_IN_EVENTS = {"passkey.authenticate": "passkey", "flow.password": "password",
                  "federation.sign_in": "provider", "recovery.email_code": "recovery",
                  "recovery.recovery_code": "recovery", "flow.otp": "otp"}


#: PERF: a metric's child per label values, found once: `labels()` builds and locks each
#: time, and every request and sign-in counts something.
_children: dict[tuple[Any, ...], Any] = {}


def _child(metric: Any, *values: str) -> Any:
    key = (metric, *values)
    child = _children.get(key)
    if child is None:
        child = _children[key] = metric.labels(*values)
    return child


#: Methods counted by name; any other is "other" (a client's made-up method must not make
#: a new series each time).
METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"})


_request_children: dict[tuple[str, str, str], tuple[Any, Any]] = {}


def request_answered(route: str, method: str, status: str, seconds: float) -> None:
    """One HTTP request: counted by route template, method and status, and timed (PERF:
    both children found with one lookup)."""
    if method not in METHODS:
        method = "other"
    children = _request_children.get((route, method, status))
    if children is None:
        children = _request_children[(route, method, status)] = (
            REQUESTS.labels(route, method, status), LATENCY.labels(route))
    children[0].inc()
    children[1].observe(seconds)


def count(metric: Any, *values: str) -> None:
    _child(metric, *values).inc()


def audit_event(event: str, outcome: str) -> None:
    """Count what an audit event says (PERF: two dict lookups when it says nothing)."""
    method = SIGN_IN_EVENTS.get(event)
    if method is not None:
        count(SIGN_INS, method, outcome)
    elif event == "passkey.register":
        count(PASSKEY_REGISTRATIONS, outcome)
    if outcome == "throttled":
        count(THROTTLED, event)


def exposition(extra: Iterable[Collector] = ()) -> bytes:
    """The text exposition of every worker's figures, and of ``extra`` (read at scrape
    time, e.g. the outbox's depth from the store)."""
    if os.environ.get(MULTIPROCESS_ENV):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        text = generate_latest(registry)
    else:
        text = generate_latest(REGISTRY)
    now = CollectorRegistry()
    for collector in extra:
        now.register(collector)
    return text + generate_latest(now)
