// The admin console's integrations areas (drawn with window.identityctlAdmin): Roles,
// Identity providers, Resource servers and Webhooks. Each is a small catalog the API answers
// whole: its table, a form for a new one, a page changing one (#/area/<id>), and removing
// one, which asks for a fresh passkey sign-in (the shell's change()). A secret (a provider's
// given, a webhook's made) is never shown back, but a webhook's once, when it is made.
"use strict";

(() => {
  const admin = window.identityctlAdmin;
  if (!admin) return;
  const { t, element, button, when, section, table, field, feedback, say } = admin;

  const STATES = { queued: "queued", retrying: "retrying", sent: "sent", "given up": "given up" };

  const input = (attributes = {}) => element("input", { autocomplete: "off",
    spellcheck: "false", ...attributes });
  const words = (control) => control.value.split(/\s+/).filter(Boolean);
  const listed = (names) => (names.length ? element("code", {}, names.join(" ")) : "—");

  // A form of ``fields`` whose submit runs ``action(form)``; a failure is said under it.
  function form(slot, submitText, fields, action) {
    const made = element("form", { class: "stacked" }, ...fields,
      element("button", { type: "submit" }, submitText), feedback(slot));
    made.addEventListener("submit", (event) => {
      event.preventDefault();
      admin.guarded(() => action(made), slot);
    });
    return made;
  }

  // --- a small catalog: list, new, change, remove ----------------------------------------------

  // ``spec``: area, path (the API's), title, create (the new one's title), name(item),
  // headings and cells(item) of its table, fresh() -> {fields, body()} for a new one,
  // changing(item) -> {fields, body()} (none: it is not changed, only removed),
  // shown(created) -> what only the answer holds,
  // question(item) before removing, before(answer) and after() -> what comes before and
  // after the list.
  function catalog(spec) {
    async function draw(where) {
      const answer = await admin.call("GET", spec.path);
      const chosen = spec.changing && where.parts[1]
        && answer.items.find((item) => item.id === where.parts[1]);
      if (chosen) return change(chosen);
      admin.heading(spec.title);
      const rows = answer.items.map((item) => [...spec.cells(item), element("span",
        { class: "actions" }, spec.changing ? element("a",
          { href: `#/${spec.area}/${encodeURIComponent(item.id)}` }, t("Edit"),
          element("span", { class: "visually-hidden" }, ` ${spec.name(item)}`)) : null,
        " ", remover(item))]);
      const made = element("div", { id: "new-secret" });
      const fresh = spec.fresh();
      const adding = form(`new-${spec.area}`, spec.create, fresh.fields, async (filled) => {
        const created = await admin.call("POST", spec.path, fresh.body());
        filled.reset();
        await draw({ parts: [spec.area] });
        if (spec.shown) {
          document.getElementById("new-secret").replaceChildren(...spec.shown(created));
          document.querySelector("#new-secret h3").focus();
        } else {
          say(spec.area, t("{name} was added.", { name: spec.name(created) }));
        }
      });
      admin.content().replaceChildren(...(spec.before ? spec.before(answer) : []),
        feedback(spec.area), table([...spec.headings, t("Actions")], rows, spec.title),
        section(spec.create, adding, made), ...(spec.after ? await spec.after() : []));
      return undefined;
    }

    function remover(item) {
      return button(t("Delete"), () => admin.guarded(async () => {
        if (!window.confirm(spec.question(item))) return;
        const said = t("{name} was deleted.", { name: spec.name(item) });
        await admin.change("DELETE", `${spec.path}/${encodeURIComponent(item.id)}`, undefined,
          { hash: `#/${spec.area}`, said });
        await draw({ parts: [spec.area] });
        say(spec.area, said);
      }, spec.area), true);
    }

    function change(item) {
      admin.heading(t("Edit {name}", { name: spec.name(item) }));
      const changing = spec.changing(item);
      const back = `#/${spec.area}`;
      admin.content().replaceChildren(
        form(`change-${spec.area}`, t("Save"), changing.fields, async () => {
          const saved = await admin.call("PATCH",
            `${spec.path}/${encodeURIComponent(item.id)}`, changing.body());
          history.pushState(null, "", back);
          await draw({ parts: [spec.area] });
          say(spec.area, t("{name} was saved.", { name: spec.name(saved) }));
          document.getElementById("heading").focus();
        }),
        element("p", {}, element("a", { href: back }, t("Back to the list"))));
    }

    admin.area(spec.area, draw);
  }

  // --- roles -----------------------------------------------------------------------------------

  function roleFields(prefix, role) {
    const description = input({ value: role ? role.description : "" });
    const scopes = input({ value: role ? role.scopes.join(" ") : "" });
    return { description, scopes, fields: [
      field(`${prefix}-description`, t("Description"), description),
      field(`${prefix}-scopes`, t("Scopes"), scopes,
        t("The scopes it carries, separated by spaces. Only people holding a role that " +
          "carries a scope may grant it to an application."))] };
  }

  catalog({
    area: "roles", path: "/roles", title: t("Roles"), create: t("New role"),
    name: (role) => role.name,
    headings: [t("Name"), t("Description"), t("Scopes"), t("Members")],
    cells: (role) => [role.name, role.description || "—", listed(role.scopes),
      window.identityctlNumber(role.members)],
    fresh() {
      const name = input({ required: true });
      const rest = roleFields("role", null);
      return { fields: [field("role-name", t("Name"), name), ...rest.fields],
        body: () => ({ name: name.value.trim(), description: rest.description.value.trim(),
          scopes: words(rest.scopes) }) };
    },
    changing(role) {
      const rest = roleFields("role-change", role);
      return { fields: rest.fields, body: () => ({
        description: rest.description.value.trim(), scopes: words(rest.scopes) }) };
    },
    question: (role) => t("Delete the role {name}? The people holding it lose it. You " +
      "confirm with your passkey.", { name: role.name }),
  });

  // --- identity providers -----------------------------------------------------------------------

  const KINDS = ["oidc", "google", "microsoft", "github"];
  const kindName = (kind) => ({ oidc: t("Any OpenID provider"), google: "Google",
    microsoft: "Microsoft", github: "GitHub" }[kind] || kind);

  // The settings both forms hold; ``secretHint`` says what an empty secret means.
  function providerFields(prefix, provider, secretHint) {
    const controls = {
      name: input({ value: provider ? provider.name : "" }),
      clientId: input({ value: provider ? provider.clientId : "" }),
      clientSecret: input({ type: "password", autocomplete: "new-password" }),
      issuer: input({ type: "url", value: provider && provider.kind === "oidc"
        ? provider.issuer : "", placeholder: "https://login.example.com" }),
      tenant: input({}),
    };
    const fields = [
      field(`${prefix}-name`, t("Name"), controls.name,
        t("What the sign-in button says after “Continue with”.")),
      field(`${prefix}-client-id`, t("Client ID"), controls.clientId),
      field(`${prefix}-client-secret`, t("Client secret"), controls.clientSecret, secretHint),
      field(`${prefix}-issuer`, t("Issuer"), controls.issuer,
        t("Only for any OpenID provider: its issuer URL.")),
      field(`${prefix}-tenant`, t("Directory (tenant)"), controls.tenant,
        t("Only for Microsoft: your directory id. Empty: any work or school account."))];
    // What was filled in, as the API names it (an empty field leaves the setting as it is).
    const body = () => Object.fromEntries(Object.entries(controls)
      .map(([name, control]) => [name, control.value.trim()]).filter(([, value]) => value));
    return { controls, fields, body };
  }

  catalog({
    area: "providers", path: "/identity-providers", title: t("Identity providers"),
    create: t("New identity provider"), name: (provider) => provider.name,
    headings: [t("Name"), t("Kind"), t("Client ID"), t("Issuer")],
    cells: (provider) => [provider.name, kindName(provider.kind),
      element("code", {}, provider.clientId), provider.kind === "github" ? "—"
        : element("code", {}, provider.issuer)],
    before: (answer) => [element("p", {}, t("Register this redirect URI at each provider:"),
      " ", element("code", { id: "callback-uri" }, answer.callbackUri))],
    fresh() {
      const kind = element("select", {}, ...KINDS.map((name) => element("option",
        { value: name }, kindName(name))));
      const rest = providerFields("provider", null,
        t("Stored, and never shown again, not even here."));
      return { fields: [field("provider-kind", t("Kind"), kind), ...rest.fields],
        body: () => ({ kind: kind.value, ...rest.body() }) };
    },
    changing(provider) {
      const rest = providerFields("provider-change", provider,
        t("Empty: the current secret stays. It is never shown."));
      return { fields: rest.fields, body: rest.body };
    },
    question: (provider) => t("Remove {name}? People who signed in through it sign in " +
      "another way from then on. You confirm with your passkey.", { name: provider.name }),
  });

  // --- resource servers ----------------------------------------------------------------------

  function serverScopes(prefix, server) {
    const name = input({ value: server ? server.name : "" });
    const scopes = input({ value: server ? server.scopes.join(" ") : "", required: true });
    return { name, scopes, fields: [
      field(`${prefix}-name`, t("Name"), name, t("What people see. Empty: the URL.")),
      field(`${prefix}-scopes`, t("Scopes"), scopes,
        t("The scopes its tokens may carry, separated by spaces."))] };
  }

  catalog({
    area: "resources", path: "/resource-servers", title: t("Resource servers"),
    create: t("New resource server"), name: (server) => server.name,
    headings: [t("Name"), t("URL"), t("Scopes")],
    cells: (server) => [server.name, element("code", {}, server.identifier),
      listed(server.scopes)],
    fresh() {
      const identifier = input({ type: "url", required: true,
        placeholder: "https://notes.example.com/mcp" });
      const rest = serverScopes("server", null);
      return { fields: [field("server-identifier", t("URL"), identifier,
        t("What applications name as the resource; for an MCP server, its MCP address.")),
      ...rest.fields],
      body: () => ({ identifier: identifier.value.trim(), name: rest.name.value.trim(),
        scopes: words(rest.scopes) }) };
    },
    changing(server) {
      const rest = serverScopes("server-change", server);
      return { fields: rest.fields, body: () => ({ name: rest.name.value.trim(),
        scopes: words(rest.scopes) }) };
    },
    question: (server) => t("Remove {name}? No new tokens are issued for it; those issued " +
      "work until they expire. You confirm with your passkey.", { name: server.name }),
  });

  // --- webhooks ------------------------------------------------------------------------------

  // The deliveries, newest first; one given up can be sent again. Drawn anew in place.
  async function deliveries() {
    const answer = await admin.call("GET", "/webhook-deliveries?limit=20");
    const slot = "deliveries";
    async function redraw(said) {
      document.getElementById("deliveries").replaceWith(await deliveries());
      if (said) say(slot, said);
    }
    const rows = answer.items.map((delivery) => [when(delivery.queuedAt), delivery.url,
      t(STATES[delivery.state] || delivery.state),
      window.identityctlNumber(delivery.attempts),
      delivery.lastError || "—",
      delivery.state === "given up" ? button(t("Send again"), () => admin.guarded(async () => {
        await admin.call("POST",
          `/webhook-deliveries/${encodeURIComponent(delivery.id)}/redeliver`);
        await redraw(t("It is queued to be sent again."));
      }, slot), true) : "—"]);
    return element("div", { id: "deliveries" }, section(t("Recent deliveries"),
      feedback(slot), table([t("When"), t("URL"), t("State"), t("Attempts"), t("Last error"),
        t("Actions")], rows, t("Recent deliveries")),
      element("p", { class: "actions" }, button(t("Refresh"),
        () => admin.guarded(() => redraw(""), slot), true))));
  }

  catalog({
    area: "webhooks", path: "/webhooks", title: t("Webhooks"), create: t("New webhook"),
    name: (webhook) => webhook.url,
    headings: [t("URL"), t("Events"), t("Description")],
    cells: (webhook) => [element("code", {}, webhook.url), listed(webhook.events),
      webhook.description || "—"],
    fresh() {
      const url = input({ type: "url", required: true,
        placeholder: "https://hooks.example.com/identity" });
      const events = input({ required: true });
      const description = input({});
      return { fields: [
        field("webhook-url", t("URL"), url, t("Your endpoint, with https.")),
        field("webhook-events", t("Events"), events, t("Event types such as " +
          "passkey.register, a prefix such as user.*, or * for all, separated by spaces.")),
        field("webhook-description", t("Description"), description)],
      body: () => ({ url: url.value.trim(), events: words(events),
        description: description.value.trim() }) };
    },
    // The signing secret exists only in this answer.
    shown: (made) => [
      element("h3", { tabindex: "-1" }, t("{name} was added.", { name: made.url })),
      element("dl", {}, element("dt", {}, t("Signing secret")),
        element("dd", {}, element("code", { id: "new-webhook-secret" }, made.secret))),
      element("p", { class: "notice" }, t("Copy the secret now and keep it where your " +
        "endpoint checks the signatures. It is not shown again."))],
    after: async () => [await deliveries()],
    question: (webhook) => t("Stop sending events to {name}? You confirm with your passkey.",
      { name: webhook.url }),
  });
})();
