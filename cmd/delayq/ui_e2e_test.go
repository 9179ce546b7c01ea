package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// chromiumPath is Debian's chromium, which .ci/run installs.
const chromiumPath = "/usr/bin/chromium"

// screenshotsEnv names the directory (relative to the repository's root)
// into which the browser tests write a screenshot of each page, such as
// docs/ui; unset, they write none.
const screenshotsEnv = "DELAYQ_UI_SCREENSHOTS"

// Secrets of the UI tests' tokens.
const (
	uiAdminSecret  = "ui-admin-secret-0123456789"
	uiReaderSecret = "ui-reader-secret-0123456789"
	uiOrdersSecret = "ui-orders-secret-0123456789"
)

// requireChromium skips the test without chromium, or fails it under CI.
func requireChromium(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath(chromiumPath); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is required for the browser tests under CI: apt-get install chromium", chromiumPath)
		}
		t.Skipf("%s not found: apt-get install chromium to run the browser tests", chromiumPath)
	}
}

// browser is one headless Chromium, shared by the UI tests' tabs.
type browser struct{ ctx context.Context }

func startBrowser(t *testing.T) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.WithoutCancel(t.Context()), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	require.NoError(t, chromedp.Do(ctx), "starting chromium")
	return &browser{ctx: ctx}
}

// tab is a browser tab on one server's UI, which records what its pages
// write to the console as errors.
type tab struct {
	t    *testing.T
	ctx  context.Context
	base string // the server's URL

	mu   sync.Mutex
	errs []string
}

// open opens a tab; at the end of the test it fails the test when a page
// wrote an error or threw, but for the network errors allowed (answers the
// test provoked on purpose, such as a refused action).
func (b *browser) open(t *testing.T, base string, allowed ...string) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	tb := &tab{t: t, ctx: ctx, base: base}
	require.NoError(t, chromedp.Do(ctx))
	messages := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type != chromedp.ConsoleError && !m.IsException() {
				continue
			}
			ok := false
			for _, a := range allowed {
				ok = ok || strings.Contains(m.Text, a)
			}
			if !ok {
				tb.mu.Lock()
				tb.errs = append(tb.errs, fmt.Sprintf("%s (%s:%d)", m.Text, m.URL, m.Line+1))
				tb.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		tb.mu.Lock()
		defer tb.mu.Unlock()
		require.Empty(t, tb.errs, "the UI's pages wrote errors to the console")
	})
	return tb
}

// run runs actions within a bound, failing the test on error.
func (tb *tab) run(actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 15*time.Second)
	defer cancel()
	require.NoError(tb.t, chromedp.Do(ctx, actions...))
}

// eval evaluates a JavaScript expression, awaiting a promise.
func eval[T any](tb *tab, expr string) T {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 15*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	require.NoError(tb.t, err, "%s", expr)
	return v
}

// load opens the UI at fragment (such as "#/dead") with a fresh page load
// and waits until the page has drawn.
func (tb *tab) load(fragment string) {
	tb.t.Helper()
	tb.run(chromedp.Navigate(tb.base+"/ui/"+fragment), chromedp.WaitVisible(chromedp.CSS(`main[data-ready="1"]`)))
}

// goTo moves to fragment within the loaded UI and waits until it has drawn.
func (tb *tab) goTo(fragment string) {
	tb.t.Helper()
	tb.run(chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.getElementById("app").removeAttribute("data-ready"); location.hash = %q`, fragment)),
		chromedp.WaitVisible(chromedp.CSS(`main[data-ready="1"]`)))
}

// click clicks sel and returns the message the page flashed: "ok: ..." or
// "error: ...".
func (tb *tab) click(sel string) string {
	tb.t.Helper()
	tb.run(chromedp.Evaluate[chromedp.Void](`document.getElementById("flash").replaceChildren()`), chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible))
	msg := tb.flash()
	tb.waitFor(`document.getElementById("app").dataset.ready === "1"`) // drawn again
	return msg
}

// confirm clicks sel, which asks for confirmation, answers yes, and
// returns the question and the message the page flashed.
func (tb *tab) confirm(sel string) (question, msg string) {
	tb.t.Helper()
	question = tb.ask(sel)
	tb.run(chromedp.Click(chromedp.CSS("#confirm-yes"), chromedp.NodeVisible))
	msg = tb.flash()
	tb.waitFor(`document.getElementById("app").dataset.ready === "1"`) // drawn again
	return question, msg
}

// decline clicks sel, which asks for confirmation, answers no, and returns
// the question once the dialog is gone.
func (tb *tab) decline(sel string) string {
	tb.t.Helper()
	question := tb.ask(sel)
	tb.run(chromedp.Click(chromedp.CSS("#confirm-no"), chromedp.NodeVisible))
	tb.waitFor(`document.getElementById("confirm") === null`)
	return question
}

// ask clicks sel and returns the question of the dialog it opens.
func (tb *tab) ask(sel string) string {
	tb.t.Helper()
	tb.run(chromedp.Evaluate[chromedp.Void](`document.getElementById("flash").replaceChildren()`), chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS("dialog#confirm[open] #confirm-text")))
	return tb.text("#confirm-text")
}

// flash waits for the page's message and returns it.
func (tb *tab) flash() string {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 15*time.Second)
	defer cancel()
	msg, err := chromedp.Run(ctx, chromedp.Poll[string](
		`(() => { const d = document.querySelector("#flash > div"); return d ? d.className + ": " + d.textContent : ""; })()`,
		chromedp.WithPollingInterval(20*time.Millisecond)))
	if err != nil {
		html, _ := chromedp.Run(tb.ctx, chromedp.Evaluate[string](`document.body.innerHTML`))
		tb.t.Fatalf("waiting for the page's message: %v; the page:\n%s", err, html)
	}
	return msg
}

// waitFor waits until the page's expression is truthy.
func (tb *tab) waitFor(expr string) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 15*time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(20*time.Millisecond)))
	require.NoError(tb.t, err, "waiting for %s", expr)
}

// count returns how many elements match sel.
func (tb *tab) count(sel string) int {
	tb.t.Helper()
	return eval[int](tb, fmt.Sprintf(`document.querySelectorAll(%q).length`, sel))
}

// text returns the text of the first element matching sel.
func (tb *tab) text(sel string) string {
	tb.t.Helper()
	return eval[string](tb, fmt.Sprintf(`document.querySelector(%q)?.textContent ?? ""`, sel))
}

// setValue sets a form field's value, as typing would, with the input
// and change events.
func (tb *tab) setValue(sel, value string) {
	tb.t.Helper()
	tb.run(chromedp.Evaluate[chromedp.Void](fmt.Sprintf(
		`(() => { const e = document.querySelector(%q); e.value = %q; e.dispatchEvent(new Event("input", {bubbles: true})); e.dispatchEvent(new Event("change", {bubbles: true})); })()`,
		sel, value)))
}

// html returns the page's main element and message, for failure messages.
func (tb *tab) html() string {
	v, _ := chromedp.Run(tb.ctx, chromedp.Evaluate[string](`document.getElementById("flash").outerHTML + document.getElementById("app").outerHTML`))
	return v
}

// screenshot saves the viewport as name.png when DELAYQ_UI_SCREENSHOTS says
// where.
func (tb *tab) screenshot(name string) {
	tb.t.Helper()
	dir := os.Getenv(screenshotsEnv)
	if dir == "" {
		return
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join("..", "..", dir) // from cmd/delayq to the repository's root
	}
	ctx, cancel := context.WithTimeout(tb.ctx, 15*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(tb.t, err)
	require.NoError(tb.t, os.MkdirAll(dir, 0o755))
	require.NoError(tb.t, os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644))
}

// submit submits the form of id as a user does (requestSubmit, which runs
// its submit handler; chromedp.Submit calls form.submit(), which does not).
func (tb *tab) submit(id string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.getElementById(%q).requestSubmit()`, id))
}

// login signs in on the login page with secret (which signs the tab out).
func (tb *tab) login(secret string) {
	tb.t.Helper()
	tb.run(chromedp.Evaluate[chromedp.Void](`document.getElementById("app")?.removeAttribute("data-ready")`),
		chromedp.Navigate(tb.base+"/ui/#/login"), chromedp.WaitVisible(chromedp.CSS(`main[data-ready="1"] #login`)))
	tb.run(chromedp.SetValue(chromedp.ID("token"), secret), chromedp.Evaluate[chromedp.Void](`document.getElementById("app").removeAttribute("data-ready")`),
		tb.submit("login"), chromedp.WaitVisible(chromedp.CSS(`main[data-ready="1"] #topics`)))
}

// colorScheme emulates the system's prefers-color-scheme ("dark",
// "light"; "" ends the emulation).
func colorScheme(scheme string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		features := []map[string]string{}
		if scheme != "" {
			features = append(features, map[string]string{"name": "prefers-color-scheme", "value": scheme})
		}
		return t.Call(ctx, "Emulation.setEmulatedMedia", map[string]any{"features": features}, nil)
	})
}

// uiAPI calls a server's API, with a token when given.
type uiAPI struct {
	t      *testing.T
	base   string
	secret string
}

func (a uiAPI) call(method, path string, body any) (int, []byte) {
	a.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(a.t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(a.t.Context(), method, a.base+path, rd)
	require.NoError(a.t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if a.secret != "" {
		req.Header.Set("Authorization", "Bearer "+a.secret)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(a.t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(a.t, err)
	return resp.StatusCode, out
}

// must calls and requires status want, decoding the answer into a map.
func (a uiAPI) must(method, path string, body any, want int) map[string]any {
	a.t.Helper()
	status, out := a.call(method, path, body)
	require.Equal(a.t, want, status, "%s %s: %s", method, path, out)
	var m map[string]any
	if len(out) > 0 {
		require.NoError(a.t, json.Unmarshal(out, &m), "%s", out)
	}
	return m
}

// job reads a job.
func (a uiAPI) job(id string) map[string]any {
	return a.must(http.MethodGet, "/v1/jobs/"+id, nil, http.StatusOK)
}

// push creates a job and returns its id.
func (a uiAPI) push(req map[string]any) string {
	a.t.Helper()
	return a.must(http.MethodPost, "/v1/jobs", req, http.StatusCreated)["id"].(string)
}

// bury pushes a job on a topic of one attempt and fails it with reason,
// so that it is dead.
func (a uiAPI) bury(topic string, body any, reason string) string {
	a.t.Helper()
	id := a.nack(topic, body, reason, 1)
	require.Equal(a.t, "dead", a.job(id)["state"])
	return id
}

// fail pushes a job on a topic of three attempts and fails its first with
// reason, so that it is retried later.
func (a uiAPI) fail(topic string, body any, reason string) string {
	a.t.Helper()
	id := a.nack(topic, body, reason, 3)
	require.Equal(a.t, "scheduled", a.job(id)["state"])
	return id
}

// nack pushes a job of attempts attempts, claims it and fails the attempt
// with reason.
func (a uiAPI) nack(topic string, body any, reason string, attempts int) string {
	a.t.Helper()
	id := a.push(map[string]any{"topic": topic, "body": body, "max_attempts": attempts})
	jobs := a.must(http.MethodPost, "/v1/topics/"+topic+"/claim", map[string]any{"max": 1}, http.StatusOK)["jobs"].([]any)
	require.Len(a.t, jobs, 1)
	d := jobs[0].(map[string]any)
	require.Equal(a.t, id, d["id"])
	a.must(http.MethodPost, "/v1/jobs/"+id+"/nack", map[string]any{"lease": d["lease"], "error": reason}, http.StatusNoContent)
	return id
}

// TestE2EUI runs the web UI in headless Chromium against `delayq serve`
// on the default backend: every page loads without console errors, each
// action changes the stored state, a consume-only token finds no action
// that works, a token restricted to some topics sees only those, and --ui
// decides whether the pages are served.
func TestE2EUI(t *testing.T) {
	requireChromium(t)
	b := startBrowser(t)

	t.Run("open API", func(t *testing.T) { testUIOpen(t, b) })
	t.Run("tokens", func(t *testing.T) { testUITokens(t, b) })
	t.Run("--ui", testUIFlag)
}

// testUIOpen drives every page and action of a server without tokens.
func testUIOpen(t *testing.T, b *browser) {
	srv := startServer(t, defaultArgs(t.TempDir())...)
	api := uiAPI{t: t, base: srv.HTTPURL}
	api.must(http.MethodPut, "/v1/topics/orders", map[string]any{"ttr": "30s", "max_attempts": 5, "concurrency": 4}, http.StatusOK)
	then := map[string]any{"topic": "orders.remind", "delay": "30m0s", "key": "order-42", "then": map[string]any{"topic": "orders.cancel", "delay": "24h0m0s"}}
	later := api.push(map[string]any{"topic": "orders", "body": map[string]any{"order": 42, "customer": "ada"}, "delay": "1h", "key": "order-42", "then": then})
	soon := api.push(map[string]any{"topic": "orders", "body": map[string]any{"order": 43}, "delay": "2h", "key": "order-43"})
	boom1 := api.bury("payments", map[string]any{"payment": 1}, "card declined")
	boom2 := api.bury("payments", map[string]any{"payment": 2}, "card declined")
	gone := api.bury("payments", map[string]any{"payment": 3}, "gateway timeout")
	api.fail("payments", map[string]any{"payment": 4}, "gateway timeout") // a retry, for the topic's failure chart
	api.must(http.MethodPut, "/v1/schedules/nightly", map[string]any{"cron": "30 2 * * *", "topic": "orders", "job": map[string]any{"body": map[string]any{"report": "nightly"}}}, http.StatusOK)

	// The 400 is the refused topic configuration below, on purpose.
	tb := b.open(t, srv.HTTPURL, "400 (Bad Request)")
	start := time.Now()
	step := func(name string) { t.Logf("%6.1fs %s", time.Since(start).Seconds(), name) }

	// Overview: every topic with its counts, the chart and the breakers.
	tb.load("#/")
	require.Equal(t, "2", tb.text(`#topics tr[data-topic="orders"] td[data-state="scheduled"]`))
	require.Equal(t, "3", tb.text(`#topics tr[data-topic="payments"] td[data-state="dead"]`))
	require.Equal(t, 1, tb.count("#lateness-chart"))
	require.Contains(t, tb.text("#breakers"), "store")
	require.Contains(t, tb.text("#scopes"), "open API")

	step("Topic: its jobs")
	// Topic: its jobs by state, and its configuration edited.
	bulk1 := api.push(map[string]any{"topic": "orders", "body": map[string]any{"order": 50}, "delay": "3h", "key": "bulk"})
	bulk2 := api.push(map[string]any{"topic": "orders", "body": map[string]any{"order": 51}, "delay": "3h", "key": "bulk"})
	// A page of one job: the topic's count gives the number of pages.
	tb.goTo("#/topic/orders?per=1")
	require.Equal(t, "page 1 of 4 (4 scheduled)", tb.text("#page-of"))
	require.Equal(t, later, tb.text(`#jobs tbody tr:first-child td a`), "scheduled jobs in run_at order")
	tb.run(chromedp.Click(chromedp.CSS("#next-page")))
	tb.waitFor(`document.getElementById("page-of").textContent === "page 2 of 4 (4 scheduled)"`)
	require.Equal(t, soon, tb.text(`#jobs tbody tr:first-child td a`))
	tb.run(chromedp.Click(chromedp.CSS("#prev-page")))
	tb.waitFor(`document.getElementById("page-of").textContent === "page 1 of 4 (4 scheduled)"`)
	tb.goTo("#/topic/orders")
	require.Equal(t, 4, tb.count(`#jobs tr[data-job]`))
	require.Equal(t, later, tb.text(`#jobs tbody tr:first-child td a`), "scheduled jobs in run_at order")
	// Times relative to now, in UTC on hover.
	require.Equal(t, "in 1h", tb.text(`#jobs tr[data-job="`+later+`"] td.when`))
	require.Equal(t, "in 2h", tb.text(`#jobs tr[data-job="`+soon+`"] td.when`))
	ago := eval[[]string](tb, `import("./js/dom.js").then((m) => [0, 4e3, 44e3, -50e3, 30*60e3, -50*60e3, 2*3600e3, 35*3600e3, -36*3600e3].map((d) => m.fmtAgo(new Date(1e12 + d), 1e12)))`)
	require.Equal(t, []string{"now", "now", "in 44s", "1m ago", "in 30m", "1h ago", "in 2h", "in 35h", "2d ago"}, ago)
	require.Regexp(t, `^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$`, eval[string](tb, `document.querySelector('#jobs tr[data-job="`+later+`"] td.when time').title`))
	require.Equal(t, 1, tb.count("#rate-chart"))
	require.Equal(t, 1, tb.count("#topic-lateness-chart"))
	tb.screenshot("topic")
	// Filtered by key, the jobs ticked cancelled after a yes.
	tb.setValue("#filter-key", "bulk")
	tb.run(tb.submit("key-filter"))
	tb.waitFor(`document.getElementById("jobs-title").textContent === "Jobs with key “bulk”"`)
	require.Equal(t, 2, tb.count(`#jobs tr[data-job]`))
	tb.run(chromedp.Click(chromedp.CSS(`input.pick[data-job="`+bulk1+`"]`)), chromedp.Click(chromedp.CSS(`input.pick[data-job="`+bulk2+`"]`)))
	question, msg := tb.confirm("#cancel-selected")
	require.Equal(t, "Cancel 2 jobs of orders?", question)
	require.Equal(t, "ok: Cancelled 2 of 2 jobs.", msg)
	require.Equal(t, "cancelled", api.job(bulk1)["state"])
	require.Equal(t, "cancelled", api.job(bulk2)["state"])
	tb.waitFor(`document.querySelectorAll('#jobs td .badge.cancelled').length === 2`)
	// The counts refresh themselves, every 5 s and, not to wait for it
	// here, when the tab is shown again.
	require.Equal(t, "scheduled 2", tb.text(`#counts [data-state="scheduled"]`))
	live := api.push(map[string]any{"topic": "orders", "body": map[string]any{"order": 52}, "delay": "3h"})
	tb.run(chromedp.Evaluate[chromedp.Void](`document.dispatchEvent(new Event("visibilitychange"))`))
	tb.waitFor(`document.querySelector('#counts [data-state="scheduled"]').textContent === "scheduled 3"`)
	api.must(http.MethodDelete, "/v1/jobs/"+live, nil, http.StatusNoContent)
	tb.setValue("#concurrency", "7")
	tb.setValue("#backoff-delays", "1m, 5m")
	tb.setValue("#rate-limit", "50")
	require.Equal(t, "ok: Topic orders saved.", tb.click("#save-topic"))
	topic := api.must(http.MethodGet, "/v1/topics/orders", nil, http.StatusOK)
	require.EqualValues(t, 7, topic["concurrency"])
	require.EqualValues(t, 5, topic["max_attempts"], "the fields not edited are kept")
	require.Equal(t, []any{"1m0s", "5m0s"}, topic["backoff"].(map[string]any)["delays"])
	require.EqualValues(t, 50, topic["rate"].(map[string]any)["limit"])
	require.Equal(t, "ok: Topic orders paused.", tb.click("#pause"))
	require.Equal(t, true, api.must(http.MethodGet, "/v1/topics/orders", nil, http.StatusOK)["paused"])
	require.Equal(t, "ok: Topic orders resumed.", tb.click("#resume"))
	require.Equal(t, false, api.must(http.MethodGet, "/v1/topics/orders", nil, http.StatusOK)["paused"])
	tb.run(chromedp.Click(chromedp.CSS(`#state-tabs button[data-state="done"]`)))
	tb.waitFor(`document.getElementById("jobs").dataset.state === "done"`)
	require.Zero(t, tb.count(`#jobs tr[data-job]`))

	step("Topic: every field")
	// Every field of a topic set with the form, each shown only for the
	// delivery type it belongs to; a value the server refuses shows its
	// message and changes nothing.
	api.must(http.MethodPut, "/v1/topics/hooks", map[string]any{"ttr": "1m", "max_attempts": 3, "backoff": map[string]any{"jitter": 0.5}}, http.StatusOK)
	tb.goTo("#/topic/hooks")
	visible := func(id string) bool {
		return eval[bool](tb, fmt.Sprintf(`document.getElementById(%q).checkVisibility() && document.querySelector('label[for=%q]').checkVisibility()`, id, id))
	}
	require.False(t, visible("delivery-method"), "no webhook field on a consumer topic")
	tb.setValue("#delivery-type", "webhook")
	require.True(t, visible("delivery-method"), "the webhook's fields once webhook is chosen")
	require.True(t, visible("delivery-success"))
	require.False(t, visible("delivery-subject"))
	tb.setValue("#delivery-url", "http://127.0.0.1:9/hook")
	tb.setValue("#delivery-method", "PUT")
	tb.setValue("#delivery-timeout", "5s")
	tb.setValue("#delivery-success", "status == 200 && body.ok")
	tb.run(chromedp.Click(chromedp.CSS("#delivery-allow-job-url"), chromedp.NodeVisible))
	tb.setValue("#max-in-flight", "4")
	tb.setValue("#key-concurrency", "2")
	tb.run(chromedp.Click(chromedp.CSS("#fair"), chromedp.NodeVisible))
	tb.setValue("#rate-limit", "10")
	tb.setValue("#rate-burst", "3")
	tb.run(chromedp.Click(chromedp.CSS("#rate-per-key"), chromedp.NodeVisible))
	tb.setValue("#unique-keys", "replace")
	tb.setValue("#on-dead", "hooks.dead")
	tb.setValue("#delay", "5m")
	tb.setValue("#expires-in", "1h")
	tb.setValue("#retention", "240h")
	tb.setValue("#events-topic", "hooks.audit")
	tb.run(chromedp.Click(chromedp.CSS("#events-on-done"), chromedp.NodeVisible))
	tb.run(chromedp.Click(chromedp.CSS("#events-on-dead"), chromedp.NodeVisible))
	require.Equal(t, "ok: Topic hooks saved.", tb.click("#save-topic"))
	topic = api.must(http.MethodGet, "/v1/topics/hooks", nil, http.StatusOK)
	require.Equal(t, "5m0s", topic["delay"])
	require.Equal(t, "1h0m0s", topic["expires_in"])
	require.Equal(t, "240h0m0s", topic["retention"])
	require.Equal(t, map[string]any{"type": "webhook", "url": "http://127.0.0.1:9/hook", "method": "PUT", "timeout": "5s",
		"success": "status == 200 && body.ok", "allow_job_url": true, "secret_set": false}, topic["delivery"])
	require.EqualValues(t, 4, topic["max_in_flight"])
	require.EqualValues(t, 2, topic["key_concurrency"])
	require.Equal(t, true, topic["fair"])
	require.Equal(t, map[string]any{"limit": float64(10), "period": "1s", "burst": float64(3), "per_key": true}, topic["rate"])
	require.Equal(t, "replace", topic["unique_keys"])
	require.Equal(t, "hooks.dead", topic["on_dead"])
	require.Equal(t, map[string]any{"topic": "hooks.audit", "on": []any{"done", "dead"}}, topic["events"])
	require.Equal(t, "Events of its jobs (done, dead) go to hooks.audit.", tb.text("#topic-events"), "the topic page says where its events go")
	require.Equal(t, "1m0s", topic["ttr"], "the fields not edited are kept")
	require.EqualValues(t, 3, topic["max_attempts"])
	require.EqualValues(t, 0.5, topic["backoff"].(map[string]any)["jitter"], "the jitter, not on the form, is kept")
	// The form drawn again shows what was stored.
	require.Equal(t, "PUT", eval[string](tb, `document.getElementById("delivery-method").value`))
	require.True(t, eval[bool](tb, `document.getElementById("delivery-allow-job-url").checked`))
	require.Equal(t, "3", eval[string](tb, `document.getElementById("rate-burst").value`))
	require.True(t, eval[bool](tb, `document.getElementById("rate-per-key").checked`))
	require.True(t, eval[bool](tb, `document.getElementById("events-on-dead").checked`))
	require.False(t, eval[bool](tb, `document.getElementById("events-on-cancelled").checked`))
	tb.setValue("#delivery-success", "status ==")
	tb.setValue("#max-in-flight", "9")
	refused := tb.click("#save-topic")
	require.True(t, strings.HasPrefix(refused, "error: delivery.success: "), refused)
	require.Contains(t, refused, "Syntax error")
	require.True(t, strings.HasSuffix(refused, "(delivery.success)"), refused)
	require.Equal(t, topic, api.must(http.MethodGet, "/v1/topics/hooks", nil, http.StatusOK), "a refused configuration changes nothing")
	// A NATS topic has a subject and a timeout, no webhook field.
	tb.setValue("#delivery-type", "nats")
	require.True(t, visible("delivery-subject"))
	require.True(t, visible("delivery-timeout"))
	require.False(t, visible("delivery-url"))
	// A kafka topic has a Kafka topic and a timeout; this server has no
	// --kafka-brokers, so saving one is refused, naming the field.
	tb.setValue("#delivery-type", "kafka")
	require.True(t, visible("delivery-kafka-topic"))
	require.True(t, visible("delivery-timeout"))
	require.False(t, visible("delivery-subject"))
	tb.setValue("#delivery-kafka-topic", "orders-due")
	refused = tb.click("#save-topic")
	require.True(t, strings.HasSuffix(refused, "(delivery.type)"), refused)
	require.Contains(t, refused, `delivery type "kafka" is not available on this server`)
	// Back to a consumer topic: the webhook's fields are hidden and not
	// sent, and emptied fields go absent.
	tb.setValue("#delivery-type", "consumer")
	require.False(t, visible("delivery-url"))
	require.False(t, visible("delivery-timeout"))
	tb.setValue("#max-in-flight", "")
	tb.setValue("#key-concurrency", "")
	tb.run(chromedp.Click(chromedp.CSS("#fair"), chromedp.NodeVisible))
	tb.run(chromedp.Click(chromedp.CSS("#rate-per-key"), chromedp.NodeVisible))
	tb.setValue("#unique-keys", "")
	tb.setValue("#on-dead", "")
	tb.setValue("#delay", "")
	tb.setValue("#expires-in", "")
	tb.setValue("#events-topic", "")
	require.Equal(t, "ok: Topic hooks saved.", tb.click("#save-topic"))
	topic = api.must(http.MethodGet, "/v1/topics/hooks", nil, http.StatusOK)
	require.Equal(t, map[string]any{"type": "consumer", "secret_set": false}, topic["delivery"])
	require.Equal(t, 0, tb.count("#topic-events"))
	for _, field := range []string{"max_in_flight", "key_concurrency", "fair", "unique_keys", "on_dead", "delay", "expires_in", "events"} {
		require.NotContains(t, topic, field)
	}
	require.Equal(t, map[string]any{"limit": float64(10), "period": "1s", "burst": float64(3)}, topic["rate"])

	step("Topic: secret and headers kept")
	// A webhook topic's secret and headers, which the API never shows
	// back, are kept by a save of the form (a merge patch).
	api.must(http.MethodPut, "/v1/topics/signed", map[string]any{"delivery": map[string]any{"type": "webhook", "url": "http://127.0.0.1:9/hook",
		"secret": "s3cr3t-0123456789", "headers": map[string]any{"X-Api-Key": "k3y"}}}, http.StatusOK)
	tb.goTo("#/topic/signed")
	require.Equal(t, 1, tb.count("#secrets-kept"))
	tb.setValue("#max-attempts", "7")
	require.Equal(t, "ok: Topic signed saved.", tb.click("#save-topic"))
	topic = api.must(http.MethodGet, "/v1/topics/signed", nil, http.StatusOK)
	require.EqualValues(t, 7, topic["max_attempts"])
	require.Equal(t, true, topic["delivery"].(map[string]any)["secret_set"], "the secret is kept")
	require.Equal(t, []any{"X-Api-Key"}, topic["delivery"].(map[string]any)["header_names"], "the headers are kept")

	step("Job: fields")
	// Job: fields, body, edit and reschedule, run now, cancel.
	tb.goTo("#/job/" + later)
	require.Contains(t, tb.text("#job-body"), "\"customer\": \"ada\"", "the body pretty-printed")
	require.Equal(t, "orders.remind 30m0s after the ack (key order-42)orders.cancel 24h0m0s after the ack", tb.text("#job-steps"), "the next steps")
	require.Contains(t, tb.text("#job-then"), "\"topic\": \"orders.cancel\"", "the next steps pretty-printed")
	tb.screenshot("job")
	at := time.Now().Add(3 * time.Hour).Truncate(time.Second)
	tb.setValue("#edit-run-at", at.UTC().Format("2006-01-02T15:04:05")) // the pages' times are UTC
	tb.setValue("#edit-priority", "-3")
	tb.setValue("#edit-body", `{"order": 42, "customer": "grace"}`)
	require.Equal(t, "ok: Job "+later+" saved.", tb.click("#save-job"))
	j := api.job(later)
	require.EqualValues(t, -3, j["priority"])
	require.Equal(t, map[string]any{"order": float64(42), "customer": "grace"}, j["body"])
	runAt, err := time.Parse(time.RFC3339, j["run_at"].(string))
	require.NoError(t, err)
	require.True(t, runAt.Equal(at), "run_at %s, want %s", runAt, at)
	require.Equal(t, "order-42", j["key"], "the key is kept")
	require.Equal(t, then, j["then"], "the next steps are kept")
	require.Equal(t, "ok: Job "+later+" is due now.", tb.click("#run-now"))
	require.Equal(t, "ready", api.job(later)["state"])
	// Cancel asks first, naming the job; no keeps it.
	require.Equal(t, "Cancel job "+later+" of orders? It will never be delivered.", tb.decline("#cancel"))
	require.Equal(t, "ready", api.job(later)["state"], "a declined cancel changes nothing")
	_, cancelled := tb.confirm("#cancel")
	require.Equal(t, "ok: Job "+later+" cancelled.", cancelled)
	require.Equal(t, "cancelled", api.job(later)["state"])
	require.Zero(t, tb.count("#cancel"), "a finished job has no actions")

	step("A dead job is req")
	// A dead job is requeued from its page, whose trail then tells its
	// push, its delivery (the instance, the consumer and why it was
	// buried) and the requeue.
	tb.goTo("#/job/" + gone)
	require.Equal(t, "ok: Job "+gone+" requeued.", tb.click("#requeue"))
	require.Equal(t, "ready", api.job(gone)["state"])
	tb.waitFor(`document.querySelectorAll("main[data-ready='1'] #trail tbody tr").length === 3`)
	cells := func(col string) []string {
		return eval[[]string](tb, `[...document.querySelectorAll("#trail tbody td.`+col+`")].map((td) => td.textContent)`)
	}
	require.Equal(t, []string{"created", "delivered", "requeued"}, cells("event"))
	require.Equal(t, []string{"http", "pull", ""}, cells("via"))
	require.Equal(t, []string{"", "buried", ""}, cells("outcome"))
	require.Equal(t, []string{"", "gateway timeout", ""}, cells("error"))
	require.Regexp(t, `^\S+ → 127\.0\.0\.1:\d+$`, cells("by")[1], "the instance and the consumer")

	step("Dead letters")
	// The normaliser of errors leaves out what changes from job to job.
	patterns := eval[[]string](tb, `import("./js/dead.js").then((m) => [
		"upstream 503 after 1.5s (request 9f86d081884c7d65)",
		"lease of 01JDQ7Z3V4W5X6Y7Z8A9B0C1D2 expired after 2m30s",
		"row 2b1e7f0c-3d4a-4b5c-8d9e-0f1a2b3c4d5e locked for 250ms, try 3",
		"card declined", "", "facade deadbeef at 0x7ffe12ab",
	].map(m.errorPattern))`)
	require.Equal(t, []string{
		"upstream <n> after <duration> (request <hex>)",
		"lease of <id> expired after <duration>",
		"row <uuid> locked for <duration>, try <n>",
		"card declined", "(no error recorded)", "facade deadbeef at <hex>",
	}, patterns)
	// Dead letters: grouped by last error, its changing parts left out; a
	// selection requeued, a group requeued, a group deleted, each after a
	// yes.
	boom3 := api.bury("refunds", map[string]any{"refund": 4}, "card declined")
	api.bury("refunds", map[string]any{"refund": 5}, "gateway timeout")
	up1 := api.bury("invoices", map[string]any{"invoice": 1}, "upstream 503 after 1.5s (request 9f86d081884c7d65)")
	up2 := api.bury("invoices", map[string]any{"invoice": 2}, "upstream 502 after 250ms (request 0c1d2e3f4a5b6c7d)")
	// Read a job per topic at a time, the page says how many it has not
	// read, and reads them on demand.
	tb.goTo("#/dead?per=1")
	require.Equal(t, "(3 of 6)", tb.text("#dead-count"))
	require.Equal(t, "3 more dead jobs not loaded. Load 1 more per topic", tb.text("#not-loaded"))
	tb.run(chromedp.Evaluate[chromedp.Void](`document.getElementById("app").removeAttribute("data-ready")`), chromedp.Click(chromedp.CSS("#load-more")))
	tb.waitFor(`document.getElementById("app").dataset.ready === "1"`)
	require.Equal(t, "(6)", tb.text("#dead-count"))
	require.Zero(t, tb.count("#not-loaded"))
	tb.goTo("#/dead")
	require.Equal(t, 3, tb.count(".group"))
	card := `.group[data-pattern="card declined"]`
	upstream := `.group[data-pattern="upstream <n> after <duration> (request <hex>)"]`
	require.Contains(t, tb.text(card+" h2"), "3 × card declined")
	require.Contains(t, tb.text(upstream+" h2"), "2 × upstream")
	require.Equal(t, "on payments, refunds; the last died now", tb.text(card+" p.muted"))
	// Each row: its topic, when it died (UTC on hover) and its body.
	row := card + ` tr[data-job="` + boom1 + `"] `
	require.Equal(t, "payments", tb.text(row+"td:nth-child(3)"))
	require.Equal(t, `{"payment":1}`, tb.text(row+"td.preview"))
	require.Regexp(t, `^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$`, eval[string](tb, `document.querySelector(`+"`"+row+"td.when time`"+`).title`))
	tb.screenshot("dead")
	tb.run(chromedp.Click(chromedp.CSS(`input.pick[data-job="`+boom1+`"]`)), chromedp.Click(chromedp.CSS(`input.pick[data-job="`+boom2+`"]`)))
	require.True(t, eval[bool](tb, `import("./js/dom.js").then((m) => m.refreshPaused())`), "no refresh while jobs are ticked")
	question, msg = tb.confirm("#requeue-selected")
	require.Equal(t, "Requeue 2 dead jobs of payments?", question)
	require.Equal(t, "ok: Requeued 2 of 2 jobs.", msg)
	require.Equal(t, "ready", api.job(boom1)["state"])
	require.Equal(t, "ready", api.job(boom2)["state"])
	require.Equal(t, "dead", api.job(boom3)["state"])
	require.Equal(t, 3, tb.count(".group"))
	require.Contains(t, tb.text(card+" h2"), "1 × card declined")
	question, msg = tb.confirm(upstream + " .requeue-group")
	require.Equal(t, "Requeue 2 dead jobs of invoices?", question)
	require.Equal(t, "ok: Requeued 2 of 2 jobs.", msg)
	require.Equal(t, "ready", api.job(up1)["state"])
	require.Equal(t, "ready", api.job(up2)["state"])
	require.Equal(t, "Delete 1 dead job of refunds?", tb.decline(card+" .delete-group"))
	require.Equal(t, "dead", api.job(boom3)["state"], "a declined delete changes nothing")
	_, msg = tb.confirm(card + " .delete-group")
	require.Equal(t, "ok: Deleted 1 of 1 job.", msg)
	require.Equal(t, "cancelled", api.job(boom3)["state"])

	step("Search: by id")
	// Search: by id, by key, by a substring of the body.
	tb.goTo("#/search")
	tb.screenshot("search")
	tb.setValue("#job-id", soon)
	tb.run(chromedp.Evaluate[chromedp.Void](`document.getElementById("app").removeAttribute("data-ready")`),
		tb.submit("search-id"), chromedp.WaitVisible(chromedp.CSS(`main[data-ready="1"] #job-fields`)))
	require.Contains(t, tb.text("#job-fields"), soon)
	tb.goTo("#/search")
	tb.setValue("#key-topic", "orders")
	tb.setValue("#key", "order-43")
	tb.run(tb.submit("search-key"))
	tb.waitFor(`document.querySelectorAll("#results tr[data-job]").length === 1`)
	require.Equal(t, soon, tb.text(`#results tr[data-job] a`))
	// By key and state across topics: every topic's jobs with the key, each
	// with its topic, then only the cancelled ones.
	other := api.push(map[string]any{"topic": "invoices", "body": 1, "key": "order-43", "delay": "1h"})
	api.must(http.MethodDelete, "/v1/jobs/"+other, nil, http.StatusNoContent)
	tb.setValue("#key-topic", "")
	tb.run(tb.submit("search-key"))
	tb.waitFor(`document.querySelectorAll("#results tr[data-job]").length === 2`)
	require.Equal(t, "2 found; every job with the key read.", tb.text("#key-done"))
	require.Equal(t, "invoices", tb.text(`#results tr[data-job="`+other+`"] td:nth-child(2)`))
	require.Equal(t, "orders", tb.text(`#results tr[data-job="`+soon+`"] td:nth-child(2)`))
	tb.setValue("#key-state", "cancelled")
	tb.run(tb.submit("search-key"))
	tb.waitFor(`document.querySelector("#results h2").textContent.startsWith("cancelled jobs")`)
	require.Equal(t, 1, tb.count("#results tr[data-job]"))
	require.Equal(t, 1, tb.count(`#results tr[data-job="`+other+`"]`))
	// Past 200 topics, the rest is not read, and the search says so.
	bounded := eval[map[string]any](tb, `import("./js/search.js").then(async (m) => {
		const r = await m.findByKey(Array(m.keyTopicsMax + 1).fill("orders"), "order-43", "");
		return {jobs: r.jobs.length, skipped: r.skipped, full: r.full.length};
	})`)
	require.Equal(t, map[string]any{"jobs": float64(200), "skipped": float64(1), "full": float64(0)}, bounded)
	tb.setValue("#body-topic", "orders")
	tb.setValue("#body-state", "scheduled")
	tb.setValue("#body-text", `"order":43`)
	tb.run(tb.submit("search-body"))
	tb.waitFor(`document.querySelector("#scan-done, #scan-stopped") !== null`)
	require.Equal(t, 1, tb.count("#results tr[data-job]"))
	require.Contains(t, tb.text("#scan-done"), "Scanned 1 jobs")

	step("Push: a job")
	// Push: a job from the form.
	tb.goTo("#/push")
	tb.setValue("#push-topic", "orders")
	tb.setValue("#push-body", `{"order": 99}`)
	tb.setValue("#push-delay", "10m")
	tb.setValue("#push-key", "order-99")
	tb.setValue("#push-priority", "2")
	tb.setValue("#push-expires-in", "2h")
	tb.screenshot("push")
	msg = tb.click("#push-submit")
	require.Contains(t, msg, "ok: Pushed ")
	pushed := tb.text("#pushed-id")
	j = api.job(pushed)
	require.Equal(t, "orders", j["topic"])
	require.Equal(t, map[string]any{"order": float64(99)}, j["body"])
	require.Equal(t, "order-99", j["key"])
	require.EqualValues(t, 2, j["priority"])
	require.Equal(t, "scheduled", j["state"])
	runAt, err = time.Parse(time.RFC3339, j["run_at"].(string))
	require.NoError(t, err)
	expiresAt, err := time.Parse(time.RFC3339, j["expires_at"].(string))
	require.NoError(t, err)
	require.Equal(t, 2*time.Hour, expiresAt.Sub(runAt), "expires_in from run_at")
	// Its page shows the expiry; a job not delivered by its expiry is dead
	// with the reason shown.
	tb.goTo("#/job/" + pushed)
	require.Contains(t, tb.text("#job-fields"), "expires at"+expiresAt.UTC().Format(time.DateTime)+" UTC")
	expiry := time.Now().Add(300 * time.Millisecond)
	late := api.push(map[string]any{"topic": "expiring", "body": 1, "expires_at": expiry.UTC().Format(time.RFC3339Nano)})
	time.Sleep(time.Until(expiry)) // the server's real clock must pass the expiry: nothing to wait on but time
	require.Empty(t, api.must(http.MethodPost, "/v1/topics/expiring/claim", map[string]any{"max": 1}, http.StatusOK)["jobs"], "an expired job is not handed out")
	require.Equal(t, "expired", api.job(late)["last_error"])
	tb.goTo("#/job/" + late)
	require.Equal(t, "dead expired not delivered by its expiry", tb.text("#job-state"))

	step("Schedules")
	// Schedules: listed with paused and last run, paused and resumed,
	// edited in the form and as JSON, deleted.
	tb.goTo("#/schedules")
	row = `#schedules tr[data-schedule="nightly"] `
	require.Equal(t, 1, tb.count(row))
	require.Equal(t, "no", tb.text(row+"td.paused"))
	require.Equal(t, "none yet", tb.text(row+"td.last-run"))
	require.Equal(t, "ok: Schedule nightly paused.", tb.click(row+"button.toggle-pause"))
	require.Equal(t, true, api.must(http.MethodGet, "/v1/schedules/nightly", nil, http.StatusOK)["paused"])
	require.Equal(t, "paused", tb.text(row+"td.paused"))
	tb.screenshot("schedules")
	require.Equal(t, "ok: Schedule nightly resumed.", tb.click(row+"button.toggle-pause"))
	require.Equal(t, false, api.must(http.MethodGet, "/v1/schedules/nightly", nil, http.StatusOK)["paused"])
	// A schedule's last runs: each slot fired with its job, linked, and
	// the job's state now.
	api.must(http.MethodPut, "/v1/schedules/ticker", map[string]any{"cron": "* * * * * *", "topic": "ticks", "job": map[string]any{"body": map[string]any{"tick": true}}}, http.StatusOK)
	require.Eventually(t, func() bool {
		return api.must(http.MethodGet, "/v1/schedules/ticker", nil, http.StatusOK)["last_slot"] != nil
	}, 10*time.Second, 50*time.Millisecond, "a slot of every second fires")
	tb.goTo("#/schedule/ticker")
	tick := tb.text(`#last-runs tbody tr:first-child td a`)
	require.Equal(t, "ready", tb.text(`#last-runs tr[data-job="`+tick+`"] td.state`))
	require.Equal(t, "ticks", api.job(tick)["topic"], "the slot's job")
	tb.screenshot("schedule")
	tb.run(chromedp.Evaluate[chromedp.Void](`document.getElementById("app").removeAttribute("data-ready")`),
		chromedp.Click(chromedp.CSS(`#last-runs tr[data-job="`+tick+`"] a`)))
	tb.waitFor(`location.hash === "#/job/` + tick + `" && document.getElementById("app").dataset.ready === "1"`)
	require.Contains(t, tb.text("#job-fields"), tick)
	api.must(http.MethodDelete, "/v1/schedules/ticker", nil, http.StatusNoContent)
	tb.goTo("#/schedule/nightly")
	require.Equal(t, "30 2 * * *", eval[string](tb, `document.getElementById("sch-cron").value`))
	require.Equal(t, "No slot has fired yet.", tb.text("#last-runs"))
	tb.setValue("#sch-cron", "0 3 * * *")
	tb.setValue("#sch-zone", "Europe/Paris")
	tb.setValue("#sch-job-priority", "2")
	tb.setValue("#sch-missed", "last")
	require.Equal(t, "ok: Schedule nightly saved.", tb.click("#save-schedule"))
	s := api.must(http.MethodGet, "/v1/schedules/nightly", nil, http.StatusOK)
	require.Equal(t, "0 3 * * *", s["cron"])
	require.Equal(t, "Europe/Paris", s["time_zone"])
	require.Equal(t, "last", s["missed"])
	require.Equal(t, map[string]any{"body": map[string]any{"report": "nightly"}, "priority": float64(2)}, s["job"], "the body kept")
	// As JSON: the form's definition carried over, edited and saved.
	tb.run(chromedp.Click(chromedp.CSS("#schedule-mode")))
	require.Contains(t, eval[string](tb, `document.getElementById("schedule-json").value`), `"time_zone": "Europe/Paris"`)
	tb.setValue("#schedule-json", `{"cron": "0 4 * * *", "time_zone": "UTC", "topic": "orders", "job": {"body": {"report": "daily"}}}`)
	require.Equal(t, "ok: Schedule nightly saved.", tb.click("#save-schedule"))
	s = api.must(http.MethodGet, "/v1/schedules/nightly", nil, http.StatusOK)
	require.Equal(t, "0 4 * * *", s["cron"])
	require.Equal(t, map[string]any{"body": map[string]any{"report": "daily"}}, s["job"])
	// Back to the form, which shows the JSON's definition.
	tb.run(chromedp.Click(chromedp.CSS("#schedule-mode")))
	require.Equal(t, "0 4 * * *", eval[string](tb, `document.getElementById("sch-cron").value`))
	require.True(t, eval[bool](tb, `document.getElementById("sch-cron").checkVisibility()`))
	// Run now, after a yes: one job of the template on its topic, and no
	// slot taken.
	before := api.must(http.MethodGet, "/v1/topics/orders", nil, http.StatusOK)["counts"].(map[string]any)
	question, msg = tb.confirm("#run-schedule")
	require.Contains(t, question, "Run schedule nightly now?")
	require.Equal(t, "ok: Schedule nightly ran: one job pushed to orders.", msg)
	after := api.must(http.MethodGet, "/v1/topics/orders", nil, http.StatusOK)["counts"].(map[string]any)
	queued := func(c map[string]any) float64 { return c["scheduled"].(float64) + c["ready"].(float64) }
	require.Equal(t, queued(before)+1, queued(after), "one job more: %v then %v", before, after)
	s = api.must(http.MethodGet, "/v1/schedules/nightly", nil, http.StatusOK)
	require.Nil(t, s["last_slot"], "a run is not a slot")
	// Deleted after a yes, the list is shown again without it.
	require.Contains(t, tb.decline("#delete-schedule"), "Delete schedule nightly?")
	api.must(http.MethodGet, "/v1/schedules/nightly", nil, http.StatusOK)
	tb.ask("#delete-schedule")
	tb.run(chromedp.Click(chromedp.CSS("#confirm-yes"), chromedp.NodeVisible))
	tb.waitFor(`location.hash === "#/schedules" && document.getElementById("app").dataset.ready === "1"`)
	require.Zero(t, tb.count(`#schedules tr[data-schedule]`))

	step("Topic: activity charts")
	// A topic's charts over time: the three burials and the retry of
	// payments at the start, in the samples taken every 5 s since, show as
	// a point above the zero line (y 192 of the 220 high charts) of the
	// deaths and of the retries.
	tb.goTo("#/topic/payments")
	for _, series := range []string{"#rate-chart circle.intake", "#rate-chart circle.deliveries", "#failure-chart circle.retries", "#failure-chart circle.deaths"} {
		tb.waitFor(`[...document.querySelectorAll("` + series + `")].some((c) => +c.getAttribute("cy") < 192)`)
	}
	require.Contains(t, tb.text("#failure-chart + .legend"), "retries/s")
	tb.screenshot("topic-activity")

	// The overview again, with the samples of the claims above in its
	// chart, for its screenshot.
	tb.goTo("#/")
	tb.screenshot("overview")
	// Its subtitle says what the lateness is, or why there is none.
	notes := eval[[]string](tb, `import("./js/overview.js").then((m) => [
		m.latenessNote({interval: "5s", samples: []}),
		m.latenessNote({interval: "5s", samples: [{claims: 0}]}),
		m.latenessNote({interval: "5s", samples: [{lateness_p50: 0.0012, lateness_p99: 0.25, claims: 3}]})])`)
	require.Equal(t, []string{"(no sample yet: one comes every 5s)", "(no claim in the last 5s; a sample every 5s)",
		"(last 1.20 ms p50, 250 ms p99; a sample every 5s)"}, notes)

	step("Dark mode")
	// Dark mode follows the system's setting.
	background := func() string { return eval[string](tb, `getComputedStyle(document.body).backgroundColor`) }
	require.Equal(t, "rgb(246, 247, 249)", background())
	tb.run(colorScheme("dark"))
	require.Equal(t, "rgb(18, 22, 28)", background())
	tb.goTo("#/dead")
	tb.screenshot("dead-dark")
	tb.run(colorScheme(""))
	require.Equal(t, "rgb(246, 247, 249)", background())
	api.must(http.MethodGet, "/v1/schedules/nightly", nil, http.StatusNotFound)
}

// testUITokens checks the login, a consume-only token's read-only UI and a
// topic-restricted token's view.
func testUITokens(t *testing.T, b *browser) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.yaml")
	require.NoError(t, os.WriteFile(tokens, []byte(`
- {name: ops, token: `+uiAdminSecret+`, scopes: [admin]}
- {name: reader, token: `+uiReaderSecret+`, scopes: [consume]}
- {name: orders-app, token: `+uiOrdersSecret+`, scopes: [push, consume], topics: ["orders.>"]}
`), 0o600))
	srv := startServer(t, append(defaultArgs(filepath.Join(dir, "data")), "--tokens-file", tokens)...)
	admin := uiAPI{t: t, base: srv.HTTPURL, secret: uiAdminSecret}
	order := admin.push(map[string]any{"topic": "orders.eu", "body": map[string]any{"order": 1}, "delay": "1h"})
	mail := admin.push(map[string]any{"topic": "mail", "body": map[string]any{"to": "ada"}, "delay": "1h"})
	dead := admin.bury("mail", nil, "smtp refused")

	// The address without its slash leads to the pages, no token asked.
	status, page := uiAPI{t: t, base: srv.HTTPURL}.call(http.MethodGet, "/ui", nil)
	require.Equal(t, http.StatusOK, status, "%s", page)
	require.Contains(t, string(page), "<html")

	// Without a token the UI asks for one; a wrong one is refused.
	tb := b.open(t, srv.HTTPURL, "401 (Unauthorized)", "403 (Forbidden)")
	tb.load("#/")
	require.Equal(t, 1, tb.count("#login"))
	tb.screenshot("login")
	tb.setValue("#token", "not-a-valid-token-0123456789")
	tb.run(tb.submit("login"))
	require.Equal(t, "error: This token is not valid.", tb.flash())

	// A consume-only token: everything readable, no action offered, and
	// the actions forced through the API refused.
	tb.login(uiReaderSecret)
	require.Equal(t, 1, tb.count("#read-only"))
	require.Equal(t, 2, tb.count("#topics tr[data-topic]"))
	require.True(t, eval[bool](tb, `document.querySelector('#nav a[data-nav="push"]').hidden && document.querySelector('#nav a[data-nav="schedules"]').hidden`))
	tb.goTo("#/topic/mail")
	require.Zero(t, tb.count("#save-topic, #pause, #resume, #bulk, input.pick"))
	require.True(t, eval[bool](tb, `["ttr", "delivery-method", "delivery-success", "delivery-allow-job-url", "rate-burst", "unique-keys", "on-dead"].every((id) => document.getElementById(id).disabled)`))
	tb.goTo("#/job/" + mail)
	require.Zero(t, tb.count("#job-actions, #edit-job"))
	tb.goTo("#/job/" + dead)
	require.Zero(t, tb.count("#job-actions, #requeue"))
	tb.goTo("#/dead")
	require.Equal(t, 1, tb.count(".group"), tb.html())
	require.Zero(t, tb.count("#requeue-selected, #delete-selected, .requeue-group, .delete-group, input.pick"))
	for _, call := range []string{
		`DELETE /v1/jobs/` + mail, `POST /v1/jobs/` + dead + `/requeue`, `POST /v1/topics/mail/pause`,
		`PUT /v1/topics/mail {"ttr": "1m"}`, `POST /v1/jobs {"topic": "mail"}`, `DELETE /v1/schedules/x`,
	} {
		method, rest, _ := strings.Cut(call, " ")
		path, body, _ := strings.Cut(rest, " ")
		expr := fmt.Sprintf(`import("./js/api.js").then(api => api.call(%q, %q, %s)).then(() => 0, e => e.status)`, method, path, orDefault(body, "undefined"))
		require.Equal(t, http.StatusForbidden, eval[int](tb, expr), "%s from the browser with the consume token", call)
	}
	require.Equal(t, "scheduled", admin.job(mail)["state"])
	require.Equal(t, "dead", admin.job(dead)["state"])
	// The push page, forced, is refused by the API.
	tb.goTo("#/push")
	tb.setValue("#push-topic", "mail")
	require.Contains(t, tb.click("#push-submit"), "error: token \"reader\" lacks the push scope")

	// A token restricted to orders.>: only its topics.
	tb.login(uiOrdersSecret)
	require.Equal(t, 1, tb.count("#topics tr[data-topic]"))
	require.Equal(t, 1, tb.count(`#topics tr[data-topic="orders.eu"]`))
	require.Contains(t, tb.text("#topic-patterns"), "orders.>")
	tb.goTo("#/job/" + order)
	require.Equal(t, 1, tb.count("#cancel"))
	tb.goTo("#/dead")
	require.Zero(t, tb.count(".group"), "the dead job of mail is not shown")
}

// orDefault returns s, or def when s is empty.
func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// testUIFlag checks --ui: off serves no pages; auto serves them on a
// loopback listener without tokens (testUIOpen) and with tokens
// (testUITokens); TestUIServed has the rule for other listeners.
func testUIFlag(t *testing.T) {
	srv := startServer(t, append(defaultArgs(t.TempDir()), "--ui", "off")...)
	status, body := uiAPI{t: t, base: srv.HTTPURL}.call(http.MethodGet, "/ui/", nil)
	require.Equal(t, http.StatusNotFound, status, "%s", body)
	require.NotContains(t, srv.log(), `msg="web ui"`)
}

// TestUIServed checks the rule of --ui auto.
func TestUIServed(t *testing.T) {
	t.Parallel()
	loopback := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	public := &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 8080}
	unspecified := &net.TCPAddr{IP: net.IPv4zero, Port: 8080}
	for _, tc := range []struct {
		mode   string
		tokens bool
		addr   net.Addr
		want   bool
	}{
		{uiAuto, false, loopback, true},
		{uiAuto, false, public, false},
		{uiAuto, false, unspecified, false},
		{uiAuto, true, public, true},
		{uiAuto, true, unspecified, true},
		{uiOn, false, public, true},
		{uiOff, true, loopback, false},
		{uiOff, false, loopback, false},
	} {
		require.Equal(t, tc.want, uiServed(tc.mode, tc.tokens, tc.addr), "--ui %s, tokens %v, %s", tc.mode, tc.tokens, tc.addr)
	}
}
