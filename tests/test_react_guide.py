"""The React guide (svc_integrate_react_sdk) works as written: its Mode 1 and Mode 2 apps
are built with Vite from the guide's own code blocks and signed in through in Chromium.

Mode 1 sends the person to the hosted page with react-oidc-context (authorization code +
PKCE) and shows who came back. Mode 2 draws the sign-in itself with the guide's `FlowForm`,
calling /flow/execute across origins (the app's origin is in `passkey.allowed_origins`),
with a passkey and with a password. The only code not from the guide is Mode 2's
`main.jsx`, which the guide describes in a sentence: render `<FlowForm>` and show the
assertion. npm parts: tests/node (scripts/test.sh installs them).
"""

from __future__ import annotations

import functools
import http.server
import shutil
import subprocess
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import jwt
import pytest

from identityctl.services import catalog
from identityctl.services.directory import users as directory
from tests.conftest import Service, free_port, start_service
from tests.support.authenticator import SoftAuthenticator
from tests.support.browser import PasskeyPage, needs_chromium
from tests.support.origins import TEST_ORIGIN
from tests.support.passkeys import PasskeyClient
from tests.test_mcp_react_sdk import snippets

NODE_MODULES = Path(__file__).resolve().parent / "node" / "node_modules"
VITE = NODE_MODULES / "vite" / "bin" / "vite.js"
NODE = shutil.which("node")

pytestmark = [needs_chromium, pytest.mark.skipif(
    NODE is None or not VITE.exists(),
    reason="node or the npm test tools are missing (scripts/test.sh installs them)")]

PASSWORD = "correct horse battery"

INDEX_HTML = """<!doctype html>
<html lang="en">
  <head><meta charset="UTF-8"><title>Guide app</title></head>
  <body><div id="root"></div><script type="module" src="/src/main.jsx"></script></body>
</html>
"""
# What `npm create vite -- --template react` writes.
VITE_CONFIG = """import { defineConfig } from "vite";
import react from "@vitejs/plugin-react";

export default defineConfig({ plugins: [react()], logLevel: "warn" });
"""
# Mode 2's page, as the guide's closing sentence says: render the form, and on COMPLETE
# hand the assertion on (here: show it, for the test to verify like a backend would).
MODE_2_MAIN = """// src/main.jsx
import { useState } from "react";
import { createRoot } from "react-dom/client";
import FlowForm from "./FlowForm";

function App() {
  const [assertion, setAssertion] = useState("");
  if (assertion) return <p id="assertion" data-jwt={assertion}>Signed in.</p>;
  return <FlowForm flowType="AUTHENTICATION" onComplete={(done) => setAssertion(done.assertion)} />;
}

createRoot(document.getElementById("root")).render(<App />);
"""


class SinglePageSite(http.server.SimpleHTTPRequestHandler):
    """A built app's files; any other path is the app's page (its /callback route)."""

    def send_head(self) -> Any:
        path = Path(self.translate_path(self.path))
        if not path.is_file():
            self.path = "/index.html"
        return super().send_head()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def serving(folder: Path, port: int) -> Iterator[str]:
    handler = functools.partial(SinglePageSite, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://localhost:{port}"
    finally:
        server.shutdown()
        server.server_close()


def build(project: Path, files: dict[str, str]) -> Path:
    """A Vite project of ``files`` (under src/), built; its dist folder."""
    (project / "src").mkdir(parents=True)
    (project / "node_modules").symlink_to(NODE_MODULES)
    (project / "index.html").write_text(INDEX_HTML)
    (project / "vite.config.js").write_text(VITE_CONFIG)
    (project / "package.json").write_text('{"type": "module", "private": true}')
    for name, code in files.items():
        (project / "src" / name).write_text(code)
    built = subprocess.run([NODE, str(VITE), "build"], cwd=project, capture_output=True,
                           text=True, timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    return project / "dist"


@pytest.fixture
def app_port() -> int:
    return free_port()


@pytest.fixture
def deployment(tmp_path: Path, app_port: int) -> Iterator[Service]:
    """A deployment whose passkey.allowed_origins has the app's origin too."""
    port = free_port()
    running, stop = start_service(tmp_path, port=port, settings={
        f'allowed_origins = ["http://localhost:{port}"]':
            f'allowed_origins = ["http://localhost:{port}", "http://localhost:{app_port}"]'})
    yield running
    stop()


def person_with_a_passkey(service: Service, tab: PasskeyPage) -> Any:
    user = directory.create_user(username=f"reader-{uuid.uuid4().hex[:6]}", password=PASSWORD,
                                 origin=TEST_ORIGIN)
    authenticator = SoftAuthenticator()
    PasskeyClient(service).enrolled(user, authenticator)
    tab.add_passkey(authenticator.credentials[0])
    return user


def spa(redirect_uri: str) -> dict[str, Any]:
    document = catalog.applications.application_templates()["SPA"]
    document["inboundAuthConfig"][0]["config"]["redirectUris"] = [redirect_uri]
    document.update(name=f"Guide app {uuid.uuid4().hex[:6]}",
                    themeId=catalog.themes.list_themes()[0]["id"])  # as the guide says
    return catalog.applications.create_application(document, origin=TEST_ORIGIN)[0]


def test_mode_1_the_redirect_app_signs_in_through_the_hosted_page(
        tmp_path: Path, deployment: Service, app_port: int, browser: Any) -> None:
    origin = f"http://localhost:{app_port}"
    application = spa(f"{origin}/callback")
    client_id = catalog.applications.oauth_config(application)["clientId"]
    guide = snippets(deployment.base_url, deployment.config.issuer)
    dist = build(tmp_path / "mode1", {
        "main.jsx": guide["main.jsx"].replace("<CLIENT_ID>", client_id),
        "App.jsx": guide["App.jsx"]})
    tab = PasskeyPage(browser)
    try:
        user = person_with_a_passkey(deployment, tab)
        with serving(dist, app_port) as site:
            tab.page.goto(site)
            tab.page.get_by_role("button", name="Sign in").click()
            # The hosted page: the passkey from the username field's suggestions.
            tab.page.get_by_text(f"Signed in as {user.id}").wait_for()
            assert tab.page.url == f"{origin}/callback"  # onSigninCallback dropped ?code
            tab.screenshot("react-guide", "mode-1-signed-in")
            tab.page.get_by_role("button", name="Sign out").click()
            tab.page.get_by_role("button", name="Sign in").wait_for()
    finally:
        tab.close()


@pytest.mark.parametrize("way", ["passkey", "password"])
def test_mode_2_the_apps_own_form_signs_in_across_origins(
        tmp_path: Path, deployment: Service, app_port: int, browser: Any, way: str) -> None:
    application = spa(f"http://localhost:{app_port}/callback")
    guide = snippets(deployment.base_url, deployment.config.issuer)
    dist = build(tmp_path / "mode2", {
        "identity.js": guide["identity.js"].replace("<APPLICATION_ID>", application["id"]),
        "FlowForm.jsx": guide["FlowForm.jsx"], "main.jsx": MODE_2_MAIN})
    tab = PasskeyPage(browser)
    try:
        user = person_with_a_passkey(deployment, tab)
        with serving(dist, app_port) as site:
            tab.page.goto(site)
            if way == "passkey":
                tab.page.get_by_role("button", name="Sign in with a passkey").click()
                tab.page.get_by_role("button", name="Use my passkey").click()
            else:
                tab.page.get_by_label("Username").fill(user.username)
                tab.page.get_by_label("Password").fill(PASSWORD)
                tab.page.get_by_role("button", name="Sign in with password").click()
            signed_in = tab.page.locator("#assertion")
            signed_in.wait_for()
            tab.screenshot("react-guide", f"mode-2-{way}")
            assertion = signed_in.get_attribute("data-jwt")
    finally:
        tab.close()
    # What the app's backend does with it: verify against the JWKS before trusting `sub`.
    jwks = jwt.PyJWKClient(deployment.url("/oauth2/jwks"))
    claims = jwt.decode(assertion, jwks.get_signing_key_from_jwt(assertion).key,
                        algorithms=[deployment.config.oauth.signing_alg],
                        issuer=deployment.config.issuer, options={"verify_aud": False})
    assert claims["sub"] == user.id
