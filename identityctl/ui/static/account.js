// The account page: a public client of identityctl itself (authorization code + PKCE), then
// the person's profile, passkeys, signed-in applications, password and consents through
// /account/api. The access token lives in memory only; a reload signs in again, which the
// browser's session answers without a page. /account/enrol is the other device's page: it
// adds a passkey with the one-time link in its fragment. /device is where a person approves
// a device's sign-in (RFC 8628): the code it shows, then a sign-in, then Allow or Deny.
// No framework, no inline code.
"use strict";

(() => {
  const t = window.identityctlText;
  const root = document.getElementById("account");
  if (!root) return;
  const page = root.dataset;
  const $ = (id) => document.getElementById(id);
  const content = $("content");
  const { creationOptions, credentialJSON } = window.identityctlWebAuthn;
  const PENDING = "identityctl-account-pkce";
  const DEVICE_CODE = "identityctl-device-code";
  let accessToken = "";
  let idToken = "";

  const TEXT = {
    sign_in_too_old: "For this change, sign in again first.",
    last_credential: "This is your only way to sign in. Add another passkey or a password " +
      "first.",
    weak_password: "Choose a longer or less common password (at least 8 characters, not " +
      "your username).",
    link_used: "This link was used already. Make a new one on your account page.",
    user_code_invalid: "That code is not valid, or it has expired. Check the code your " +
      "device shows, then try again.",
    too_many_attempts: "Too many wrong codes. Wait a few minutes, then try again.",
    NotAllowedError: "The passkey request was cancelled or timed out.",
    InvalidStateError: "This device already has a passkey for your account.",
  };

  // --- small helpers ------------------------------------------------------------------------

  function element(tag, attributes = {}, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes)) {
      if (name === "onclick") node.addEventListener("click", value);
      else if (value !== undefined && value !== null) node.setAttribute(name, value);
    }
    node.append(...children.filter((child) => child !== null && child !== undefined));
    return node;
  }

  function button(text, onclick, secondary = false) {
    return element("button", { type: "button", class: secondary ? "secondary" : null, onclick },
      text);
  }

  function showError(text) {
    $("error").textContent = text || "";
    $("error").hidden = !text;
  }

  function setStatus(text) {
    $("status").textContent = text || "";
  }

  function when(seconds) {
    return seconds ? new Date(seconds * 1000).toLocaleString(document.documentElement.lang,
      { dateStyle: "medium", timeStyle: "short" }) : "—";
  }

  function base64url(bytes) {
    let binary = "";
    for (const byte of new Uint8Array(bytes)) binary += String.fromCharCode(byte);
    return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  function randomText() {
    return base64url(crypto.getRandomValues(new Uint8Array(32)));
  }

  class Refused extends Error {
    constructor(body, status) {
      super((body && (body.description || body.message)) || `HTTP ${status}`);
      this.code = (body && body.code) || `http_${status}`;
      this.status = status;
    }
  }

  async function call(method, path, body, bearer = true) {
    const headers = { "Content-Type": "application/json" };
    if (bearer) headers.Authorization = `Bearer ${accessToken}`;
    const response = await fetch(page.apiUrl + path, { method, headers, credentials: "omit",
      body: body === undefined ? undefined : JSON.stringify(body) });
    const data = response.status === 204 ? {} : await response.json().catch(() => ({}));
    if (!response.ok) throw new Refused(data, response.status);
    return data;
  }

  function messageFor(failure) {
    const known = TEXT[failure.code] || TEXT[failure.name];
    return known ? t(known) : t("Something went wrong. Try again.");
  }

  // --- signing in (authorization code + PKCE) -------------------------------------------------

  async function signIn(extra = {}) {
    const verifier = randomText();
    const state = randomText();
    const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
    sessionStorage.setItem(PENDING, JSON.stringify({ verifier, state }));
    const query = new URLSearchParams({ response_type: "code", client_id: page.clientId,
      redirect_uri: page.redirectUri, scope: page.scope, state,
      code_challenge: base64url(digest), code_challenge_method: "S256", ...extra });
    if (page.parRequired === "true") {  // the deployment takes pushed requests only (RFC 9126)
      const response = await fetch(page.parUrl, { method: "POST", credentials: "omit",
        headers: { "Content-Type": "application/x-www-form-urlencoded" }, body: query });
      const pushed = await response.json();
      if (!response.ok) throw new Refused(pushed, response.status);
      window.location.assign(`${page.authorizeUrl}?${new URLSearchParams(
        { client_id: page.clientId, request_uri: pushed.request_uri })}`);
      return;
    }
    window.location.assign(`${page.authorizeUrl}?${query}`);
  }

  async function finishSignIn(params) {
    const pending = JSON.parse(sessionStorage.getItem(PENDING) || "null");
    sessionStorage.removeItem(PENDING);
    history.replaceState(null, "", page.redirectUri);
    if (!pending || pending.state !== params.get("state")) {
      throw new Refused({ description: "The sign-in did not come back as expected. Sign in " +
        "again." }, 400);
    }
    const response = await fetch(page.tokenUrl, { method: "POST", credentials: "omit",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ grant_type: "authorization_code", code: params.get("code"),
        redirect_uri: page.redirectUri, client_id: page.clientId,
        code_verifier: pending.verifier }) });
    const tokens = await response.json();
    if (!response.ok) throw new Refused(tokens, response.status);
    accessToken = tokens.access_token;
    idToken = tokens.id_token || "";
  }

  // Changes that need a recent sign-in: offer it when the service asks for one.
  async function guarded(action) {
    showError("");
    try {
      await action();
    } catch (failure) {
      showError(messageFor(failure));
      if (failure.code === "sign_in_too_old") {
        $("error").append(" ", button(t("Sign in again"), () => signIn({ prompt: "login" })));
      }
    }
  }

  // --- the account ----------------------------------------------------------------------------

  function section(title, ...children) {
    const id = `section-${title.toLowerCase().replace(/[^a-z]+/g, "-")}`;
    return element("section", { "aria-labelledby": id, class: "account-section" },
      element("h2", { id }, title), ...children);
  }

  function table(headings, rows) {
    if (!rows.length) return element("p", { class: "status" }, t("None."));
    return element("table", {},
      element("thead", {}, element("tr", {}, ...headings.map((h) => element("th", {}, h)))),
      element("tbody", {}, ...rows.map((cells) => element("tr", {},
        ...cells.map((cell, index) => element("td", { "data-label": headings[index] },
          cell))))));
  }

  async function addPasskeyHere() {
    const started = await call("POST", "/passkeys/start", {});
    setStatus(t("Follow your device's prompt to create a passkey…"));
    const credential = await navigator.credentials.create(
      { publicKey: creationOptions(started.publicKeyCredentialCreationOptions) });
    await call("POST", "/passkeys/finish", { sessionToken: started.sessionToken,
      publicKeyCredential: credentialJSON(credential),
      credentialName: `Passkey on ${navigator.platform || "this device"}` });
    await render();  // the list shows the change when the status says it
    setStatus(t("Passkey added."));
  }

  async function linkForAnotherDevice(where) {
    const link = await call("POST", "/passkeys/link", {});
    where.replaceChildren(
      element("p", {}, t("On your other device, scan this code or open the link. It works " +
        "once, until {time}.", { time: new Date(link.expiresAt * 1000).toLocaleTimeString() })),
      element("img", { src: link.qrCode, alt: t("QR code of the link"), width: "180",
        height: "180" }),
      element("p", {}, element("a", { href: link.url, class: "link" }, link.url)));
  }

  async function render() {
    const [profile, passkeys, sessions, consents] = await Promise.all([
      call("GET", "/profile"), call("GET", "/passkeys"), call("GET", "/sessions"),
      call("GET", "/consents")]);
    const another = element("div", { id: "another-device" });
    const passwordField = element("input", { id: "new-password", type: "password",
      autocomplete: "new-password", required: "" });
    const passwordForm = element("form", { id: "password-form" },
      element("label", { for: "new-password" }, t("New password (at least 8 characters)")),
      passwordField, element("button", { type: "submit" },
        profile.hasPassword ? t("Change password") : t("Set a password")));
    passwordForm.addEventListener("submit", (event) => {
      event.preventDefault();
      guarded(async () => {
        await call("PUT", "/password", { password: passwordField.value });
        passwordField.value = "";
        setStatus(t("Password saved."));
      });
    });
    content.replaceChildren(
      section(t("Profile"), element("dl", {},
        element("dt", {}, t("Username")), element("dd", { id: "username" }, profile.username),
        element("dt", {}, t("Email")), element("dd", {}, emailText(profile)),
        element("dt", {}, t("Roles")), element("dd", {}, (profile.roles || []).join(", ") || "—"))),
      section(t("Passkeys"),
        table([t("Name"), t("Added"), t("Last used"), ""], passkeys.passkeys.map((key) => [
          key.name, when(key.createdAt), when(key.lastUsedAt),
          element("span", { class: "actions" },
            button(t("Rename"), () => guarded(async () => {
              const name = window.prompt(t("New name for this passkey"), key.name);
              if (name) await call("PATCH", `/passkeys/${encodeURIComponent(key.credentialId)}`,
                { name });
              await render();
            }), true),
            button(t("Delete"), () => guarded(async () => {
              if (!window.confirm(t("Delete the passkey \"{name}\"?", { name: key.name }))) {
                return;
              }
              await call("DELETE", `/passkeys/${encodeURIComponent(key.credentialId)}`);
              await render();
              setStatus(t("Passkey deleted."));
            }), true))])),
        element("p", { class: "actions" },
          button(t("Add a passkey on this device"), () => guarded(addPasskeyHere)),
          button(t("Add a passkey on another device"),
            () => guarded(() => linkForAnotherDevice(another)), true)),
        another),
      section(t("Signed in to"), table([t("Application"), t("Since"), t("Last used"), t("From"), ""],
        sessions.sessions.map((entry) => [entry.application, when(entry.signedInAt),
          when(entry.lastUsedAt), entry.address || "—",
          button(t("Sign out"), () => guarded(async () => {
            await call("DELETE", `/sessions/${encodeURIComponent(entry.id)}`);
            await render();
            setStatus(t("Signed out of {application}.", { application: entry.application }));
          }), true)]))),
      section(t("Password"), passwordForm),
      section(t("Recovery codes"), recoveryCodes(profile)),
      section(t("Applications you allowed"), table([t("Application"), t("May"), ""],
        consents.consents.map((grant) => [grant.application, grant.scopes.join(", "),
          button(t("Revoke"), () => guarded(async () => {
            await call("DELETE", `/consents?${new URLSearchParams({ clientId: grant.clientId })}`);
            await render();
            setStatus(t("{application} no longer has access.",
              { application: grant.application }));
          }), true)]))),
      element("p", {}, button(t("Sign out everywhere"), () => {
        const query = new URLSearchParams({ id_token_hint: idToken });
        window.location.assign(`${page.logoutUrl}?${query}`);
      }, true)));
  }

  function emailText(profile) {
    const address = (profile.attributes || {}).email;
    if (!address) return "—";
    return `${address} (${profile.emailVerified ? t("confirmed") : t("not confirmed")})`;
  }

  // Codes for "Lost your passkey?": made here, shown once, each works once.
  function recoveryCodes(profile) {
    const shown = element("div", { id: "recovery-codes" });
    const make = button(profile.recoveryCodesLeft ? t("Make new recovery codes")
      : t("Make recovery codes"), () => guarded(async () => {
      const made = await call("POST", "/recovery-codes", {});
      shown.replaceChildren(
        element("p", {}, t("Keep these somewhere safe, apart from your devices. Each works " +
          "once. They are not shown again.")),
        element("ul", { class: "codes" }, ...made.recoveryCodes.map(
          (code) => element("li", {}, element("code", {}, code)))));
      setStatus(t("New recovery codes made; the old ones no longer work."));
    }), true);
    return element("div", {},
      element("p", {}, profile.recoveryCodesLeft
        ? t("You have {count} unused recovery codes.", { count: profile.recoveryCodesLeft })
        : t("With a recovery code you can get back in if you lose your passkeys.")),
      element("p", { class: "actions" }, make), shown);
  }

  // --- the other device: a passkey from a one-time link --------------------------------------

  async function enrol() {
    const link = window.location.hash.slice(1);
    history.replaceState(null, "", window.location.pathname);  // the link leaves the URL
    if (!link) throw new Refused({ description: "This page needs the link from your " +
      "account page." }, 400);
    const started = await call("POST", "/enrol/start", { link }, false);
    content.replaceChildren(
      element("p", {}, t("Add a passkey for {username} on this device. A passkey lets you " +
        "sign in with your fingerprint, face or screen lock instead of a password.",
      { username: started.username })),
      button(t("Create a passkey"), () => guarded(async () => {
        const credential = await navigator.credentials.create(
          { publicKey: creationOptions(started.publicKeyCredentialCreationOptions) });
        await call("POST", "/enrol/finish", { link, sessionToken: started.sessionToken,
          publicKeyCredential: credentialJSON(credential),
          credentialName: `Passkey on ${navigator.platform || "another device"}` }, false);
        content.replaceChildren(element("p", { id: "done" },
          t("Your passkey is ready. You can sign in with it on this device.")));
      })));
  }

  // --- /device: a device's sign-in (RFC 8628) ---------------------------------------------------

  function askForCode(typed) {
    const field = element("input", { id: "user-code", name: "user_code", autocomplete: "off",
      autocapitalize: "characters", spellcheck: "false", required: "",
      "aria-describedby": "user-code-help" });
    field.value = typed || "";
    const form = element("form", { id: "device-form" },
      element("label", { for: "user-code" }, t("Code shown on your device")),
      element("p", { id: "user-code-help", class: "status" },
        t("Eight letters, like BCDF-GHJK. You sign in next, then choose whether to allow " +
          "the device.")),
      field, element("button", { type: "submit" }, t("Continue")));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      sessionStorage.setItem(DEVICE_CODE, field.value.trim());
      guarded(async () => (accessToken ? deviceQuestion() : signIn()));
    });
    content.replaceChildren(form);
    field.focus();
  }

  async function deviceQuestion() {
    const userCode = sessionStorage.getItem(DEVICE_CODE) || "";
    if (!userCode) return askForCode("");
    let request;
    try {
      request = await call("GET", `/device?${new URLSearchParams({ userCode })}`);
    } catch (failure) {
      askForCode(userCode);
      throw failure;
    }
    const answer = (decision) => guarded(async () => {
      const decided = await call("POST", "/device", { userCode, decision });
      sessionStorage.removeItem(DEVICE_CODE);
      content.replaceChildren(element("p", { id: "done" }, decided.approved
        ? t("Done. {client} is signed in on your device. You can close this page.",
          { client: request.client })
        : decided.reason || t("You said no. The device was not signed in.")));
    });
    content.replaceChildren(...[
      element("p", {}, t("Sign in to {client} on your device?", { client: request.client })),
      element("p", {}, t("Only allow this if your device shows the code {code}.",
        { code: request.userCode })),
      element("ul", {}, ...request.scopes.map((scope) => element("li", {},
        t(scope.description)))),
      request.resources.length ? element("p", {}, t("For use at: {resources}",
        { resources: request.resources.join(", ") })) : null,
      element("p", { class: "actions" }, button(t("Allow"), () => answer("allow")),
        button(t("Deny"), () => answer("deny"), true))].filter(Boolean));
    return undefined;
  }

  async function start() {
    try {
      if (page.mode === "enrol") return await enrol();
      const params = new URLSearchParams(window.location.search);
      if (page.mode === "device" && !params.get("code") && !params.get("error")) {
        return askForCode(params.get("user_code") || sessionStorage.getItem(DEVICE_CODE));
      }
      if (params.get("error")) {
        history.replaceState(null, "", page.redirectUri);
        throw new Refused({ description: params.get("error_description") ||
          t("The sign-in did not complete.") }, 400);
      }
      if (!params.get("code")) return await signIn();
      await finishSignIn(params);
      await (page.mode === "device" ? deviceQuestion() : render());
      $("heading").focus();
    } catch (failure) {
      showError(page.mode === "enrol" && failure.code === "invalid_token"
        ? t("This link has expired. Make a new one on your account page.")
        : messageFor(failure));
    }
    return undefined;
  }

  // The link opened again in this tab changes only the fragment: no new page, so run again.
  if (page.mode === "enrol") window.addEventListener("hashchange", start);
  start();
})();
