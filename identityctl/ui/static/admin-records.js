// The admin console's record areas: Applications (list, create from a template with the
// secret shown once, delete with a fresh passkey sign-in; an application's page that edits
// its redirect URIs, grant types, scopes, allowed user types, flows and theme, and makes a
// new secret, shown once), the Audit log (filters, paging, export) and Operations (numbers,
// and sign-ins per day drawn in SVG).
"use strict";

(() => {
  const admin = window.identityctlAdmin;
  if (!admin) return;
  const { t, element, button, whole, when, section, table, field, feedback, say, page } = admin;
  const SVG = "http://www.w3.org/2000/svg";

  // What each template makes, in words (the template's name stays beside it).
  const TEMPLATES = {
    SPA: "Single-page app (in the browser)",
    Server: "Web app with a server",
    Mobile: "Mobile or desktop app",
    Device: "TV or device without a keyboard",
    M2M: "Machine to machine (no person)",
  };
  const builtIn = new Set((page.builtIn || "").split(" ").filter(Boolean));

  function oauthOf(application) {
    const inbound = (application.inboundAuthConfig || []).find((entry) => entry.type === "oauth2");
    return (inbound && inbound.config) || {};
  }

  // --- applications -----------------------------------------------------------------------

  async function applications(where) {
    if (where.parts[1]) return application(where.parts[1], where.query);
    admin.heading(t("Applications"));
    const list = admin.pagedTable({
      label: t("Applications"),
      headings: [t("Name"), t("Template"), t("Client ID"), ""],
      row: (application) => {
        const clientId = oauthOf(application).clientId || "";
        return [element("a", { href: `#/applications/${encodeURIComponent(application.id)}` },
          application.name), application.template || "—",
          element("code", {}, clientId),
          builtIn.has(clientId) ? element("span", { class: "tag" }, t("built in"))
            : button(t("Delete"), () => admin.guarded(async () => {
              if (!window.confirm(t("Delete {name}? Its sign-ins and tokens stop working. You " +
                "confirm with your passkey.", { name: application.name }))) return;
              const said = t("{name} was deleted.", { name: application.name });
              await admin.change("DELETE",
                `/applications/${encodeURIComponent(application.id)}`, undefined,
                { hash: "#/applications", said });
              await list.load();
              say("applications", said);
            }, "applications"), true)];
      },
      fetchPage: (cursor) => admin.call("GET", `/applications?${new URLSearchParams({
        limit: "50", ...(cursor ? { cursor } : {}) })}`),
    });
    admin.content().replaceChildren(feedback("applications"), list.holder,
      newApplication(list));
    await list.load();
    return undefined;
  }

  function newApplication(list) {
    const name = element("input", { autocomplete: "off", required: true });
    const template = element("select", {}, ...(page.templates || "").split(" ")
      .filter(Boolean).map((kind) => element("option", { value: kind },
        TEMPLATES[kind] ? `${t(TEMPLATES[kind])} (${kind})` : kind)));
    const redirect = element("input", { type: "url", autocomplete: "off",
      placeholder: "https://app.example.com/callback" });
    const made = element("div", { id: "new-secret" });
    const form = element("form", { class: "stacked" },
      field("application-name", t("Name"), name),
      field("application-template", t("Template"), template),
      field("application-redirect", t("Redirect URI"), redirect,
        t("Where people come back after signing in. Not needed for machine to machine or " +
          "a device.")),
      element("button", { type: "submit" }, t("Create application")),
      feedback("new-application"));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      admin.guarded(async () => {
        const uri = redirect.value.trim();
        const created = await admin.call("POST", "/applications", { template: template.value,
          name: name.value.trim(), ...(uri ? { oauth: { redirectUris: [uri] } } : {}) });
        form.reset();
        made.replaceChildren(...shownOnce(created, t("{name} was created.",
          { name: created.name })));
        await list.load();
        made.querySelector("h3").focus();
      }, "new-application");
    });
    return section(t("New application"), form, made);
  }

  // The application's credentials: the secret exists only in this answer (a new
  // application's, or a new secret's: ``title`` says which).
  function shownOnce(created, title) {
    const clientId = oauthOf(created).clientId || "";
    const parts = [
      element("h3", { tabindex: "-1" }, title),
      element("dl", {}, element("dt", {}, t("Client ID")),
        element("dd", {}, element("code", { id: "new-client-id" }, clientId)),
        ...(created.clientSecret ? [element("dt", {}, t("Client secret")),
          element("dd", {}, element("code", { id: "new-client-secret" },
            created.clientSecret))] : []))];
    if (created.clientSecret) {
      parts.push(element("p", { class: "notice" }, t("Copy the secret now and keep it in " +
        "the application's settings. It is not shown again; if it is lost, make a new one.")),
      element("p", { class: "actions" }, button(t("Copy the secret"), () => admin.guarded(
        async () => {
          await navigator.clipboard.writeText(created.clientSecret);
          say("secret", t("Copied."));
        }, "secret"), true)), feedback("secret"));
    } else {
      parts.push(element("p", {}, t("This application has no secret: it proves itself with " +
        "PKCE.")));
    }
    return parts;
  }

  // --- one application ---------------------------------------------------------------------

  // The settings its page edits: the form's name of each -> where the service names it.
  const SETTINGS = ["redirectUris", "grantTypes", "scopes", "allowedUserTypes", "authFlowId",
    "registrationFlowId", "themeId", "passkeysOnly"];
  // The query a page comes back with after a fresh sign-in for a new secret.
  const NEW_SECRET = "new-secret";

  function lines(text) {
    return text.split(/[\s,]+/).map((item) => item.trim()).filter(Boolean);
  }

  // Boxes to tick, one per ``choices`` value, those in ``chosen`` ticked.
  function boxes(id, legend, choices, chosen, hint) {
    const fieldset = element("fieldset", { class: "choices", id,
      "aria-describedby": hint ? `${id}-hint` : null }, element("legend", {}, legend),
    hint ? element("p", { id: `${id}-hint`, class: "hint" }, hint) : null,
    ...choices.map((choice) => element("label", { class: "choice" },
      element("input", { type: "checkbox", value: choice, checked: chosen.includes(choice) }),
      " ", choice)), feedback(id));
    fieldset.values = () => [...fieldset.querySelectorAll("input:checked")]
      .map((box) => box.value);
    return fieldset;
  }

  // A choice of one of ``items`` (or none: the deployment's default).
  function choice(items, current, none) {
    return element("select", {}, element("option", { value: "" }, none),
      ...items.map((item) => element("option", { value: item.id, selected: item.id === current },
        item.displayName || item.name || item.handle)));
  }

  async function listed(path) {
    return (await admin.call("GET", path)).items;
  }

  async function application(appId, query) {
    const path = `/applications/${encodeURIComponent(appId)}`;
    const [app, directory, themes, signIns, registrations, discovery] = await Promise.all([
      admin.call("GET", path), admin.call("GET", "/directory"), listed("/themes"),
      listed("/flows?flowType=AUTHENTICATION"), listed("/flows?flowType=REGISTRATION"),
      fetch(new URL("/.well-known/openid-configuration", page.apiUrl)).then((answer) =>
        answer.json())]);
    const oauth = oauthOf(app);
    admin.heading(app.name);
    const controls = {
      redirectUris: element("textarea", { rows: "3", spellcheck: "false" }),
      grantTypes: boxes("app-grantTypes", t("Grant types"), discovery.grant_types_supported,
        oauth.grantTypes || [], t("How the application gets its tokens.")),
      scopes: element("input", { autocomplete: "off", spellcheck: "false" }),
      allowedUserTypes: boxes("app-allowedUserTypes", t("Who may sign in"),
        directory.userTypes.map((kind) => kind.name), app.allowedUserTypes || [],
        t("None ticked: people of every user type.")),
      authFlowId: choice(signIns, app.authFlowId, t("The default sign-in")),
      registrationFlowId: choice(registrations, app.registrationFlowId,
        t("The default registration")),
      themeId: choice(themes, app.themeId, t("The default theme")),
      passkeysOnly: element("input", { type: "checkbox", id: "app-passkeysOnly",
        checked: !!app.passkeysOnly, "aria-describedby": "app-passkeysOnly-hint" }),
    };
    controls.redirectUris.value = (oauth.redirectUris || []).join("\n");
    controls.scopes.value = (oauth.scopes || []).join(" ");
    const labelled = (name, label, hint) => element("div", {},
      field(`app-${name}`, label, controls[name], hint), feedback(`app-${name}`));
    const form = element("form", { class: "stacked", "aria-label": t("Settings") },
      labelled("redirectUris", t("Redirect URIs"), t("One a line: where people come back " +
        "after signing in.")),
      controls.grantTypes,
      labelled("scopes", t("Scopes"), t("Separated by spaces.")),
      controls.allowedUserTypes,
      labelled("authFlowId", t("Sign-in flow")),
      labelled("registrationFlowId", t("Registration flow")),
      labelled("themeId", t("Theme")),
      element("div", {}, element("label", { class: "choice" }, controls.passkeysOnly, " ",
        t("Passkeys only")), element("p", { id: "app-passkeysOnly-hint", class: "hint" },
        t("Nobody signs in to it with a password (nor so with an authenticator app).")),
      feedback("app-passkeysOnly")),
      element("button", { type: "submit" }, t("Save changes")), feedback("application"));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      admin.guarded(async () => {
        try {
          await admin.call("PATCH", path, {
            allowedUserTypes: controls.allowedUserTypes.values(),
            authFlowId: controls.authFlowId.value || null,
            registrationFlowId: controls.registrationFlowId.value || null,
            themeId: controls.themeId.value || null,
            passkeysOnly: controls.passkeysOnly.checked,
            oauth: { redirectUris: lines(controls.redirectUris.value),
              grantTypes: controls.grantTypes.values(), scopes: lines(controls.scopes.value) },
          });
        } catch (failure) {
          if (!admin.sayByField(failure, SETTINGS, "app-")) throw failure;
          return;
        }
        say("application", t("The changes to {name} were saved.", { name: app.name }));
      }, "application");
    });
    const secret = element("div", { id: "new-secret" });
    const rotate = async () => {
      const made = await admin.change("POST", `${path}/secret`, undefined, {
        hash: `#${path}?${NEW_SECRET}`, said: "" });
      secret.replaceChildren(...shownOnce({ ...app, clientSecret: made.clientSecret },
        t("{name} has a new secret.", { name: app.name })));
      secret.querySelector("h3").focus();
    };
    admin.content().replaceChildren(
      element("p", {}, element("a", { href: "#/applications" }, t("All applications"))),
      section(t("Details"), element("dl", {},
        element("dt", {}, t("Client ID")), element("dd", {}, element("code", {},
          oauth.clientId || "")),
        element("dt", {}, t("Template")), element("dd", {}, app.template || "—"))),
      section(t("Settings"), form),
      oauth.publicClient === false && oauth.tokenEndpointAuthMethod !== "private_key_jwt"
        ? section(t("Client secret"), element("p", {}, t("A new secret replaces the old one " +
          "at once: the application stops working until it has the new one.")),
        element("p", { class: "actions" }, button(t("Make a new secret"),
          () => admin.guarded(async () => {
            if (!window.confirm(t("Make a new secret for {name}? The old one stops working " +
              "now. You confirm with your passkey.", { name: app.name }))) return;
            await rotate();
          }, "secret-rotate"), true)), feedback("secret-rotate"), secret) : null);
    // Back from the fresh sign-in the new secret asked for: the secret made then was not
    // shown (the sign-in left the page), so one more is made and shown now.
    if (query.has(NEW_SECRET)) {
      history.replaceState(null, "", `#${path}`);
      await rotate();
    }
    return undefined;
  }

  // --- the audit log -----------------------------------------------------------------------

  const FILTERS = ["actor", "subject", "event", "since", "until"];

  // A datetime-local value (the browser's time zone) -> seconds since 1970, as the API takes.
  function seconds(local) {
    return local ? String(Math.floor(new Date(local).getTime() / 1000)) : "";
  }

  async function audit(where) {
    admin.heading(t("Audit log"));
    const controls = {
      actor: element("input", { autocomplete: "off", spellcheck: "false" }),
      subject: element("input", { autocomplete: "off", spellcheck: "false" }),
      event: element("input", { autocomplete: "off", spellcheck: "false" }),
      since: element("input", { type: "datetime-local" }),
      until: element("input", { type: "datetime-local" }),
    };
    for (const name of FILTERS) controls[name].value = where.query.get(name) || "";
    const wanted = () => {
      const query = {};
      for (const name of FILTERS) {
        const raw = controls[name].value.trim();
        const given = name === "since" || name === "until" ? seconds(raw) : raw;
        if (given) query[name] = given;
      }
      return query;
    };
    const form = element("form", { class: "filters", "aria-label": t("Filter the audit log") },
      field("audit-actor", t("By"), controls.actor, t("Who acted, e.g. admin:<user id>.")),
      field("audit-subject", t("About user"), controls.subject, t("The user's id.")),
      field("audit-event", t("Event"), controls.event, t("The start of its name, e.g. user.")),
      field("audit-since", t("From"), controls.since),
      field("audit-until", t("Until"), controls.until),
      element("p", { class: "actions" }, element("button", { type: "submit" }, t("Filter")),
        button(t("Export as JSON lines"), () => exportAs("jsonl"), true),
        button(t("Export as CSV"), () => exportAs("csv"), true)));
    const list = admin.pagedTable({
      label: t("Events"),
      headings: [t("When"), t("Event"), t("Outcome"), t("By"), t("About user"), t("From")],
      row: (event) => [when(event.at), event.event, event.outcome, event.actor,
        event.userId ? element("a", { href: `#/users/${encodeURIComponent(event.userId)}` },
          event.userId) : "—", whole(event.clientAddress)],
      fetchPage: (cursor) => admin.call("GET", `/audit?${new URLSearchParams({
        ...wanted(), limit: "50", ...(cursor ? { cursor } : {}) })}`),
    });
    function exportAs(format) {
      admin.guarded(() => admin.download(`/audit/export?${new URLSearchParams(
        { ...wanted(), format })}`, `audit.${format}`), "audit");
    }
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const query = new URLSearchParams();
      for (const name of FILTERS) {
        if (controls[name].value.trim()) query.set(name, controls[name].value.trim());
      }
      history.replaceState(null, "", `#/audit${[...query].length ? `?${query}` : ""}`);
      admin.guarded(list.load, "audit");
    });
    admin.content().replaceChildren(form, feedback("audit"), list.holder);
    await list.load();
  }

  // --- operations ---------------------------------------------------------------------------

  function svg(tag, attributes = {}, text = "") {
    const node = document.createElementNS(SVG, tag);
    for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
    if (text) node.textContent = text;
    return node;
  }

  function counted(count) {
    return new Intl.NumberFormat(document.documentElement.lang).format(count);
  }

  function dayName(day, options) {
    return new Date(`${day}T00:00:00Z`).toLocaleDateString(document.documentElement.lang,
      { timeZone: "UTC", ...options });
  }

  // Bars drawn with attributes only (the page's CSP allows no inline style); the figure
  // says the same in words, and the table under it holds every number.
  function signInChart(days) {
    const width = 28 * days.length;
    const height = 120;
    const top = Math.max(1, ...days.map((day) => day.count));
    const chart = svg("svg", { viewBox: `0 0 ${width} ${height + 34}`, role: "img",
      "aria-labelledby": "sign-ins-title", class: "chart" });
    const total = days.reduce((sum, day) => sum + day.count, 0);
    chart.append(svg("title", { id: "sign-ins-title" }, t("Sign-ins per day: {total} in " +
      "{count} days, at most {most} in one day.", { total, count: days.length, most: top })));
    days.forEach((day, index) => {
      const tall = Math.round((day.count / top) * height);
      chart.append(svg("rect", { x: index * 28 + 4, y: height - tall + 14, width: 20,
        height: Math.max(tall, day.count ? 1 : 0), class: "bar" }));
      if (day.count) {
        chart.append(svg("text", { x: index * 28 + 14, y: height - tall + 10,
          class: "count" }, counted(day.count)));
      }
      chart.append(svg("text", { x: index * 28 + 14, y: height + 30, class: "day" },
        dayName(day.day, { day: "numeric" })));
    });
    return element("figure", { class: "sign-ins" }, chart,
      element("details", {}, element("summary", {}, t("The numbers")),
        table([t("Day"), t("Sign-ins")], days.map((day) => [
          dayName(day.day, { dateStyle: "medium" }), counted(day.count)]))));
  }

  async function operations() {
    admin.heading(t("Operations"));
    const numbers = await admin.call("GET", "/operations");
    const outbox = Object.entries(numbers.outbox || {});
    admin.content().replaceChildren(
      section(t("Service"), element("dl", {},
        element("dt", {}, t("Version")), element("dd", {}, numbers.version),
        element("dt", {}, t("Health")), element("dd", { id: "health" },
          numbers.health === "ok" ? t("ok") : element("span", { class: "tag warn" },
            numbers.health)))),
      section(t("Waiting to be sent"), outbox.length
        ? table([t("Kind"), t("Messages")], outbox.map(([kind, depth]) => [kind,
          window.identityctlNumber(depth)]))
        : element("p", { class: "status" }, t("Nothing is waiting."))),
      section(t("Sign-ins per day"), signInChart(numbers.signInsPerDay || [])),
      section(t("Recent webhook failures"), table([t("When"), t("Webhook"), t("What happened")],
        (numbers.webhookFailures || []).map((failure) => [when(failure.queuedAt),
          failure.url, failure.lastError || "—"]))));
  }

  admin.area("applications", applications);
  admin.area("audit", audit);
  admin.area("operations", operations);
})();
