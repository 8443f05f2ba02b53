// evolve ui: progressive enhancement only; every page works without it.
// Loaded as a same-origin file: the Content-Security-Policy forbids inline script.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  // a copy button beside each command
  for (const pre of document.querySelectorAll("pre.cmd")) {
    const b = document.createElement("button");
    b.type = "button"; b.className = "copy"; b.textContent = "copy";
    b.addEventListener("click", () => {
      const text = pre.textContent.trim();
      if (navigator.clipboard) navigator.clipboard.writeText(text).then(() => { b.textContent = "copied"; }, () => {});
    });
    pre.after(b);
  }
  // rollout filters apply on change
  const form = document.getElementById("rollout-filters");
  if (form) {
    for (const sel of form.querySelectorAll("select")) sel.addEventListener("change", () => form.requestSubmit());
  }
  // open a rollout's details when the page was linked to it (#r123)
  if (location.hash.startsWith("#r")) {
    const row = document.getElementById(location.hash.slice(1));
    if (row) { const d = row.querySelector("details"); if (d) d.open = true; }
  }
  // highlight a series when its legend is hovered
  for (const svg of document.querySelectorAll("svg.chart")) {
    svg.addEventListener("mouseover", (e) => {
      const s = e.target.getAttribute && e.target.getAttribute("data-series");
      if (s) svg.setAttribute("data-hover", s);
    });
  }
  document.documentElement.dataset.ready = "1";
});
