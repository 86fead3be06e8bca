// What the pages that are public clients of identityctl itself (account.js, admin.js) share:
// drawing with the DOM, feedback by a control, the service's refusals, and signing in with
// authorization code + PKCE (pushed, RFC 9126, where the deployment requires it). Tokens are
// handed to the page, which keeps them in memory only; sessionStorage holds only the pending
// request (the PKCE verifier and state) until the sign-in comes back. Loaded before the
// page's own script.
"use strict";

(() => {
  const t = window.identityctlText;
  const $ = (id) => document.getElementById(id);

  // --- drawing -------------------------------------------------------------------------------

  // An attribute true is present without a value; false, null or undefined leave it out.
  function element(tag, attributes = {}, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes)) {
      if (name === "onclick") node.addEventListener("click", value);
      else if (value !== undefined && value !== null && value !== false) {
        node.setAttribute(name, value === true ? "" : value);
      }
    }
    node.append(...children.filter((child) => child !== null && child !== undefined));
    return node;
  }

  function button(text, onclick, secondary = false) {
    return element("button", { type: "button", class: secondary ? "secondary" : null, onclick },
      text);
  }

  // A value a table keeps on one line where there is room (a date, an address).
  function whole(text) {
    return element("span", { class: "nowrap" }, text || "—");
  }

  function when(seconds) {
    return whole(seconds ? new Date(seconds * 1000).toLocaleString(document.documentElement.lang,
      { dateStyle: "medium", timeStyle: "short" }) : "—");
  }

  // A section's heading names it; its id is its place on the page (a title in Arabic or
  // Japanese has no letters a-z to make one of, and every section got the same).
  let sections = 0;

  function section(title, ...children) {
    const id = `section-${++sections}`;
    return element("section", { "aria-labelledby": id, class: "account-section" },
      element("h2", { id }, title), ...children);
  }

  // --- feedback: a live region per part of the page (``slot``), found by id again after the
  // page is drawn anew; every action first clears what earlier ones said ------------------------

  function showError(text) {
    $("error").textContent = text || "";
    $("error").hidden = !text;
  }

  function setStatus(text) {
    $("status").textContent = text || "";
  }

  function feedback(slot) {
    return element("p", { id: `feedback-${slot}`, class: "feedback", role: "status",
      "aria-live": "polite" });
  }

  function say(slot, text, failed = false) {
    const where = $(`feedback-${slot}`) || $("status");
    where.textContent = text || "";
    where.classList.toggle("error", failed);
    return where;
  }

  function clearFeedback() {
    showError("");
    setStatus("");
    for (const where of document.querySelectorAll(".feedback")) say(where.id.slice(9), "");
  }

  // --- the service's refusals ------------------------------------------------------------------

  class Refused extends Error {
    constructor(body, status, challenge = "") {
      super((body && body.message) || `HTTP ${status}`);
      this.code = (body && body.code) || `http_${status}`;
      // Names what was refused (a field's path), for a page that says it by that field.
      this.description = (body && body.description) || "";
      this.status = status;
      // RFC 9470: the API asks for a fresh sign-in; any other 401 is a token run out.
      this.stepUp = status === 401 && (this.code === "sign_in_too_old"
        || challenge.includes("insufficient_user_authentication"));
    }
  }

  // --- signing in (authorization code + PKCE, RFC 7636) ----------------------------------------

  function base64url(bytes) {
    let binary = "";
    for (const byte of new Uint8Array(bytes)) binary += String.fromCharCode(byte);
    return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  function randomText() {
    return base64url(crypto.getRandomValues(new Uint8Array(32)));
  }

  // The sign-in of one page. ``page`` is its root's data (clientId, redirectUri, scope,
  // authorizeUrl, tokenUrl, parUrl, parRequired); ``key`` names its pending request in
  // sessionStorage; ``params`` are the authorization parameters only this page sends;
  // with ``keepPlace`` the address gets its fragment back when the sign-in returns.
  function signInFor(page, { key, params = {}, keepPlace = false }) {
    const form = { "Content-Type": "application/x-www-form-urlencoded" };

    // Leaves for the authorization endpoint; ``extra`` are this sign-in's own parameters
    // (prompt, max_age).
    async function signIn(extra = {}) {
      const verifier = randomText();
      const state = randomText();
      const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
      sessionStorage.setItem(key, JSON.stringify(
        { verifier, state, ...(keepPlace ? { back: window.location.hash } : {}) }));
      const query = new URLSearchParams({ response_type: "code", client_id: page.clientId,
        redirect_uri: page.redirectUri, scope: page.scope, state,
        code_challenge: base64url(digest), code_challenge_method: "S256", ...params, ...extra });
      if (page.parRequired === "true") {  // the deployment takes pushed requests only
        const response = await fetch(page.parUrl, { method: "POST", credentials: "omit",
          headers: form, body: query });
        const pushed = await response.json();
        if (!response.ok) throw new Refused(pushed, response.status);
        window.location.assign(`${page.authorizeUrl}?${new URLSearchParams(
          { client_id: page.clientId, request_uri: pushed.request_uri })}`);
        return;
      }
      window.location.assign(`${page.authorizeUrl}?${query}`);
    }

    // The sign-in's answer in the address: the pending request it belongs to, or null. The
    // answer leaves the address, and the request sessionStorage.
    function returned() {
      const pending = JSON.parse(sessionStorage.getItem(key) || "null");
      sessionStorage.removeItem(key);
      history.replaceState(null, "", page.redirectUri + ((pending && pending.back) || ""));
      return pending;
    }

    // The code of the answer ``params`` for the tokens, with the pending request's verifier.
    async function redeem(params, pending) {
      if (!pending || pending.state !== params.get("state")) {
        throw new Refused({ message: t("The sign-in did not come back as expected. Sign in " +
          "again.") }, 400);
      }
      const response = await fetch(page.tokenUrl, { method: "POST", credentials: "omit",
        headers: form,
        body: new URLSearchParams({ grant_type: "authorization_code", code: params.get("code"),
          redirect_uri: page.redirectUri, client_id: page.clientId,
          code_verifier: pending.verifier }) });
      const tokens = await response.json();
      if (!response.ok) throw new Refused(tokens, response.status);
      return tokens;
    }

    return { signIn, returned, redeem };
  }

  // A passkey's authenticator (from a list of passkeys): its icon and its name, or a dash.
  // The icon is an <img> (a dark one where the person's colours are dark): an SVG there
  // runs nothing, and its markup never enters the page.
  function authenticator(key) {
    if (!key.authenticator) return whole("");
    const icon = key.icon ? element("picture", {},
      element("source", { srcset: key.iconDark, media: "(prefers-color-scheme: dark)" }),
      element("img", { src: key.icon, alt: "", class: "authenticator-icon", width: 20,
        height: 20 })) : null;
    return element("span", { class: "authenticator" }, icon, key.authenticator);
  }

  window.identityctlClientPage = {
    element, button, whole, when, section, showError, setStatus, feedback, say, clearFeedback,
    Refused, signInFor, authenticator,
  };
})();
