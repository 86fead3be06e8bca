"""The console's integrations in Debian Chromium: an admin adds a webhook (its signing secret
shown once) and a role, and sees the delivery of the role's event listed and sent; the pages
are axe-core clean and fit a phone. Screenshots go to test-artifacts/admin/."""

from __future__ import annotations

import time
from typing import Any

import pytest

from identityctl.services.directory import roles
from tests.conftest import Service
from tests.support.browser import needs_chromium
from tests.test_accessibility import AXE
from tests.test_admin_api_users import Admin
from tests.test_admin_console import Console
from tests.test_webhooks import Receiver


def no_accessibility_violations(page: Any) -> None:
    page.evaluate(AXE.read_text())
    found = page.evaluate("async () => (await axe.run(document, "
                          "{resultTypes: ['violations']})).violations")
    assert [(item["id"], [node["target"] for node in item["nodes"]][:3])
            for item in found] == []


@needs_chromium
@pytest.mark.skipif(not AXE.exists(), reason="axe-core is not installed (./scripts/test.sh "
                                             "runs npm ci in tests/node)")
def test_an_admin_adds_a_webhook_and_a_role_and_sees_the_delivery(
        browser: Any, service: Service) -> None:
    receiver = Receiver()
    # axe-core is injected into the page, which the console's CSP would refuse.
    console = Console(browser, Admin(service), bypass_csp=True)
    page = console.page
    console.open("#/webhooks", heading="Webhooks")
    page.get_by_label("URL", exact=True).fill(receiver.url)
    page.get_by_label("Events").fill("role.*")
    page.get_by_label("Description").fill("Roles to the wiki")
    page.get_by_role("button", name="New webhook").click()
    page.get_by_role("heading", name=f"{receiver.url} was added.").wait_for()
    receiver.secret = page.locator("#new-webhook-secret").inner_text()
    assert receiver.secret.startswith("whsec_")
    assert page.get_by_role("row").filter(has_text="Roles to the wiki").is_visible()
    console.shot("webhook-secret")
    no_accessibility_violations(page)

    console.area("Roles")
    page.get_by_label("Name", exact=True).fill("editors")
    page.get_by_label("Scopes").fill("notes:read notes:write")
    page.get_by_role("button", name="New role").click()
    console.wait_for_status("editors was added.")
    row = page.get_by_role("row").filter(has_text="editors")
    assert "notes:read notes:write" in row.inner_text()
    assert [role.scopes for role in roles.list_roles() if role.name == "editors"] == [
        ["notes:read", "notes:write"]]
    no_accessibility_violations(page)
    row.get_by_role("link", name="Edit editors").click()
    page.get_by_role("heading", level=1, name="Edit editors").wait_for()
    page.get_by_label("Scopes").fill("notes:read")
    page.get_by_role("button", name="Save").click()
    console.wait_for_status("editors was saved.")
    assert [role.scopes for role in roles.list_roles() if role.name == "editors"] == [
        ["notes:read"]]

    console.area("Identity providers")
    assert page.locator("#callback-uri").inner_text() == service.url("/gate/federated")
    console.area("Resource servers")
    page.get_by_role("button", name="New resource server").wait_for()

    # The role's events went to the webhook: their deliveries are listed, and sent.
    receiver.wait_for(2)
    assert [payload["type"] for _, payload in receiver.received] == ["role.create",
                                                                     "role.update"]
    console.area("Webhooks")
    assert receiver.secret not in page.content()  # shown once, when it was made
    deliveries = page.get_by_role("region", name="Recent deliveries")
    listed = deliveries.get_by_role("row").filter(has_text=receiver.url)
    listed.nth(1).wait_for()  # the list is fetched after the page is drawn
    assert listed.count() == 2
    deadline = time.monotonic() + 15
    while deliveries.locator("td[data-label=State]").all_inner_texts() != ["sent", "sent"]:
        assert time.monotonic() < deadline, deliveries.inner_text()
        page.get_by_role("button", name="Refresh").click()
        page.wait_for_timeout(300)
    # At a phone's width nothing runs off the side.
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    console.shot("webhook-deliveries-phone")
    console.close()
