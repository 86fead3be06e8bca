// The admin console's design areas: Themes (the list, a new theme, and a theme's editor beside
// a live preview of the hosted sign-in page in the colours being edited, saved or not) and
// Flows (by type, a flow drawn as a graph with its steps as a list, edited as JSON). The
// preview asks the admin API for the stylesheet /gate/theme.css would serve for the values
// in the form (checked as a save checks them) and sets its variables on the preview through
// the CSSOM: the page's CSP allows no inline style and needs none. Deleting asks for a fresh
// passkey sign-in (the shell's change()).
"use strict";

(() => {
  const admin = window.identityctlAdmin;
  if (!admin) return;
  const { t, element, button, section, table, field, feedback, say } = admin;
  const { Refused } = window.identityctlClientPage;
  const SVG = "http://www.w3.org/2000/svg";

  // The words for what the API names: colours and settings of a theme, flow types, node
  // types and the kinds of a flow's edges.
  const TEXT = {
    light: "Light colours",
    dark: "Dark colours",
    primary: "Main colour (buttons, links)",
    onPrimary: "Text on the main colour",
    background: "Page background",
    surface: "Card background",
    text: "Text",
    muted: "Quiet text",
    error: "Problems",
    border: "Borders",
    fontFamily: "Font",
    fontSize: "Text size",
    headingWeight: "Heading weight",
    borderRadius: "Corner radius",
    productName: "Product name",
    termsUrl: "Terms link",
    privacyUrl: "Privacy link",
    AUTHENTICATION: "Sign-in",
    REGISTRATION: "Sign-up",
    RECOVERY: "Recovery",
    START: "start",
    PROMPT: "asks the person",
    TASK_EXECUTION: "step",
    END: "end",
    onSuccess: "on success",
    onIncomplete: "needs more input",
    onFailure: "on failure",
    action: "choice",
  };
  // The colours gate.css reads (docs/hosted-ui.md); a theme may hold others, which are kept.
  const COLOURS = ["primary", "onPrimary", "background", "surface", "text", "muted", "error",
    "border"];
  const TYPOGRAPHY = ["fontFamily", "fontSize", "headingWeight", "borderRadius"];
  const LINKS = ["termsUrl", "privacyUrl"];
  const FLOW_TYPES = ["AUTHENTICATION", "REGISTRATION", "RECOVERY"];
  const HEX = /^#[0-9a-f]{6}$/i;

  function path(kind, id) {
    return `/${kind}/${encodeURIComponent(id)}`;
  }

  // Delete, once the person confirmed ``question`` and (when the API asks) signed in again
  // with their passkey; then back to the list.
  function deleteButton(kind, id, name, question, slot) {
    return button(t("Delete"), () => admin.guarded(async () => {
      if (!window.confirm(question)) return;
      const said = t("{name} was deleted.", { name });
      await admin.change("DELETE", path(kind, id), undefined, { hash: `#/${kind}`, said });
      admin.go(`#/${kind}`);
      admin.setStatus(said);
    }, slot), true);
  }

  // --- themes -------------------------------------------------------------------------------

  async function themes(where) {
    if (where.parts[1]) return theme(where.parts[1]);
    admin.heading(t("Themes"));
    const { items } = await admin.call("GET", "/themes");
    admin.content().replaceChildren(feedback("themes"),
      table([t("Name"), t("Handle"), t("Description")], items.map((item) => [
        element("a", { href: `#${path("themes", item.id)}` }, item.displayName),
        element("code", {}, item.handle), item.description || "—"]), t("Themes")),
      newTheme());
    return undefined;
  }

  function newTheme() {
    const handle = element("input", { autocomplete: "off", spellcheck: "false",
      required: true });
    const name = element("input", { autocomplete: "off", required: true });
    const form = element("form", { class: "stacked" },
      field("theme-handle", t("Handle"), handle,
        t("A short key for applications and configuration, e.g. shop-dark.")),
      field("theme-name", t("Name"), name),
      element("button", { type: "submit" }, t("Create theme")), feedback("new-theme"));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      admin.guarded(async () => {
        const made = await admin.call("POST", "/themes", { handle: handle.value.trim(),
          displayName: name.value.trim(), theme: {} });
        admin.go(`#${path("themes", made.id)}`);
      }, "new-theme");
    });
    return section(t("New theme"), form);
  }

  function valueAt(source, at) {
    return at.reduce((inner, key) => (inner || {})[key], source) || "";
  }

  // A text field of the editor bound to ``at`` (a path in the theme document); empty, it
  // shows the default theme's value, which the hosted page then uses.
  function setting(id, label, at, stored, hint) {
    const input = element("input", { autocomplete: "off", spellcheck: "false",
      placeholder: valueAt(stored.fallback, at) });
    input.value = valueAt(stored.theme, at);
    input.dataset.at = JSON.stringify(at);
    return field(id, label, input, hint);
  }

  // A colour: its text (any CSS colour) and a picker for the #rrggbb ones.
  function colour(scheme, name, stored) {
    const holder = setting(`colour-${scheme}-${name}`, t(TEXT[name]),
      ["colorSchemes", scheme, name], stored);
    const input = holder.querySelector("input");
    const picker = element("input", { type: "color", class: "picker",
      "aria-label": t("Pick: {colour}", { colour: t(TEXT[name]) }) });
    const follow = () => {
      const shown = input.value.trim() || input.placeholder;
      if (HEX.test(shown)) picker.value = shown;
    };
    follow();
    input.addEventListener("input", follow);
    picker.addEventListener("input", () => {
      input.value = picker.value;
      input.dispatchEvent(new Event("input", { bubbles: true }));
    });
    input.after(picker);
    input.parentNode.classList.add("colour");
    return holder;
  }

  // The document the form holds: the theme as loaded (keys the form does not show are kept)
  // with each field's value; an empty field and an empty section are left out.
  function documentOf(form, base, logo) {
    const next = structuredClone(base);
    const values = [...form.querySelectorAll("input[data-at]")].map((input) => [
      JSON.parse(input.dataset.at), input.value.trim()]);
    values.push([["branding", "logo"], logo.value]);
    for (const [at, value] of values) {
      let inner = next;
      for (const key of at.slice(0, -1)) inner = inner[key] = inner[key] || {};
      if (value) inner[at[at.length - 1]] = value;
      else delete inner[at[at.length - 1]];
    }
    const schemes = next.colorSchemes || {};
    for (const scheme of Object.keys(schemes)) {
      if (!Object.keys(schemes[scheme]).length) delete schemes[scheme];
    }
    for (const part of ["colorSchemes", "typography", "branding"]) {
      if (next[part] && !Object.keys(next[part]).length) delete next[part];
    }
    return next;
  }

  async function theme(id) {
    const loaded = await admin.call("GET", path("themes", id));
    admin.heading(t("Theme: {name}", { name: loaded.displayName }));
    // What applies where this theme sets nothing: the default theme's values.
    const fallback = await admin.call("GET", "/themes/default").catch(() => ({}));
    const stored = { theme: loaded.theme || {}, fallback: fallback.theme || {} };
    const name = element("input", { autocomplete: "off", required: true });
    name.value = loaded.displayName;
    const description = element("input", { autocomplete: "off" });
    description.value = loaded.description || "";
    const logo = { value: valueAt(stored.theme, ["branding", "logo"]) };
    const logoFile = element("input", { type: "file",
      accept: "image/png,image/svg+xml,image/webp" });
    const dropLogo = button(t("Remove the logo"), () => {
      logo.value = "";
      logoFile.value = "";
      refresh();
    }, true);
    const form = element("form", { class: "theme-editor" },
      field("theme-display-name", t("Name"), name),
      field("theme-description", t("Description"), description),
      ...["light", "dark"].map((scheme) => element("fieldset", {},
        element("legend", {}, t(TEXT[scheme])),
        ...COLOURS.map((colourName) => colour(scheme, colourName, stored)))),
      element("fieldset", {}, element("legend", {}, t("Typography")),
        ...TYPOGRAPHY.map((key) => setting(`type-${key}`, t(TEXT[key]), ["typography", key],
          stored, key === "fontFamily" ? t("e.g. Georgia, serif") : null))),
      element("fieldset", {}, element("legend", {}, t("Branding")),
        setting("brand-productName", t(TEXT.productName), ["branding", "productName"],
          stored),
        field("brand-logo", t("Logo"), logoFile, t("A PNG, SVG or WebP image of at most " +
          "100 KB.")),
        element("p", { class: "actions" }, dropLogo),
        ...LINKS.map((key) => setting(`brand-${key}`, t(TEXT[key]), ["branding", key],
          stored, t("An https address.")))),
      element("p", { class: "actions" }, element("button", { type: "submit" }, t("Save")),
        deleteButton("themes", loaded.id, loaded.displayName, t("Delete {name}? " +
          "Applications that use it show the default theme. You confirm with your passkey.",
        { name: loaded.displayName }), "theme")),
      feedback("theme"));
    const preview = themePreview();
    const refresh = preview.follow(() => documentOf(form, stored.theme, logo));
    form.addEventListener("input", refresh);
    logoFile.addEventListener("change", () => {
      const [file] = logoFile.files;
      if (!file) return;
      const reader = new FileReader();
      reader.addEventListener("load", () => {
        logo.value = String(reader.result);
        refresh();
      });
      reader.readAsDataURL(file);
    });
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      admin.guarded(async () => {
        const saved = await admin.call("PATCH", path("themes", loaded.id), {
          displayName: name.value.trim(), description: description.value.trim(),
          theme: documentOf(form, stored.theme, logo) });
        admin.heading(t("Theme: {name}", { name: saved.displayName }));
        say("theme", t("Saved."));
      }, "theme");
    });
    admin.content().replaceChildren(element("div", { class: "theme-workbench" },
      section(t("Settings"), form), section(t("Preview"), preview.holder)));
    refresh();
  }

  // The hosted sign-in page's card, drawn with the page's own classes (gate.css) inside a
  // frame whose variables are the theme's; inert: it shows, it does not act.
  function themePreview() {
    const dark = element("input", { type: "checkbox", id: "preview-dark" });
    const logo = element("img", { class: "logo", alt: "", hidden: true });
    const product = element("p", { class: "app-name" }, t("Your application"));
    const terms = element("a", { href: "#", hidden: true }, t("Terms"));
    const privacy = element("a", { href: "#", hidden: true }, t("Privacy"));
    const legal = element("p", { class: "legal", hidden: true }, terms, privacy);
    const frame = element("div", { class: "theme-preview", id: "theme-preview", inert: true },
      element("div", { class: "card" }, logo, product,
        element("p", { class: "preview-heading" }, t("Sign in")),
        element("div", { class: "step" },
          element("div", { class: "field" }, element("label", { for: "preview-username" },
            t("Username")), element("input", { id: "preview-username", value: "ada",
            autocomplete: "off" })),
          element("button", { type: "button" }, t("Continue")),
          element("button", { type: "button", class: "secondary" },
            t("Sign in with a passkey"))),
        element("p", { class: "error" }, t("A problem is shown like this.")),
        element("p", { class: "switch" }, t("New here?"), " ",
          element("a", { href: "#" }, t("Create an account"))), legal));
    let shown = null;
    let asked = 0;
    let timer = null;

    function draw() {
      for (const name of [...frame.style]) frame.style.removeProperty(name);
      if (!shown) return;
      const sheet = new CSSStyleSheet();
      sheet.replaceSync(shown.stylesheet);
      const rules = [...sheet.cssRules];
      const chosen = rules.filter((rule) => rule.selectorText === ":root");
      if (dark.checked) {
        for (const rule of rules) {
          if (rule.media && rule.media.mediaText.includes("dark")) {
            chosen.push(...rule.cssRules);
          }
        }
      }
      for (const rule of chosen) {
        for (const name of rule.style) {
          if (name.startsWith("--")) {
            frame.style.setProperty(name, rule.style.getPropertyValue(name));
          }
        }
      }
      const brand = shown.branding || {};
      logo.hidden = !brand.logo;
      if (brand.logo) logo.src = brand.logo;
      else logo.removeAttribute("src");
      logo.alt = brand.productName || "";
      product.textContent = brand.productName || t("Your application");
      terms.hidden = !brand.termsUrl;
      privacy.hidden = !brand.privacyUrl;
      legal.hidden = terms.hidden && privacy.hidden;
    }

    dark.addEventListener("change", draw);
    return {
      holder: element("div", {}, element("p", { class: "check" }, dark,
        element("label", { for: "preview-dark" }, t("Show the dark colours"))),
      element("figure", { class: "preview-figure" }, frame,
        element("figcaption", { class: "hint" }, t("The sign-in page in this theme, with " +
          "the values in the form (saved or not)."))),
      feedback("preview")),
      // ``documentOf()`` read anew a moment after the last keystroke; the latest answer wins.
      follow(documentOf) {
        return () => {
          clearTimeout(timer);
          timer = setTimeout(() => {
            const mine = ++asked;
            admin.guarded(async () => {
              const answer = await admin.call("POST", "/theme-preview", documentOf());
              if (mine !== asked) return;
              shown = answer;
              draw();
            }, "preview");
          }, 250);
        };
      },
    };
  }

  // --- flows --------------------------------------------------------------------------------

  async function flows(where) {
    if (where.parts[1]) return flow(where.parts[1]);
    admin.heading(t("Flows"));
    const chosen = where.query.get("type") || "";
    const kind = element("select", {}, element("option", { value: "" }, t("All")),
      ...FLOW_TYPES.map((type) => element("option", { value: type }, t(TEXT[type]))));
    kind.value = chosen;
    kind.addEventListener("change", () => admin.go(`#/flows${kind.value
      ? `?${new URLSearchParams({ type: kind.value })}` : ""}`));
    const { items } = await admin.call("GET", `/flows${chosen
      ? `?${new URLSearchParams({ flowType: chosen })}` : ""}`);
    admin.content().replaceChildren(
      element("div", { class: "filters-inline" }, field("flow-type", t("Type"), kind)),
      table([t("Name"), t("Handle"), t("Type"), t("Steps")], items.map((item) => [
        element("a", { href: `#${path("flows", item.id)}` }, item.name),
        element("code", {}, item.handle), t(TEXT[item.flowType] || item.flowType),
        window.identityctlNumber(item.nodes.length)]), t("Flows")),
      newFlow());
    return undefined;
  }

  function jsonEditor(id, label, text, hint) {
    const area = element("textarea", { class: "json", rows: "18", spellcheck: "false",
      autocomplete: "off" });
    area.value = text;
    return field(id, label, area, hint);
  }

  // The JSON of the editor, or a refusal said in words (the API never sees what is no JSON).
  function parsed(area) {
    try {
      return JSON.parse(area.value);
    } catch {
      throw new Refused({ code: "not_json", message: t("This is not valid JSON. Check the " +
        "brackets, commas and quotes.") }, 400);
    }
  }

  function newFlow() {
    const editor = jsonEditor("new-flow-json", t("Flow document"), JSON.stringify({
      handle: "", name: "", flowType: "AUTHENTICATION", nodes: [] }, null, 2),
    t("A flow as JSON: handle, name, flowType and its nodes."));
    const area = editor.querySelector("textarea");
    const form = element("form", {}, editor,
      element("button", { type: "submit" }, t("Create flow")), feedback("new-flow"));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      admin.guarded(async () => {
        const made = await admin.call("POST", "/flows", parsed(area));
        admin.go(`#${path("flows", made.id)}`);
      }, "new-flow");
    });
    return section(t("New flow"), form);
  }

  async function flow(id) {
    const loaded = await admin.call("GET", path("flows", id));
    const graph = element("div", { id: "flow-graph" });
    const editor = jsonEditor("flow-json", t("Flow document"), "",
      t("Change the nodes and save; the graph shows what was saved."));
    const area = editor.querySelector("textarea");
    function show(current) {
      admin.heading(t("Flow: {name}", { name: current.name }));
      area.value = JSON.stringify({ handle: current.handle, name: current.name,
        flowType: current.flowType, nodes: current.nodes }, null, 2);
      graph.replaceChildren(...drawn(current.graph));
    }
    const form = element("form", {}, editor,
      element("p", { class: "actions" }, element("button", { type: "submit" }, t("Save")),
        deleteButton("flows", loaded.id, loaded.name, t("Delete {name}? Applications that " +
          "use it can no longer sign people in with it. You confirm with your passkey.",
        { name: loaded.name }), "flow")),
      feedback("flow"));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      admin.guarded(async () => {
        show(await admin.call("PUT", path("flows", loaded.id), parsed(area)));
        say("flow", t("Saved."));
      }, "flow");
    });
    admin.content().replaceChildren(
      element("p", {}, t("Type: {type}", { type: t(TEXT[loaded.flowType] || loaded.flowType) }),
        " · ", element("code", {}, loaded.handle)),
      section(t("Graph"), graph), section(t("Edit as JSON"), form));
    show(loaded);
  }

  // --- a flow's graph -----------------------------------------------------------------------

  const BOX = { width: 220, height: 52, across: 36, down: 46 };

  function svg(tag, attributes = {}, text = "") {
    const node = document.createElementNS(SVG, tag);
    for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
    if (text) node.textContent = text;
    return node;
  }

  function edgeWords(edge) {
    return edge.kind === "action" ? t("choice “{choice}”", { choice: edge.label })
      : t(TEXT[edge.kind]);
  }

  // The nodes in rows by layer (the server's longest path from START), centred; forward
  // edges run down, an edge back (to a prompt that asks again) bends out on the right.
  function drawn(graph) {
    const layers = Math.max(0, ...graph.nodes.map((node) => node.layer)) + 1;
    const widest = Math.max(1, ...graph.nodes.map((node) => node.row + 1));
    const width = widest * (BOX.width + BOX.across) + BOX.across + 40;
    const height = layers * (BOX.height + BOX.down) + BOX.down;
    const inLayer = {};
    for (const node of graph.nodes) inLayer[node.layer] = (inLayer[node.layer] || 0) + 1;
    const at = {};
    for (const node of graph.nodes) {
      const row = inLayer[node.layer];
      const left = (width - 40 - row * (BOX.width + BOX.across) + BOX.across) / 2;
      at[node.id] = { x: left + node.row * (BOX.width + BOX.across),
        y: BOX.down + node.layer * (BOX.height + BOX.down), node };
    }
    const picture = svg("svg", { viewBox: `0 0 ${width} ${height}`, width: String(width),
      height: String(height), role: "img", "aria-labelledby": "flow-graph-title",
      class: "flow-chart" });
    picture.append(svg("title", { id: "flow-graph-title" }, t("The flow as a graph: {count} " +
      "steps. The list after it says each step and where it leads.",
    { count: graph.nodes.length })));
    const defs = svg("defs");
    defs.append(...["success", "back", "failure"].map((kind) => {
      const marker = svg("marker", { id: `arrow-${kind}`, viewBox: "0 0 10 10", refX: "9",
        refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse",
        class: `arrow ${kind}` });
      marker.append(svg("path", { d: "M0,0 L10,5 L0,10 z" }));
      return marker;
    }));
    picture.append(defs);
    let bends = 0;
    for (const edge of graph.edges) {
      const from = at[edge.from];
      const to = at[edge.to];
      const kind = edge.kind === "onFailure" ? "failure"
        : edge.kind === "onIncomplete" || to.y <= from.y ? "back" : "success";
      let d;
      let label = null;
      if (to.y > from.y) {
        const [x1, y1] = [from.x + BOX.width / 2, from.y + BOX.height];
        const [x2, y2] = [to.x + BOX.width / 2, to.y];
        d = `M${x1},${y1} C${x1},${(y1 + y2) / 2} ${x2},${(y1 + y2) / 2} ${x2},${y2}`;
        if (edge.kind === "action") label = [(x1 + x2) / 2 + 6, (y1 + y2) / 2];
      } else {
        bends += 1;
        const out = 14 + (bends % 3) * 8;
        const [x1, y1] = [from.x + BOX.width, from.y + BOX.height / 2];
        const [x2, y2] = [to.x + BOX.width, to.y + BOX.height / 2];
        d = `M${x1},${y1} C${x1 + out * 2},${y1} ${x2 + out * 2},${y2} ${x2},${y2}`;
      }
      picture.append(svg("path", { d, class: `edge ${kind}`,
        "marker-end": `url(#arrow-${kind})` }));
      if (label) {
        picture.append(svg("text", { x: label[0], y: label[1], class: "edge-label" },
          edge.label));
      }
    }
    for (const { x, y, node } of Object.values(at)) {
      const group = svg("g", { class: `node ${node.type.toLowerCase()}`,
        "data-node": node.id });
      group.append(svg("rect", { x, y, width: BOX.width, height: BOX.height, rx: "8" }),
        svg("text", { x: x + 10, y: y + 21, class: "node-id" }, node.id),
        svg("text", { x: x + 10, y: y + 40, class: "node-kind" },
          node.executor || t(TEXT[node.type] || node.type)));
      picture.append(group);
    }
    const leaving = {};
    for (const edge of graph.edges) (leaving[edge.from] = leaving[edge.from] || []).push(edge);
    const steps = element("ol", { class: "flow-steps" }, ...graph.nodes.map((node) =>
      element("li", {}, element("strong", {}, node.id), ` (${node.executor
        || t(TEXT[node.type] || node.type)})`, (leaving[node.id] || []).length
        ? `: ${(leaving[node.id]).map((edge) => t("{how} → {next}",
          { how: edgeWords(edge), next: edge.to })).join("; ")}` : "")));
    return [element("div", { class: "flow-scroll", tabindex: "0",
      "aria-label": t("The flow as a graph") }, picture),
    element("p", { class: "legend hint" }, t("Solid arrows: on success or a choice. " +
      "Dashed arrows on the right: back to a step that asks again. Red: on failure.")),
    element("h3", { id: "flow-steps-heading" }, t("The steps")), steps];
  }

  admin.area("themes", themes);
  admin.area("flows", flows);
})();
