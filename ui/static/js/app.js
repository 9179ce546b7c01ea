// app.js: the router of the web UI. Pages are named by the URL's fragment
// (#/topic/orders), so that the server serves one page and links work.
import { authConfigured, token, setToken, whoami, forgetWhoami, can, get } from "./api.js";
import { h, clearFlash, flash, ready } from "./dom.js";
import { overview } from "./overview.js";
import { topicPage } from "./topic.js";
import { jobPage } from "./job.js";
import { deadPage } from "./dead.js";
import { searchPage } from "./search.js";
import { pushPage } from "./push.js";
import { schedulesPage, schedulePage } from "./schedules.js";

// A page is called with the parts its pattern captures, then the
// parameters after a "?" (#/dead?per=100).
const routes = [
  [/^\/?$/, "overview", overview],
  [/^\/topic\/(.+)$/, "overview", topicPage],
  [/^\/job\/(.+)$/, "search", jobPage],
  [/^\/dead$/, "dead", deadPage],
  [/^\/search$/, "search", searchPage],
  [/^\/push$/, "push", pushPage],
  [/^\/schedules$/, "schedules", schedulesPage],
  [/^\/schedule\/(.+)$/, "schedules", schedulePage],
];

let cleanup = null;

function loginPage(main) {
  const input = h("input", { id: "token", type: "password", autocomplete: "off", placeholder: "API token" });
  const form = h("form", { class: "card login", id: "login", onsubmit: async (e) => {
    e.preventDefault();
    setToken(input.value.trim());
    forgetWhoami();
    try {
      await whoami();
      location.hash = "#/";
    } catch (err) {
      setToken("");
      flash(err.status === 401 ? "This token is not valid." : err.message, "error");
    }
  } },
  h("h1", {}, "Sign in"),
  h("p", { class: "muted" }, "This delayq asks for an API token. It is kept in this tab's session storage and sent with each API call; the UI acts with its scopes."),
  input, h("div", { class: "actions" }, h("button", { class: "primary", type: "submit" }, "Sign in")));
  main.replaceChildren(form);
  ready(main);
}

function showWho(me) {
  const who = document.getElementById("who");
  who.replaceChildren();
  if (!me) return;
  const scopes = me.scopes.includes("admin") ? "admin" : me.scopes.join(" + ");
  who.append(h("span", { id: "scopes" }, me.auth ? scopes : "open API (no tokens)"));
  if (!can("push") && !can("admin")) who.append(h("span", { class: "badge", id: "read-only" }, "read-only"));
  if (me.topics) who.append(h("span", { id: "topic-patterns" }, "topics: " + me.topics.join(", ")));
  if (me.auth) who.append(h("button", { id: "logout", onclick: () => { setToken(""); forgetWhoami(); location.hash = "#/login"; } }, "Sign out"));
  for (const a of document.querySelectorAll("#nav a[data-needs]")) a.hidden = !can(a.dataset.needs);
}

async function route() {
  if (cleanup) { cleanup(); cleanup = null; }
  clearFlash();
  const main = document.getElementById("app");
  delete main.dataset.ready;
  const [rawPath, query = ""] = location.hash.replace(/^#/, "").split("?", 2);
  const path = decodeURIComponent(rawPath) || "/";
  if (path === "/login") {
    // Signing in again starts from no token.
    setToken("");
    forgetWhoami();
  }
  if (path === "/login" || (authConfigured && !token())) {
    showWho(null);
    document.getElementById("nav").hidden = true;
    return loginPage(main);
  }
  document.getElementById("nav").hidden = false;
  let me;
  try {
    me = await whoami();
  } catch (e) {
    main.replaceChildren(h("p", { class: "error" }, e.message));
    return;
  }
  showWho(me);
  for (const [re, nav, page] of routes) {
    const m = path.match(re);
    if (!m) continue;
    for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("active", a.dataset.nav === nav);
    main.replaceChildren(h("p", { class: "muted" }, "Loading…"));
    try {
      cleanup = (await page(main, ...m.slice(1), new URLSearchParams(query))) || null;
    } catch (e) {
      main.replaceChildren(h("h1", {}, "Error"), h("p", { id: "page-error" }, e.message));
    }
    ready(main);
    return;
  }
  main.replaceChildren(h("h1", {}, "Not found"), h("p", {}, "No page " + path));
  ready(main);
}

// get is re-exported for pages that only read.
export { get };

window.addEventListener("hashchange", route);
route();
