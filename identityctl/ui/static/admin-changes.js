// The admin console's Changes area: what an AI assistant proposed over MCP, the diff each
// would make, and Approve, which runs a passkey assertion whose challenge the service made
// from the digest of exactly that diff (so the signature covers what is applied), or Reject.
"use strict";

(() => {
  const admin = window.identityctlAdmin;
  const webauthn = window.identityctlWebAuthn;
  if (!admin || !webauthn) return;
  const { t, element, button, whole, when, section, feedback, say } = admin;

  const STATES = {
    pending: "Waiting for approval",
    approved: "Approved and applied",
    rejected: "Rejected",
    expired: "Expired",
    failed: "Failed: not applied",
  };
  const ACTIONS = { create: "+", update: "~", delete: "−" };

  const path = (id, rest = "") => `/changes/${encodeURIComponent(id)}${rest}`;

  async function changes(where) {
    if (where.parts[1]) return change(where.parts[1]);
    admin.heading(t("Changes"));
    const table = admin.pagedTable({
      label: t("Changes"),
      headings: [t("Change"), t("Proposed by"), t("State"), t("Proposed")],
      row: (item) => [element("a", { href: `#/changes/${encodeURIComponent(item.id)}` },
        item.summary), whole(item.author), t(STATES[item.state] || item.state),
      when(item.createdAt)],
      fetchPage: (cursor) => admin.call("GET", `/changes?${new URLSearchParams({
        limit: "50", ...(cursor ? { cursor } : {}) })}`),
    });
    admin.content().replaceChildren(element("p", {}, t("Changes an AI assistant proposed " +
      "over MCP. Each takes effect only when an administrator approves it with a passkey.")),
    table.holder);
    await table.load();
    return undefined;
  }

  function entry(label, value) {
    return [element("dt", {}, label), element("dd", {}, value)];
  }

  function diffOf(items) {
    return element("ol", { class: "diff" }, ...items.map((item) => element("li", {},
      element("p", {}, element("strong", {}, `${ACTIONS[item.action] || item.action} `),
        element("code", {}, `${item.section}/${item.key}`)),
      item.before ? element("details", {}, element("summary", {}, t("Before")),
        element("pre", {}, JSON.stringify(item.before, null, 2))) : null,
      item.after ? element("pre", { "aria-label": t("After") },
        JSON.stringify(item.after, null, 2)) : null)));
  }

  async function change(id) {
    const shown = await admin.call("GET", path(id));
    admin.heading(t("Change: {summary}", { summary: shown.summary }));
    const decide = shown.state === "pending" && shown.intact ? element("p",
      { class: "actions" },
      button(t("Approve with your passkey"), () => admin.guarded(() => approve(shown),
        "change")),
      button(t("Reject"), () => admin.guarded(() => reject(shown), "change"), true)) : null;
    admin.content().replaceChildren(...[
      element("dl", { class: "facts" },
        ...entry(t("State"), t(STATES[shown.state] || shown.state)),
        ...entry(t("Proposed by"), whole(shown.author)),
        ...entry(t("Through the client"), whole(shown.clientId)),
        ...entry(t("Proposed"), when(shown.createdAt)),
        ...entry(t("Expires"), when(shown.expiresAt)),
        ...entry(t("Digest (SHA-256)"), element("code", {}, shown.digest)),
        ...(shown.reason ? entry(t("Reason"), shown.reason) : [])),
      shown.intact ? null : element("p", { class: "error" }, t("This change was altered " +
        "after it was proposed: it cannot be approved.")),
      section(t("What it changes"), diffOf(shown.diff)),
      feedback("change"), decide,
      element("p", {}, element("a", { href: "#/changes" }, t("All changes")))].filter(Boolean));
    return undefined;
  }

  async function approve(shown) {
    const asked = await admin.call("POST", path(shown.id, "/approval"));
    say("change", t("Confirm with your passkey…"));
    const credential = await navigator.credentials.get({
      publicKey: webauthn.requestOptions(asked.publicKeyCredentialRequestOptions) });
    await admin.call("POST", path(shown.id, "/approve"), {
      publicKeyCredential: webauthn.credentialJSON(credential),
      sessionToken: asked.sessionToken, nonce: asked.nonce });
    await change(shown.id);
    say("change", t("The change was approved and applied."));
  }

  async function reject(shown) {
    await admin.call("POST", path(shown.id, "/reject"), {});
    await change(shown.id);
    say("change", t("The change was rejected; nothing was applied."));
  }

  admin.area("changes", changes);
})();
