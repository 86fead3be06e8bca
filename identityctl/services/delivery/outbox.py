"""Delivering the outbox: back-channel logout notices, e-mail and webhooks.

Every serving process runs one :class:`Deliverer`: a thread that claims due messages (a
claim is a conditional update, so of several instances exactly one gets each message) and a
few worker threads per kind that deliver them, each message on its own clock. Only as many
messages are claimed as there are free workers, at most one per target at a time, so mail
never waits behind a slow webhook and a slow target holds one worker at most. A delivery
gets ``deliveries.timeout`` seconds in all, whatever the other side does
(services/outbound.py), and a claim lasts three times as long, so no second worker takes a
message the first still holds.

Each message ends its attempt marked delivered, or due again after a backoff, or given up
after the kind's retry time: any failure of one message (a refusal, a bug, a malformed
message) is recorded on that message alone. A process killed mid-delivery leaves a claim
that runs out; another instance (or the restarted one) delivers the message again, with the
same content: a logout token keeps its ``jti``, so the client can tell the repeat.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from identityctl.errors import IdentityError, NotFound
from identityctl.oauth.claims import logout_token_claims
from identityctl.security.tokens import LOGOUT_TOKEN_TYP
from identityctl.services import audit, outbound
from identityctl.services.context import ServiceContext
from identityctl.services.delivery import mail
from identityctl.services.origin import RequestOrigin
from identityctl.services.outbound import DeliveryFailed
from identityctl.store import db, outbox
from identityctl.store import webhooks as webhook_store
from identityctl.store.outbox import OutboxRecord

log = logging.getLogger("identityctl.deliveries")
#: The outbox kind of a back-channel logout (OpenID Connect Back-Channel Logout 1.0).
BACKCHANNEL_LOGOUT = "backchannel_logout"
#: Backoff between attempts: 5 s, 10 s, 20 s ... at most 15 minutes.
FIRST_RETRY, LONGEST_RETRY = 5, 900
#: Deliveries of one kind one process runs at once.
WORKERS_PER_KIND = 3
#: A logout token is valid this long after it is signed (each attempt signs anew).
LOGOUT_TOKEN_TTL = 120

#: Who the audit log names for a delivery given up on.
DELIVERIES = RequestOrigin(actor="deliveries")


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
    # PERF: imported at the first webhook, not at every start.
    from standardwebhooks.webhooks import Webhook

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


def deliver(ctx: ServiceContext, message: OutboxRecord) -> None:
    """Deliver one claimed message within ``deliveries.timeout`` and record on it how that
    went; whatever goes wrong stays with this message."""
    try:
        with outbound.deadline(ctx.config.deliveries.timeout):
            keep = _HANDLERS[message.kind](ctx, message)
    except DeliveryFailed as failure:
        _failed(ctx, message, str(failure), permanent=failure.permanent)
    except Exception as error:  # a bug or a malformed message: this one's failure alone
        log.exception("delivering outbox message %s failed", message.id)
        _failed(ctx, message, f"{type(error).__name__}: {error}")
    else:
        outbox.delivered(message.id, keep=keep)


def _failed(ctx: ServiceContext, message: OutboxRecord, error: str, *,
            permanent: bool = False) -> None:
    now = time.time()
    if permanent or now - message.created_at > ctx.config.deliveries.give_up_hours * 3600:
        # A mail's code must not outlive its chance of being read.
        outbox.give_up(message.id, error=error, keep=mail.kept_once_done(message.payload)
                       if message.kind == mail.EMAIL else None)
        audit.record(f"outbox.{message.kind}", "failure", origin=DELIVERIES,
                     details={"target": message.target, "attempts": message.attempts + 1,
                              "error": error})
        return
    delay = min(LONGEST_RETRY, FIRST_RETRY * 2 ** message.attempts)
    outbox.retry_later(message.id, at=now + delay, error=error)


class Deliverer:
    """The thread that claims due messages every ``interval`` seconds, at once when
    :meth:`wake` is called and whenever a worker comes free, and the workers that deliver
    them (WORKERS_PER_KIND of each kind)."""

    def __init__(self, ctx: ServiceContext, *, interval: float = 2.0) -> None:
        self.ctx, self.interval = ctx, interval
        self._wake, self._stopping = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._run, name="identityctl-deliveries",
                                        daemon=True)
        self._workers = ThreadPoolExecutor(max_workers=WORKERS_PER_KIND * len(_HANDLERS),
                                           thread_name_prefix="identityctl-delivery")
        #: kind -> the targets a worker of this process is delivering to now.
        self._running: dict[str, set[str]] = {kind: set() for kind in _HANDLERS}
        self._lock = threading.Lock()

    def start(self) -> Deliverer:
        self._thread.start()
        return self

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        """Claim nothing more; wait for the deliveries under way (each within its
        deadline)."""
        self._stopping.set()
        self._wake.set()
        self._thread.join(timeout=self.ctx.config.deliveries.timeout + 5)
        self._workers.shutdown(wait=True)

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()  # (a wake-up from now on brings another round at once)
            try:
                with db.failures_as_503():
                    self._claim()
            except IdentityError as failure:  # the store does not answer: next round
                log.warning("outbox delivery paused: %s", failure.description)
            except Exception:  # a bug must not end deliveries for the process's lifetime
                log.exception("outbox delivery failed")
            finally:
                db.release_connection()
            self._wake.wait(self.interval)

    def _claim(self) -> None:
        with self._lock:
            room = {kind: WORKERS_PER_KIND - len(targets)
                    for kind, targets in self._running.items()}
            busy = set().union(*self._running.values())
        lease = 3 * self.ctx.config.deliveries.timeout  # outlasts any one delivery
        for message in outbox.claim_due(room=room, busy_targets=busy, lease_seconds=lease):
            with self._lock:
                self._running[message.kind].add(message.target)
            self._workers.submit(self._deliver, message)

    def _deliver(self, message: OutboxRecord) -> None:
        try:
            with db.failures_as_503():
                deliver(self.ctx, message)
        except IdentityError as failure:  # not recorded: its claim runs out, then a retry
            log.warning("outbox delivery of %s not recorded: %s", message.id,
                        failure.description)
        except Exception:
            log.exception("outbox delivery of %s failed", message.id)
        finally:
            db.release_connection()
            with self._lock:
                self._running[message.kind].discard(message.target)
            self._wake.set()  # a worker is free: claim again
