// The admin console's shell: signing in (client-page.js's authorization code + PKCE, as the
// account page does, with the admin API as the token's resource), calls to /admin/api/v1,
// step-up, the areas' navigation and the helpers the area modules draw with. The areas
// (admin-users.js, admin-records.js) register themselves with identityctlAdmin.area();
// the shell starts once every deferred module has run. The access token lives in memory
// only; a reload signs in again, which the browser's session answers without a page.
// No framework, no inline code.
"use strict";

(() => {
  const t = window.identityctlText;
  const root = document.getElementById("admin");
  if (!root) return;
  const page = root.dataset;
  const $ = (id) => document.getElementById(id);
  const content = $("content");
  const {
    element, button, whole, when, section, showError, setStatus, feedback, say, clearFeedback,
    Refused, signInFor,
  } = window.identityctlClientPage;
  const PENDING = "identityctl-admin-pkce";
  // The change a step-up sign-in interrupted: made once more when the sign-in comes back.
  const RETRY = "identityctl-admin-retry";
  const areas = {};
  let accessToken = "";
  let idToken = "";

  const TEXT = {
    sign_in_too_old: "This change needs a fresh sign-in with your passkey. Try again.",
    user_not_found: "This user no longer exists.",
    application_not_found: "This application no longer exists.",
    invalid_cursor: "The list changed meanwhile. Start again from the first page.",
    database_busy: "The service is busy. Try again in a moment.",
    database_unavailable: "The service cannot reach its database. Try again later.",
    NotAllowedError: "The passkey request was cancelled or timed out.",
  };

  // --- signing in (the admin API is the token's resource; back where the person was) --------

  const { signIn, returned, redeem } = signInFor(page, { key: PENDING, keepPlace: true,
    params: { resource: page.resource, ui_locales: document.documentElement.lang } });

  // What a person reads of a failure: the console's own words for what it knows; for a
  // refused input the service's sentence (it names what to change); else a plain apology.
  function messageFor(failure) {
    const known = TEXT[failure.code] || TEXT[failure.name];
    if (known) return t(known);
    if (failure instanceof Refused && failure.status >= 400 && failure.status < 500
        && ![401, 403].includes(failure.status)) return refusal(failure);
    return t("Something went wrong. Try again.");
  }

  // A refused input in the person's language: on an English page the service's sentence
  // (``detail``: what a field's refusal says of it), else the kind of refusal, translated.
  function refusal(failure, detail = failure.message) {
    const english = !document.documentElement.lang || document.documentElement.lang === "en";
    return english ? detail : t(failure.message);
  }

  // --- the admin API ------------------------------------------------------------------------

  async function send(method, path, body) {
    const headers = { Authorization: `Bearer ${accessToken}` };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const response = await fetch(page.apiUrl + path, { method, headers, credentials: "omit",
      body: body === undefined ? undefined : JSON.stringify(body) });
    if (!response.ok) {
      const data = await response.json().catch(() => ({}));
      throw new Refused(data, response.status, response.headers.get("WWW-Authenticate") || "");
    }
    return response;
  }

  async function request(method, path, body) {
    const response = await send(method, path, body);
    return response.status === 204 ? {} : response.json().catch(() => ({}));
  }

  // A call of the API. Every change by a person needs a passkey sign-in within
  // admin.step_up_seconds: a change asked later is made once more after that sign-in, back
  // where the person was (see change()).
  function call(method, path, body) {
    if (method === "GET") return request(method, path, body);
    return change(method, path, body, { hash: window.location.hash,
      said: t("Signed in again with your passkey; the change was made.") });
  }

  // A change that may need a fresh passkey sign-in (RFC 9470): when the API asks for one,
  // the console signs in again with max_age=0 and, back here, makes the change once more;
  // then it opens ``after.hash`` and says ``after.said``.
  async function change(method, path, body, after) {
    try {
      return await request(method, path, body);
    } catch (failure) {
      if (!failure.stepUp) throw failure;
      sessionStorage.setItem(RETRY, JSON.stringify({ method, path, body, after }));
      setStatus(t("Confirm with your passkey…"));
      await signIn({ max_age: "0" });
      return new Promise(() => {});  // the page is leaving for the sign-in
    }
  }

  async function retryInterrupted() {
    const pending = JSON.parse(sessionStorage.getItem(RETRY) || "null");
    sessionStorage.removeItem(RETRY);
    if (!pending) return null;
    try {
      await request(pending.method, pending.path, pending.body);
    } catch (failure) {
      return () => showError(messageFor(failure));
    }
    history.replaceState(null, "", page.redirectUri + pending.after.hash);
    return () => setStatus(pending.after.said);
  }

  // A download of an API answer (the audit export): fetched with the token, which a plain
  // link cannot carry, then saved under ``name``.
  async function download(path, name) {
    const blob = await (await send("GET", path)).blob();
    const url = URL.createObjectURL(blob);
    const saving = element("a", { href: url, download: name, hidden: true });
    document.body.append(saving);
    saving.click();
    saving.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
  }

  // Runs an action; a failure is said by the control of ``slot`` (else at the top), and a
  // token run out signs in again.
  async function guarded(action, slot) {
    clearFeedback();
    try {
      await action();
    } catch (failure) {
      if (failure instanceof Refused && failure.status === 401 && !failure.stepUp) {
        await signIn();  // the token ran out: the browser's session answers without a page
        return;
      }
      if (slot) say(slot, messageFor(failure), true);
      else showError(messageFor(failure));
    }
  }

  // --- drawing -----------------------------------------------------------------------------

  function table(headings, rows, caption) {
    if (!rows.length) return element("p", { class: "status" }, t("None."));
    return element("table", {}, caption ? element("caption", { class: "visually-hidden" },
      caption) : null,
    element("thead", {}, element("tr", {}, ...headings.map((h) => element("th",
      { scope: "col" }, h)))),
    element("tbody", {}, ...rows.map((cells) => element("tr", {},
      ...cells.map((cell, index) => element("td", { "data-label": headings[index] },
        cell))))));
  }

  // A list the API pages by cursor: a table, Previous and Next. ``fetchPage(cursor)`` answers
  // {items, next}; the cursors of the pages seen are kept so Previous goes back. ``load()``
  // shows the first page.
  function pagedTable({ label, headings, row, fetchPage }) {
    const starts = [null];
    let index = 0;
    const rows = element("div", { class: "paged-rows" });
    const previous = button(t("Previous page"), () => turn(-1), true);
    const next = button(t("Next page"), () => turn(1), true);
    const where = element("span", { class: "page-number" });
    const holder = element("div", { class: "paged" }, rows,
      element("nav", { class: "pager", "aria-label": t("Pages of {list}", { list: label }) },
        previous, where, next));
    async function load() {
      const answer = await fetchPage(starts[index]);
      starts[index + 1] = answer.next || null;
      rows.replaceChildren(table(headings, answer.items.map(row), label));
      where.textContent = t("Page {number}", { number: index + 1 });
      previous.disabled = index === 0;
      next.disabled = !answer.next;
      const focused = document.activeElement;
      if (!focused || focused === document.body || focused.disabled) {
        (next.disabled ? previous : next).focus();  // the pressed button went grey
      }
    }
    function turn(step) {
      guarded(async () => {
        index += step;
        try {
          await load();
        } catch (failure) {
          index -= step;
          throw failure;
        }
      });
    }
    // From the first page again (a new search).
    async function restart() {
      starts.splice(1);
      index = 0;
      await load();
    }
    return { holder, load: restart };
  }

  // A labelled field of a form: the label, the control, and a hint it is described by.
  function field(id, labelText, control, hint) {
    control.id = id;
    if (!control.name) control.name = id;
    if (hint) control.setAttribute("aria-describedby", `${id}-hint`);
    return element("div", { class: "field" }, element("label", { for: id }, labelText),
      hint ? element("p", { id: `${id}-hint`, class: "hint" }, hint) : null, control);
  }

  function heading(text) {
    $("heading").textContent = text;
    document.title = `${text} – ${t("Administration")}`;
  }

  // --- areas and the navigation --------------------------------------------------------------

  // ``#/area/part?query`` -> {parts, query}; other fragments (the skip link's) are no place.
  function place() {
    const hash = window.location.hash;
    if (!hash.startsWith("#/")) return null;
    const [path, query] = hash.slice(2).split("?");
    return { parts: path.split("/").filter(Boolean).map(decodeURIComponent),
      query: new URLSearchParams(query || "") };
  }

  async function show(focus = true) {
    const where = place() || { parts: ["users"], query: new URLSearchParams() };
    const name = areas[where.parts[0]] ? where.parts[0] : "users";
    for (const link of $("areas").querySelectorAll("a")) {
      if (link.getAttribute("href") === `#/${name}`) link.setAttribute("aria-current", "page");
      else link.removeAttribute("aria-current");
    }
    content.replaceChildren();
    await guarded(() => areas[name](where));
    if (focus) $("heading").focus();
  }

  // The plain refusal: who is signed in may not administer (or signed in without a passkey).
  function refuse(reason) {
    const passkey = reason === "passkey_required";
    heading(passkey ? t("Sign in with a passkey") : t("You cannot use the admin console"));
    $("areas").hidden = true;
    content.replaceChildren(
      element("p", {}, passkey
        ? t("The admin console needs a sign-in with a passkey; a password alone is not " +
          "enough here.")
        : t("Only people with the administrator role can open this page. If you need it, " +
          "ask one of your administrators.")),
      element("p", { class: "actions" },
        button(passkey ? t("Sign in with a passkey") : t("Sign in as someone else"),
          () => guarded(() => signIn({ prompt: "login" }))),
        element("a", { href: page.accountUrl, class: "link-button secondary" },
          t("Go to your account"))));
    $("heading").focus();
  }

  function signOut() {
    const query = new URLSearchParams(idToken ? { id_token_hint: idToken } : {});
    window.location.assign(`${page.logoutUrl}?${query}`);
  }

  async function start() {
    try {
      const params = new URLSearchParams(window.location.search);
      if (!params.get("code") && !params.get("error")) return await signIn();
      const pending = returned();
      if (params.get("error")) {
        // The hosted sign-in refuses the admin scope to someone without the role.
        if (params.get("error") === "access_denied") return refuse("not_an_admin");
        throw new Refused({ message: t("The sign-in did not complete.") }, 400);
      }
      const tokens = await redeem(params, pending);
      accessToken = tokens.access_token;
      idToken = tokens.id_token || "";
      let me;
      try {
        me = await call("GET", "/me");
      } catch (failure) {
        if (failure.status === 403) return refuse(failure.code);
        throw failure;
      }
      $("signed-in-as").textContent = t("Signed in as {name}", { name: me.displayName
        || me.username });
      $("signed-in").hidden = false;
      $("areas").hidden = false;
      const then = await retryInterrupted();
      await show();
      if (then) then();
    } catch (failure) {
      showError(messageFor(failure));
    }
    return undefined;
  }

  $("sign-out").addEventListener("click", signOut);
  window.addEventListener("hashchange", () => {
    if (accessToken && place()) show();
  });

  window.identityctlAdmin = {
    t, page, element, button, whole, when, section, table, pagedTable, field, heading,
    feedback, say, setStatus, showError, guarded, call, change, download, messageFor, refusal,
    // An area: ``render({parts, query})`` draws ``#/name/...`` into the content.
    area(name, render) { areas[name] = render; },
    content: () => content,
    go(hash) { window.location.hash = hash; },
  };
  document.addEventListener("DOMContentLoaded", start);
})();
