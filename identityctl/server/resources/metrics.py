"""GET /metrics: Prometheus' text exposition of every worker's figures (identityctl/metrics.py).

Answered to loopback addresses, to the networks of ``metrics.allow``, and to a request with
``Authorization: Bearer <metrics.token>``; anyone else gets 403 (the figures say how busy
the service is and how sign-ins fail: not for everyone).
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterator

import falcon
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from identityctl import metrics
from identityctl.config import Config
from identityctl.errors import Forbidden
from identityctl.server.requests import bearer_token
from identityctl.services.delivery import outbox as deliveries


class OutboxDepth(Collector):
    """What waits to be delivered, by kind (e-mail, webhook, logout notice), read from the
    store at scrape time: one figure for all instances."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily("identityctl_outbox_waiting", "Messages waiting to be "
                                   "delivered (not sent, not given up), by kind.",
                                   labels=["kind"])
        for kind, count in sorted(deliveries.waiting_by_kind().items()):
            family.add_metric([kind], count)
        yield family


class MetricsResource:
    def __init__(self, config: Config) -> None:
        self.allowed = [ipaddress.ip_network(network, strict=False)
                        for network in config.metrics.allow]
        self.token = config.metrics.token

    def _may_read(self, req: falcon.Request) -> bool:
        try:
            address = ipaddress.ip_address(req.context.origin.address)
        except ValueError:
            address = None
        if address is not None and (address.is_loopback
                                    or any(address in network for network in self.allowed)):
            return True
        offered = bearer_token(req) or ""
        return bool(self.token) and hmac.compare_digest(offered.encode(), self.token.encode())

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        if not self._may_read(req):
            raise Forbidden("Metrics are answered to this machine, to the networks in "
                            "metrics.allow, and to a scraper with metrics.token.",
                            code="metrics_forbidden")
        resp.content_type = metrics.CONTENT_TYPE
        resp.set_header("Cache-Control", "no-store")
        resp.data = metrics.exposition([OutboxDepth()])


OPENAPI_PATHS = {"/metrics": {"get": {
    "summary": "Prometheus metrics (text exposition format)", "operationId": "metrics",
    "description": "Loopback addresses, metrics.allow networks, or Authorization: Bearer "
                   "<metrics.token>.",
    "responses": {"200": {"description": "text/plain; version=0.0.4",
                          "content": {"text/plain": {}}},
                  "403": {"description": "metrics_forbidden"}}}}}
