// The admin console's Users area: a search by name, e-mail address or id, paged by cursor;
// adding a person; and a person's page (details, attributes, roles, passkeys, live sessions,
// consents, recent events) with invite, disable/enable, editing their attributes, user type
// and organization unit, granting and taking roles, end sessions, reset passkeys and delete.
// Changes ask for a fresh passkey sign-in when the sign-in is old (the shell's change()).
"use strict";

(() => {
  const admin = window.identityctlAdmin;
  if (!admin) return;
  const { t, element, button, whole, when, section, table, field, feedback, say } = admin;
  const { authenticator } = window.identityctlClientPage;

  const STATES = { active: "active", disabled: "disabled", locked: "locked" };

  // A refused change said under the control it concerns (shared with the other areas): the
  // service's description names the field ("Field 'oauth.redirectUris[0]': ..."); the first
  // of ``names`` that is a part of that path is the control, ``prefix + name`` its id and
  // its feedback's slot. False when the refusal names none of them.
  admin.sayByField = (failure, names, prefix) => {
    const named = /^Field '([^']+)': ([\s\S]+)$/.exec(failure.description || "");
    const parts = named ? named[1].split(/[.[\]]/) : [];
    const name = names.find((candidate) => parts.includes(candidate));
    if (!name) return false;
    say(`${prefix}${name}`, admin.refusal(failure, named[2]), true);
    const control = document.getElementById(`${prefix}${name}`);
    (control.matches("input, select, textarea") ? control
      : control.querySelector("input, select, textarea")).focus();
    return true;
  };

  function stateTag(state) {
    return element("span", { class: state === "active" ? "tag" : "tag warn" },
      t(STATES[state] || state));
  }

  function emailCell(user) {
    if (!user.email) return whole("");
    return element("span", {}, user.email, " ", element("span",
      { class: user.emailVerified ? "tag" : "tag warn" },
      user.emailVerified ? t("confirmed") : t("not confirmed")));
  }

  function userLink(user) {
    return element("a", { href: `#/users/${encodeURIComponent(user.id)}` }, user.username);
  }

  // --- the list ---------------------------------------------------------------------------

  async function users(where) {
    if (where.parts[1]) return person(where.parts[1]);
    admin.heading(t("Users"));
    const query = where.query.get("q") || "";
    const search = element("input", { type: "search", autocomplete: "off", spellcheck: "false" });
    search.value = query;
    const form = element("form", { role: "search", class: "search" },
      field("user-search", t("Find a user"), search,
        t("The start of a username or e-mail address, or a user's id.")),
      element("button", { type: "submit" }, t("Search")));
    const list = admin.pagedTable({
      label: t("Users"),
      headings: [t("Username"), t("E-mail address"), t("State"), t("Passkeys"), t("Added")],
      row: (user) => [userLink(user), emailCell(user), stateTag(user.state),
        window.identityctlNumber(user.passkeys), when(user.createdAt)],
      fetchPage: (cursor) => admin.call("GET", `/users?${new URLSearchParams({
        q: search.value.trim(), limit: "25", ...(cursor ? { cursor } : {}) })}`),
    });
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      // The search stays in the address (a reload or Back finds it) without a new page.
      const q = search.value.trim();
      history.replaceState(null, "", `#/users${q ? `?${new URLSearchParams({ q })}` : ""}`);
      admin.guarded(list.load, "users");
    });
    admin.content().replaceChildren(form, feedback("users"), list.holder, addUser());
    await list.load();
    return undefined;
  }

  function addUser() {
    const username = element("input", { autocomplete: "off", required: true,
      spellcheck: "false" });
    const email = element("input", { type: "email", autocomplete: "off" });
    const form = element("form", { class: "stacked" },
      field("new-username", t("Username"), username),
      field("new-email", t("E-mail address (optional)"), email),
      element("button", { type: "submit" }, t("Add user")), feedback("add-user"));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      admin.guarded(async () => {
        const made = await admin.call("POST", "/users", { username: username.value.trim(),
          ...(email.value.trim() ? { email: email.value.trim() } : {}) });
        admin.go(`#/users/${encodeURIComponent(made.id)}`);
      }, "add-user");
    });
    return section(t("Add a user"), form);
  }

  // --- one person -------------------------------------------------------------------------

  function deviceName(browser) {
    const { browser: name, system } = browser || {};
    if (name && system) return t("{browser} on {system}", { browser: name, system });
    return name || system || t("Unknown browser");
  }

  function value(item) {
    return typeof item === "string" ? item : JSON.stringify(item);
  }

  async function person(userId) {
    const path = `/users/${encodeURIComponent(userId)}`;
    const [user, directory] = await Promise.all([admin.call("GET", path),
      admin.call("GET", "/directory")]);
    admin.heading(user.username);
    const redraw = async (slot, said) => {
      await person(userId);
      say(slot, said);
    };
    const attributes = Object.entries(user.attributes || {});
    admin.content().replaceChildren(
      element("p", {}, element("a", { href: "#/users" }, t("All users"))),
      section(t("Details"), element("dl", {},
        element("dt", {}, t("Username")), element("dd", { id: "user-username" }, user.username),
        element("dt", {}, t("E-mail address")), element("dd", {}, emailCell(user)),
        element("dt", {}, t("State")), element("dd", { id: "user-state" },
          stateTag(user.state)),
        element("dt", {}, t("User type")), element("dd", {}, user.userType || "—"),
        element("dt", {}, t("Organization unit")), element("dd", {}, user.ou || "—"),
        element("dt", {}, t("Added")), element("dd", {}, when(user.createdAt)),
        element("dt", {}, t("Id")), element("dd", {}, element("code", {}, user.id))),
      element("p", { class: "actions" },
        button(t("Invite"), () => admin.guarded(() => invite(user, false), "details"), true),
        user.email ? button(t("Send the invitation by e-mail"),
          () => admin.guarded(() => invite(user, true), "details"), true) : null,
        user.state === "disabled"
          ? button(t("Enable"), () => admin.guarded(async () => {
            const said = t("{name} can sign in again.", { name: user.username });
            await admin.change("PATCH", path, { state: "active" }, { hash: `#${path}`, said });
            await redraw("details", said);
          }, "details"), true)
          : button(t("Disable"), () => admin.guarded(async () => {
            if (!window.confirm(t("Disable {name}? They are signed out everywhere and " +
              "cannot sign in until enabled.", { name: user.username }))) return;
            const said = t("{name} is disabled.", { name: user.username });
            await admin.change("PATCH", path, { state: "disabled" }, { hash: `#${path}`, said });
            await redraw("details", said);
          }, "details"), true),
        button(t("Delete user"), () => admin.guarded(async () => {
          if (!window.confirm(t("Delete {name} for good? You confirm with your passkey.",
            { name: user.username }))) return;
          const said = t("{name} was deleted.", { name: user.username });
          await admin.change("DELETE", path, undefined, { hash: "#/users", said });
          admin.go("#/users");
          admin.setStatus(said);
        }, "details"), true)),
      feedback("details"), element("div", { id: "invitation" })),
      section(t("Attributes"), attributes.length ? element("dl", {}, ...attributes.flatMap(
        ([name, item]) => [element("dt", {}, name), element("dd", {}, value(item))]))
        : element("p", { class: "status" }, t("None.")), editor(user, directory, redraw)),
      section(t("Roles"), rolesOf(user, directory, redraw)),
      section(t("Passkeys"),
        table([t("Name"), t("Authenticator"), t("Added"), t("Last used")],
          user.passkeys.map((key) => [key.name, authenticator(key), when(key.createdAt),
            when(key.lastUsedAt)])),
        user.passkeys.length ? element("p", { class: "actions" },
          button(t("Reset passkeys"), () => admin.guarded(async () => {
            if (!window.confirm(t("Delete every passkey of {name} and sign them out? They " +
              "come back with an invitation. You confirm with your passkey.",
            { name: user.username }))) return;
            const said = t("The passkeys of {name} were deleted.", { name: user.username });
            await admin.change("DELETE", `${path}/passkeys`, undefined,
              { hash: `#${path}`, said });
            await redraw("passkeys", said);
          }, "passkeys"), true)) : null,
        feedback("passkeys")),
      section(t("Sessions"),
        table([t("Browser"), t("From"), t("Since"), t("Last seen"), ""],
          user.sessions.map((session) => [deviceName(session.browser), whole(session.address),
            when(session.since), when(session.lastSeen),
            button(t("End session"), () => admin.guarded(async () => {
              await admin.call("DELETE",
                `${path}/sessions/${encodeURIComponent(session.id)}`);
              await redraw("sessions", t("The session on {device} ended.",
                { device: deviceName(session.browser) }));
            }, "sessions"), true)])),
        user.sessions.length ? element("p", { class: "actions" },
          button(t("End all sessions"), () => admin.guarded(async () => {
            await admin.call("DELETE", `${path}/sessions`);
            await redraw("sessions", t("{name} is signed out everywhere.",
              { name: user.username }));
          }, "sessions"), true)) : null,
        feedback("sessions")),
      section(t("Applications allowed"), table([t("Application"), t("Scopes")],
        user.consents.map((grant) => [grant.applicationName || grant.clientId,
          (grant.scopes || []).join(" ")]))),
      section(t("Recent events"), table([t("When"), t("Event"), t("Outcome"), t("By")],
        user.recentEvents.map((event) => [when(event.at), event.event, event.outcome,
          event.actor]))));
  }

  // An input for one attribute of a user type's schema, in its type.
  function attributeInput(name, rule, current) {
    const kind = (rule && rule.type) || "string";
    const input = kind === "boolean"
      ? element("input", { type: "checkbox", checked: current === true })
      : element("input", { type: kind === "number" ? "number" : "text", step: kind === "number"
        ? "any" : null, autocomplete: "off", required: Boolean(rule && rule.required) });
    if (kind !== "boolean" && current !== undefined && current !== null) {
      input.value = String(current);
    }
    input.read = () => {
      if (kind === "boolean") return input.checked;
      if (input.value.trim() === "") return undefined;
      return kind === "number" ? Number(input.value) : input.value.trim();
    };
    return input;
  }

  // The person's attributes, user type and organization unit, changed in one go: the
  // attributes asked for are those of the type chosen (its schema), filled with theirs.
  function editor(user, directory, redraw) {
    const path = `/users/${encodeURIComponent(user.id)}`;
    const kinds = Object.fromEntries(directory.userTypes.map((kind) => [kind.name, kind]));
    const kind = element("select", {}, ...directory.userTypes.map((item) =>
      element("option", { value: item.name, selected: item.name === user.userType }, item.name)));
    const unit = element("select", {}, ...directory.organizationUnits.map((handle) =>
      element("option", { value: handle, selected: handle === user.ou }, handle)));
    const fields = element("div", { class: "attribute-fields" });
    let inputs = {};
    const draw = () => {
      const schema = (kinds[kind.value] || {}).schema || {};
      const kept = Object.fromEntries(Object.entries(inputs).map(([name, input]) =>
        [name, input.read()]));
      inputs = Object.fromEntries(Object.keys(schema).map((name) => [name,
        attributeInput(name, schema[name], name in kept ? kept[name] : user.attributes[name])]));
      fields.replaceChildren(...Object.entries(inputs).map(([name, input]) => element("div",
        {}, field(`attribute-${name}`, name, input), feedback(`attribute-${name}`))));
    };
    kind.addEventListener("change", draw);
    draw();
    const form = element("form", { class: "stacked", "aria-label": t("Change the details") },
      element("div", {}, field("attribute-userType", t("User type"), kind,
        t("Its schema says which attributes a person has.")),
      feedback("attribute-userType")),
      element("div", {}, field("attribute-ou", t("Organization unit"), unit),
        feedback("attribute-ou")),
      fields, element("button", { type: "submit" }, t("Save changes")));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      admin.guarded(async () => {
        const attributes = {};
        for (const [name, input] of Object.entries(inputs)) {
          if (input.read() !== undefined) attributes[name] = input.read();
        }
        const said = t("The changes to {name} were saved.", { name: user.username });
        try {
          await admin.change("PATCH", path, { userType: kind.value, ou: unit.value,
            attributes }, { hash: `#${path}`, said });
        } catch (failure) {
          if (!admin.sayByField(failure, ["userType", "ou", ...Object.keys(inputs)],
            "attribute-")) throw failure;
          return;
        }
        await redraw("edit", said);
      }, "edit");
    });
    // Its feedback outside the fold: the page drawn anew after a change has it closed.
    return element("div", {}, element("details", { class: "editor" }, element("summary", {},
      t("Change the details")), form), feedback("edit"));
  }

  // The roles the person holds, each with Take away, and a choice of one more to give.
  function rolesOf(user, directory, redraw) {
    const path = `/users/${encodeURIComponent(user.id)}/roles`;
    const others = directory.roles.filter((role) => !user.roles.includes(role));
    const held = user.roles.length ? table([t("Role"), ""], user.roles.map((role) => [role,
      button(t("Take away"), () => admin.guarded(async () => {
        const said = t("{name} no longer holds the role {role}.",
          { name: user.username, role });
        await admin.change("DELETE", `${path}/${encodeURIComponent(role)}`, undefined,
          { hash: `#/users/${encodeURIComponent(user.id)}`, said });
        await redraw("roles", said);
      }, "roles"), true)]), t("Roles"))
      : element("p", { class: "status" }, t("None."));
    if (!others.length) return element("div", {}, held, feedback("roles"));
    const chosen = element("select", {}, ...others.map((role) => element("option",
      { value: role }, role)));
    const form = element("form", { class: "search" },
      field("grant-role", t("Give a role"), chosen),
      element("button", { type: "submit" }, t("Give")));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      admin.guarded(async () => {
        const role = chosen.value;
        const said = t("{name} now holds the role {role}.", { name: user.username, role });
        await admin.change("PUT", `${path}/${encodeURIComponent(role)}`, undefined,
          { hash: `#/users/${encodeURIComponent(user.id)}`, said });
        await redraw("roles", said);
      }, "roles");
    });
    return element("div", {}, held, form, feedback("roles"));
  }

  async function invite(user, sendEmail) {
    const made = await admin.call("POST", `/users/${encodeURIComponent(user.id)}/invite`,
      { sendEmail });
    const until = new Date(made.expiresAt * 1000).toLocaleString(document.documentElement.lang,
      { dateStyle: "medium", timeStyle: "short" });
    document.getElementById("invitation").replaceChildren(
      element("p", {}, t("{name} opens this link (or scans the code) to add a passkey. It " +
        "works once, until {time}.", { name: user.username, time: until })),
      made.qrSvg ? element("img", { src: made.qrSvg, alt: t("QR code of the link"),
        width: "180", height: "180" }) : null,
      element("p", {}, element("a", { href: made.link, class: "link", id: "invitation-link" },
        made.link)));
    say("details", made.emailedTo ? t("The invitation was sent to {address}.",
      { address: made.emailedTo }) : t("Invitation link made."));
  }

  admin.area("users", users);
})();
