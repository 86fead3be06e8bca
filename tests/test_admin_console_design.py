"""The console's design areas in Chromium at phone width: an admin edits a theme's colour and
the preview of the sign-in page shows it before and after saving (under the page's strict
CSP: no inline style); opens a flow and sees its graph and its steps as a list; saves a
broken flow and reads which node to fix; axe-core finds nothing on either page."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from identityctl.services import catalog
from identityctl.services.admin.design import flow_graph
from tests.conftest import Service
from tests.support.browser import needs_chromium
from tests.test_accessibility import AXE
from tests.test_admin_api_users import Admin
from tests.test_admin_console import Console

GREEN = "#0a7d38"


def _violations(page: Any) -> list[Any]:
    page.evaluate(AXE.read_text())
    found = page.evaluate("async () => (await axe.run(document, "
                          "{resultTypes: ['violations']})).violations")
    return [(item["id"], [node["target"] for node in item["nodes"]][:3]) for item in found]


@needs_chromium
@pytest.mark.skipif(not AXE.exists(), reason="axe-core is not installed (./scripts/test.sh "
                                             "runs npm ci in tests/node)")
def test_a_theme_is_previewed_as_edited_and_a_flow_is_drawn_and_refused_by_node(
        browser: Any, service: Service) -> None:
    console = Console(browser, Admin(service))
    page = console.page
    console.open("#/themes", heading="Themes")
    page.get_by_label("Handle").fill("shop")
    page.get_by_label("Name", exact=True).fill("Shop")
    page.get_by_role("button", name="Create theme").click()
    page.get_by_role("heading", level=1, name="Theme: Shop").wait_for()

    # The preview follows the form before anything is saved.
    preview_button = page.locator("#theme-preview .card button").first
    light = page.get_by_role("group", name="Light colours")
    light.get_by_role("textbox", name="Main colour (buttons, links)",
                        exact=True).fill(GREEN)
    expect(preview_button).to_have_css("background-color", "rgb(10, 125, 56)")
    assert catalog.themes.require_theme("shop")["theme"] == {}
    # A value the grammar refuses is said in words, and the preview keeps the last good one.
    light.get_by_role("textbox", name="Text", exact=True).fill("red; background: url(x)")
    page.locator("#feedback-preview").filter(has_text="The light colour 'text'").wait_for()
    light.get_by_role("textbox", name="Text", exact=True).fill("")
    page.get_by_role("textbox", name="Product name").fill("Shop & Co")
    page.locator("#theme-preview .app-name").filter(has_text="Shop & Co").wait_for()
    console.shot("theme-preview")
    assert _violations(page) == []
    page.get_by_role("button", name="Save").click()
    page.locator("#feedback-theme").filter(has_text="Saved.").wait_for()
    saved = catalog.themes.require_theme("shop")["theme"]
    assert saved == {"colorSchemes": {"light": {"primary": GREEN}},
                     "branding": {"productName": "Shop & Co"}}

    # A flow: its graph, its steps in words, and a broken save that names the node.
    console.area("Flows")
    page.get_by_label("Type").select_option("AUTHENTICATION")
    page.get_by_role("link", name="Password sign-in").click()
    page.get_by_role("heading", level=1, name="Flow: Password sign-in").wait_for()
    nodes = catalog.flows.require_flow_by_handle("default-basic-flow", "AUTHENTICATION")["nodes"]
    graph = page.get_by_role("img", name=f"The flow as a graph: {len(nodes)} steps. The list "
                                           "after it says each step and where it leads.")
    graph.wait_for()
    assert graph.locator("g.node").count() == len(nodes)
    assert graph.locator("path.edge").count() == len(flow_graph(nodes)["edges"])
    steps = page.locator(".flow-steps li").all_inner_texts()
    assert steps[0].startswith("start") and any(
        step.startswith("credentials_auth (BasicAuthExecutor): on success → "
                        "totp_check; needs more input → prompt_credentials")
        for step in steps)
    console.shot("flow-graph")
    assert _violations(page) == []
    editor = page.get_by_role("textbox", name="Flow document")
    editor.fill(editor.input_value().replace('"onSuccess": "totp_check"',
                                             '"onSuccess": "nowhere"'))
    page.get_by_role("button", name="Save").click()
    said = page.locator("#feedback-flow")
    said.filter(has_text="The node 'credentials_auth'").wait_for()
    assert "points to unknown node 'nowhere'" in said.inner_text()
    assert "Field" not in said.inner_text()
    console.shot("flow-refused")
    console.close()
