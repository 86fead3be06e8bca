"""svc_integrate_react_sdk's JavaScript is real JavaScript (checked with node when present).

The React/JSX snippets were bundled with esbuild against react-oidc-context 3.3 and
oidc-client-ts 3.5 when written; this keeps the dependency-free helpers honest in CI.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from identityctl.mcp.react_sdk import integration_guide

NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed")


def snippets(service_url: str = "https://id.example.com",
             issuer: str = "https://id.example.com") -> dict[str, str]:
    """Code blocks of the guide by the file name in their first line (`// src/NAME`)."""
    guide = integration_guide(service_url=service_url, issuer=issuer)
    found = {}
    for section in guide.sections:
        for code in re.findall(r"```\w+\n(.*?)```", section.markdown, re.S):
            name = re.match(r"// src/(\S+)", code)
            if name:
                found[name.group(1)] = code
    return found


def test_the_guide_has_the_files_it_refers_to() -> None:
    assert set(snippets()) == {"main.jsx", "App.jsx", "identity.js", "FlowForm.jsx"}
    imports = re.findall(r'from "\./(\w+)"', "".join(snippets().values()))
    assert set(imports) == {"App", "identity"}


@needs_node
def test_the_flow_helpers_parse_and_round_trip_base64url(tmp_path: Path) -> None:
    helpers = tmp_path / "identity.mjs"
    helpers.write_text(snippets()["identity.js"])
    subprocess.run([NODE, "--check", str(helpers)], check=True, timeout=60)
    # Drive the encoders the helpers define against node's own base64url.
    source = snippets()["identity.js"]
    codec = source[source.index("const fromBase64url"):source.index("const withIds")]
    check = tmp_path / "check.mjs"
    check.write_text(codec + """
for (let n = 0; n < 40; n++) {
  const bytes = Uint8Array.from({ length: n }, (_, i) => (i * 97 + 251) % 256);
  const text = toBase64url(bytes.buffer);
  if (text !== Buffer.from(bytes).toString("base64url")) throw new Error("encode " + n);
  const back = Buffer.from(fromBase64url(text));
  if (Buffer.compare(back, Buffer.from(bytes)) !== 0) throw new Error("decode " + n);
}
""")
    subprocess.run([NODE, str(check)], check=True, timeout=60)
