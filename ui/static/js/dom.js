// dom.js: building elements, messages and formats.

// h builds an element: h("a", {href: "#"}, "text", child...). Text is set
// as text, never as HTML, so job bodies and errors cannot inject markup.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "value") el.value = v;
    else if (k === "checked") el.checked = !!v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// flash shows a message above the page until the next one or route.
export function flash(msg, kind = "ok") {
  const f = document.getElementById("flash");
  f.replaceChildren(h("div", { class: kind, id: "flash-" + kind }, msg));
}
export function clearFlash() { document.getElementById("flash").replaceChildren(); }

// attempt runs an action, flashes its outcome, and returns whether it
// succeeded.
export async function attempt(what, fn) {
  try {
    await fn();
    flash(what);
    return true;
  } catch (e) {
    flash(`${e.message}${e.field ? ` (${e.field})` : ""}`, "error");
    return false;
  }
}

// Times are shown in UTC with the zone written, in every page: lists show
// them relative to now ("in 5m", "3m ago") with the UTC time on hover.

// fmtTime writes a time in UTC: "2026-11-26 05:00:05 UTC".
export function fmtTime(t) {
  if (!t) return "";
  const d = new Date(t);
  return isNaN(d) ? String(t) : d.toISOString().slice(0, 19).replace("T", " ") + " UTC";
}

// fmtAgo writes a time relative to now, rounded to the nearest unit:
// "now" (within 5 s), "in 40s", "3m ago", "in 2h", "5d ago"; from 45 of a
// unit on, the next unit.
export function fmtAgo(t, now = Date.now()) {
  const s = Math.round((new Date(t) - now) / 1000);
  const a = Math.abs(s);
  if (isNaN(a)) return String(t);
  if (a < 5) return "now";
  const [n, u] = a < 45 ? [a, "s"] : a < 45 * 60 ? [Math.round(a / 60), "m"] : a < 36 * 3600 ? [Math.round(a / 3600), "h"] : [Math.round(a / 86400), "d"];
  return s > 0 ? `in ${n}${u}` : `${n}${u} ago`;
}

// when shows a time relative to now, with the UTC time as its title.
export function when(t) {
  return t ? h("time", { datetime: t, title: fmtTime(t) }, fmtAgo(t)) : "";
}

export function fmtRate(x) {
  if (!x) return "0";
  return x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2);
}

export function fmtMS(seconds) {
  if (seconds === undefined || seconds === null) return "–";
  const ms = seconds * 1000;
  return ms >= 100 ? ms.toFixed(0) + " ms" : ms.toFixed(2) + " ms";
}

// pretty writes a JSON value indented.
export function pretty(v) { return JSON.stringify(v, null, 2); }

// utcInput turns a time (now without one) into the value of an
// <input type=datetime-local>, which the pages label as UTC.
export function utcInput(t) {
  return (t ? new Date(t) : new Date()).toISOString().slice(0, 19);
}

// fromUTCInput turns an <input type=datetime-local> value, read as UTC,
// into RFC 3339.
export function fromUTCInput(v) { return v ? new Date(v + "Z").toISOString() : undefined; }

export function badge(text, cls = text) { return h("span", { class: "badge " + cls }, text); }

// confirmAction asks, in a dialog of the page, whether to go on with an
// action that destroys or moves jobs; question names what it affects. It
// resolves true only for the dialog's yes button: Escape or "Keep" is no.
export function confirmAction(question, yes) {
  return new Promise((resolve) => {
    const dlg = h("dialog", { id: "confirm" },
      h("p", { id: "confirm-text" }, question),
      h("form", { method: "dialog", class: "actions" },
        h("button", { id: "confirm-no", value: "no" }, "Keep"),
        h("button", { id: "confirm-yes", class: "danger", value: "yes" }, yes)));
    dlg.addEventListener("close", () => { dlg.remove(); resolve(dlg.returnValue === "yes"); });
    document.body.append(dlg);
    dlg.showModal();
  });
}

// ready marks the page loaded, for tests and screenshots.
export function ready(main) { main.dataset.ready = "1"; }

// redrawing marks the page as being drawn again after an action, until
// ready: tests wait for it.
export function redrawing() { delete document.getElementById("app").dataset.ready; }

// live calls draw every 5 s while the page is shown, and at once when
// its tab is shown again, but not while the tab is hidden or
// refreshPaused. It returns the page's cleanup.
export function live(main, draw, ms = 5000) {
  const tick = () => { if (!document.hidden && !refreshPaused(main)) draw().catch(() => {}); };
  const timer = setInterval(tick, ms);
  document.addEventListener("visibilitychange", tick);
  return () => { clearInterval(timer); document.removeEventListener("visibilitychange", tick); };
}

// refreshPaused is true while the user has ticked jobs, has a dialog open
// or is in a field of the page: a redraw would undo or move them.
export function refreshPaused(main = document.getElementById("app")) {
  const el = document.activeElement;
  return !!(document.querySelector("dialog[open]") || main.querySelector("input.pick:checked") ||
    (el && main.contains(el) && el.matches("input:not(.pick), textarea, select")));
}
