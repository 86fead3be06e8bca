// The page's language: the catalog the server put in the page (English text -> this
// language's; a counted text -> its forms by CLDR plural category), and t() to look a text
// up and fill its {placeholders}: the form {count} takes, numbers as the language writes
// them (the browser's CLDR, Intl). Loaded first.
"use strict";

(() => {
  const block = document.getElementById("messages");
  const messages = block ? JSON.parse(block.textContent || "{}") : {};
  const language = document.documentElement.lang || "en";
  const plural = new Intl.PluralRules(language);
  const number = new Intl.NumberFormat(language);
  const written = (value) => (typeof value === "number" ? number.format(value) : String(value));
  window.identityctlNumber = written;
  window.identityctlText = (text, values = {}) => {
    let entry = messages[text] || text;
    if (typeof entry === "object") {
      entry = entry[plural.select(Number(values.count))] || entry.other;
    }
    return entry.replace(/\{(\w+)\}/g,
      (whole, name) => (name in values ? written(values[name]) : whole));
  };
})();
