// The page's language: the catalog the server put in the page (English text -> this
// language's), and t() to look a text up and fill its {placeholders}. Loaded first.
"use strict";

(() => {
  const block = document.getElementById("messages");
  const messages = block ? JSON.parse(block.textContent || "{}") : {};
  window.identityctlText = (text, values = {}) => (messages[text] || text).replace(
    /\{(\w+)\}/g, (whole, name) => (name in values ? String(values[name]) : whole));
})();
