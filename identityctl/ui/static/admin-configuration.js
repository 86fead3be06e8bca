// The admin console's Configuration area: the deployment's configuration as code. Download
// the export document (JSON or YAML); upload or paste one; see what applying it would
// change, per kind, as a readable diff (the dry run changes nothing); apply it after a fresh
// passkey sign-in. The console sends the document's text as it is (YAML or JSON): the
// service parses it, with the loader `identityctl apply` uses.
"use strict";

(() => {
  const admin = window.identityctlAdmin;
  if (!admin) return;
  const { t, element, button, section, field, feedback, say } = admin;

  // The document's sections in plain words, in the order a plan lists them.
  const SECTIONS = {
    themes: "Themes",
    flows: "Flows",
    organizationUnits: "Organization units",
    userTypes: "User types",
    roles: "Roles",
    identityProviders: "Identity providers",
    applications: "Applications",
  };
  const OUTCOMES = { create: "created", update: "changed", delete: "deleted" };

  function download(form) {
    admin.guarded(() => admin.download(`/configuration?format=${form}`,
      `identity.${form}`), "download");
  }

  // The lines of ``before`` and ``after`` (as the export writes them, JSON here) that differ:
  // [mark, line] with " " (kept), "-" (removed), "+" (added), by their longest common run.
  function lineDiff(before, after) {
    const old = before ? JSON.stringify(before, null, 2).split("\n") : [];
    const now = after ? JSON.stringify(after, null, 2).split("\n") : [];
    const common = old.map(() => new Array(now.length + 1).fill(0));
    common.push(new Array(now.length + 1).fill(0));
    for (let i = old.length - 1; i >= 0; i -= 1) {
      for (let j = now.length - 1; j >= 0; j -= 1) {
        common[i][j] = old[i] === now[j] ? common[i + 1][j + 1] + 1
          : Math.max(common[i + 1][j], common[i][j + 1]);
      }
    }
    const lines = [];
    let i = 0;
    let j = 0;
    while (i < old.length || j < now.length) {
      if (i < old.length && j < now.length && old[i] === now[j]) {
        lines.push([" ", old[i]]);
        i += 1;
        j += 1;
      } else if (j < now.length && (i === old.length || common[i][j + 1] >= common[i + 1][j])) {
        lines.push(["+", now[j]]);
        j += 1;
      } else {
        lines.push(["-", old[i]]);
        i += 1;
      }
    }
    return lines;
  }

  // One change: its name and what happens to it; a change of an entry shows its diff.
  function changeItem(change) {
    const tag = element("span", { class: `tag change-${change.action}` },
      t(OUTCOMES[change.action] || change.action));
    const item = element("li", {}, element("span", { class: "change-key" }, change.key), " ",
      tag);
    if (change.action === "update") {
      const diff = lineDiff(change.before, change.after).filter(([mark]) => mark !== " ");
      item.append(element("pre", { class: "diff", tabindex: "0",
        "aria-label": t("What changes in {name}", { name: change.key }) },
      ...diff.map(([mark, line]) => element("span", { class: mark === "+" ? "added"
        : "removed" }, element("span", { class: "visually-hidden" },
        mark === "+" ? t("added") : t("removed")), `${mark} ${line}\n`))));
    }
    if (change.secretChanged) {
      item.append(element("p", { class: "hint" }, t("Its secret changes to the one the " +
        "document names.")));
    }
    return item;
  }

  // The plan (or what was applied), kind by kind, with how many of each action.
  function planView(changes, applied) {
    if (!changes.length) {
      return element("p", { class: "status" }, applied ? t("Nothing was changed.")
        : t("Nothing would change: the deployment matches the document."));
    }
    const named = changes.map((change) => change.section);
    const kinds = [...new Set([...Object.keys(SECTIONS), ...named])]
      .filter((kind) => named.includes(kind));
    return element("div", { class: "plan" }, ...kinds.map((kind) => {
      const mine = changes.filter((change) => change.section === kind);
      const count = (action) => mine.filter((change) => change.action === action).length;
      const counts = { created: count("create"), updated: count("update"),
        deleted: count("delete") };
      const title = SECTIONS[kind] ? t(SECTIONS[kind]) : kind;
      return element("section", { class: "plan-kind", "aria-label": title },
        element("h3", {}, title),
        element("p", { class: "hint" }, applied
          ? t("{created} created, {updated} changed, {deleted} deleted.", counts)
          : t("{created} to create, {updated} to change, {deleted} to delete.", counts)),
        element("ul", { class: "changes" }, ...mine.map(changeItem)));
    }));
  }

  async function configuration() {
    admin.heading(t("Configuration"));
    const file = element("input", { type: "file",
      accept: ".yaml,.yml,.json,application/json,application/yaml" });
    const text = element("textarea", { rows: "12", spellcheck: "false", class: "document" });
    const result = element("div", { id: "plan" });
    let planned = "";
    const apply = button(t("Apply these changes"), () => admin.guarded(async () => {
      if (!window.confirm(t("Apply the document? The deployment changes as shown. You " +
        "confirm with your passkey."))) return;
      const said = t("The document was applied.");
      const answer = await admin.change("POST", "/configuration/apply", planned,
        { hash: "#/configuration", said });
      apply.hidden = true;
      result.replaceChildren(element("h3", { tabindex: "-1" }, t("Applied")),
        planView(answer.changes, true));
      say("apply", said);
      result.querySelector("h3").focus();
    }, "apply"));
    apply.hidden = true;
    file.addEventListener("change", () => admin.guarded(async () => {
      if (file.files.length) text.value = await file.files[0].text();
    }, "document"));
    text.addEventListener("input", () => {
      apply.hidden = true;  // a plan holds for the text it was made of
    });
    const form = element("form", { class: "stacked", "aria-label": t("A document to apply") },
      field("document-file", t("Upload a file"), file, t("YAML or JSON, as exported.")),
      field("document-text", t("Or paste the document"), text),
      element("button", { type: "submit" }, t("Show what would change")), feedback("document"));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      admin.guarded(async () => {
        planned = text.value;
        const plan = await admin.call("POST", "/configuration/plan", planned);
        result.replaceChildren(element("h3", { tabindex: "-1" }, t("What would change")),
          planView(plan.changes, false));
        apply.hidden = !plan.changes.length;
        result.querySelector("h3").focus();
      }, "document");
    });
    admin.content().replaceChildren(
      section(t("Download"), element("p", {}, t("The applications, flows, themes, " +
        "organization units, user types, roles and identity providers, with secrets as " +
        "references, never their values.")),
      element("p", { class: "actions" },
        button(t("Download as YAML"), () => download("yaml"), true),
        button(t("Download as JSON"), () => download("json"), true)), feedback("download")),
      section(t("Apply a document"), form, result,
        element("p", { class: "actions" }, apply), feedback("apply")));
  }

  admin.area("configuration", configuration);
})();
