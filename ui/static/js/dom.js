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

export function fmtTime(t) {
  if (!t) return "";
  const d = new Date(t);
  return isNaN(d) ? t : d.toLocaleString(undefined, { dateStyle: "short", timeStyle: "medium" });
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

// localInput turns a time into the value of an <input type=datetime-local>.
export function localInput(t) {
  const d = t ? new Date(t) : new Date();
  const off = d.getTimezoneOffset() * 60000;
  return new Date(d - off).toISOString().slice(0, 19);
}

// fromLocalInput turns an <input type=datetime-local> value into RFC 3339.
export function fromLocalInput(v) { return v ? new Date(v).toISOString() : undefined; }

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
