// push.js: push a job from a form: topic, body, when it runs and expires,
// key and priority.
import { get, call, enc } from "./api.js";
import { h, attempt, flash, fromUTCInput } from "./dom.js";

export async function pushPage(main) {
  const topics = (await get("/v1/topics")).topics.map((t) => t.name);
  const v = (id) => form.querySelector("#" + id).value.trim();
  const form = h("form", { class: "grid card", id: "push-form", onsubmit: async (e) => {
    e.preventDefault();
    const req = { topic: v("push-topic") };
    if (v("push-body")) {
      try { req.body = JSON.parse(v("push-body")); } catch (err) { flash("body: " + err.message, "error"); return; }
    }
    if (v("push-delay")) req.delay = v("push-delay");
    else if (v("push-run-at")) req.run_at = fromUTCInput(v("push-run-at"));
    if (v("push-expires-in")) req.expires_in = v("push-expires-in");
    else if (v("push-expires-at")) req.expires_at = fromUTCInput(v("push-expires-at"));
    if (v("push-key")) req.key = v("push-key");
    if (v("push-priority")) req.priority = +v("push-priority");
    let created;
    if (await attempt("Pushed.", async () => { created = await call("POST", "/v1/jobs", req); })) {
      flash(h("span", {}, "Pushed ", h("a", { href: `#/job/${enc(created.id)}`, id: "pushed-id" }, created.id), ` (${created.state}).`));
    }
  } },
  h("label", { for: "push-topic" }, "topic"), h("input", { id: "push-topic", list: "topic-names", required: true, placeholder: "orders.close" }),
  h("datalist", { id: "topic-names" }, topics.map((t) => h("option", { value: t }))),
  h("label", { for: "push-body" }, "body (JSON)"), h("textarea", { id: "push-body", placeholder: '{"order": 42}' }),
  h("label", { for: "push-delay" }, "delay"), h("input", { id: "push-delay", placeholder: "15m (or run at below; neither: now)" }),
  h("label", { for: "push-run-at" }, "run at (UTC)"), h("input", { id: "push-run-at", type: "datetime-local", step: 1 }),
  h("label", { for: "push-expires-in" }, "expires in"), h("input", { id: "push-expires-in", placeholder: "1h after run at (or expires at below; neither: the topic's expiry)" }),
  h("label", { for: "push-expires-at" }, "expires at (UTC)"), h("input", { id: "push-expires-at", type: "datetime-local", step: 1 }),
  h("label", { for: "push-key" }, "key"), h("input", { id: "push-key" }),
  h("label", { for: "push-priority" }, "priority"), h("input", { id: "push-priority", type: "number", min: -10, max: 10, placeholder: "0" }),
  h("div", { class: "full actions" }, h("button", { class: "primary", type: "submit", id: "push-submit" }, "Push")));
  main.replaceChildren(h("h1", {}, "Push a job"), form);
}
