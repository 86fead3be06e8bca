"""Delivering the outbox: back-channel logout notices, e-mail and webhooks.

Every serving process runs one :class:`Deliverer` thread. It claims due messages (a claim is
a conditional update, so of several instances exactly one gets each message), delivers them,
and marks them delivered, or due again after a backoff, or given up after the kind's retry
time. A process killed mid-delivery leaves a claim that runs out; another instance (or the
restarted one) delivers the message again, with the same content: a logout token keeps its
``jti``, so the client can tell the repeat.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from standardwebhooks.webhooks import Webhook

from identityctl.errors import IdentityError, NotFound
from identityctl.oauth.claims import logout_token_claims
from identityctl.security.tokens import LOGOUT_TOKEN_TYP
from identityctl.services import mail, outbound
from identityctl.services.context import ServiceContext
from identityctl.services.outbound import DeliveryFailed
from identityctl.services.sessions import BACKCHANNEL_LOGOUT
from identityctl.store import audit, db, outbox
from identityctl.store import webhooks as webhook_store
from identityctl.store.outbox import OutboxRecord

log = logging.getLogger("identityctl.deliveries")
#: Backoff between attempts: 5 s, 10 s, 20 s ... at most 15 minutes.
FIRST_RETRY, LONGEST_RETRY = 5, 900
BATCH = 20
#: A logout token is valid this long after it is signed (each attempt signs anew).
LOGOUT_TOKEN_TTL = 120


def _deliver_logout(ctx: ServiceContext, message: OutboxRecord) -> None:
    """OpenID Connect Back-Channel Logout 1.0 §2.5: POST logout_token; 200 (or 204) is
    done, anything else is tried again."""
    payload = message.payload
    token = ctx.tokens.sign(logout_token_claims(
        client_id=payload["clientId"], subject=payload["sub"], session_id=payload["sid"],
        jti=payload["jti"]), typ=LOGOUT_TOKEN_TYP, ttl=LOGOUT_TOKEN_TTL)
    try:
        status = outbound.post_form(message.target, {"logout_token": token},
                                    timeout=ctx.config.deliveries.timeout)
    except outbound.FetchRefused as refused:
        raise DeliveryFailed(refused.description) from None
    if status not in (200, 204):
        raise DeliveryFailed(f"{message.target} answered HTTP {status}")


def _deliver_webhook(ctx: ServiceContext, message: OutboxRecord) -> dict[str, Any]:
    """Standard Webhooks: the body signed with the subscription's secret; ``webhook-id`` is
    the message's, the same on every attempt (receivers drop repeats by it). A 2xx is done;
    anything else is tried again. A subscription removed meanwhile: nothing to send."""
    payload = message.payload
    try:
        subscription = webhook_store.require(payload["subscriptionId"])
    except NotFound:
        return {"subscriptionId": payload["subscriptionId"], "type": payload["body"]["type"],
                "status": "subscription removed"}
    body = json.dumps(payload["body"], separators=(",", ":"))
    sent_at = datetime.now(UTC)
    signature = Webhook(subscription.secret).sign(message.id, sent_at, body)
    try:
        status = outbound.post_json(message.target, body.encode(), timeout=ctx.config
                                    .deliveries.timeout, headers={
                                        "webhook-id": message.id,
                                        "webhook-timestamp": str(int(sent_at.timestamp())),
                                        "webhook-signature": signature})
    except outbound.FetchRefused as refused:
        raise DeliveryFailed(refused.description) from None
    if not 200 <= status < 300:
        raise DeliveryFailed(f"{message.target} answered HTTP {status}")
    return {"subscriptionId": subscription.id, "type": payload["body"]["type"],
            "status": status}


#: kind -> how to deliver it; a handler may answer what of the payload to keep once sent.
_HANDLERS: dict[str, Callable[[ServiceContext, OutboxRecord], dict[str, Any] | None]] = {
    BACKCHANNEL_LOGOUT: _deliver_logout,
    mail.EMAIL: mail.deliver,
    webhook_store.WEBHOOK: _deliver_webhook,
}


def waiting_by_kind() -> dict[str, int]:
    """Messages waiting (not delivered, not given up), by kind."""
    return outbox.depth_by_kind()


def deliver_due(ctx: ServiceContext) -> int:
    """Deliver (or reschedule) what is due now; how many messages this round claimed."""
    # A claim outlasts any one delivery; a crashed instance's runs out.
    lease = 3 * ctx.config.deliveries.timeout
    claimed = outbox.claim_due(limit=BATCH, lease_seconds=lease)
    for message in claimed:
        try:
            keep = _HANDLERS[message.kind](ctx, message)
        except DeliveryFailed as failure:
            _failed(ctx, message, str(failure), permanent=failure.permanent)
            continue
        outbox.delivered(message.id, keep=keep)
    return len(claimed)


def _failed(ctx: ServiceContext, message: OutboxRecord, error: str, *,
            permanent: bool = False) -> None:
    now = time.time()
    if permanent or now - message.created_at > ctx.config.deliveries.give_up_hours * 3600:
        outbox.give_up(message.id, error=error)
        audit.record(f"outbox.{message.kind}", "failure", actor="deliveries",
                     details={"target": message.target, "attempts": message.attempts + 1,
                              "error": error})
        return
    delay = min(LONGEST_RETRY, FIRST_RETRY * 2 ** message.attempts)
    outbox.retry_later(message.id, at=now + delay, error=error)


class Deliverer:
    """The background thread that delivers the outbox, every ``interval`` seconds and at
    once when :meth:`wake` is called."""

    def __init__(self, ctx: ServiceContext, *, interval: float = 2.0) -> None:
        self.ctx, self.interval = ctx, interval
        self._wake, self._stopping = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._run, name="identityctl-deliveries",
                                        daemon=True)

    def start(self) -> Deliverer:
        self._thread.start()
        return self

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()
        self._thread.join(timeout=self.ctx.config.deliveries.timeout + 5)

    def _run(self) -> None:
        while not self._stopping.is_set():
            busy = False
            try:
                with db.failures_as_503():
                    busy = deliver_due(self.ctx) == BATCH  # more may be due: no pause
            except IdentityError as failure:  # the store does not answer: next round
                log.warning("outbox delivery paused: %s", failure.description)
            except Exception:  # a bug must not end deliveries for the process's lifetime
                log.exception("outbox delivery failed")
            finally:
                db.release_connection()
            if not busy:
                self._wake.wait(self.interval)
                self._wake.clear()
