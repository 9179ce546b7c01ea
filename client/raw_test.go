package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// recorded is one request a test server got.
type recorded struct {
	method, path, query, body string
}

// rawServer answers every request with status and answer, recording the
// requests.
func rawServer(t *testing.T, status int, answer string) (*Client, func() []recorded) {
	t.Helper()
	var mu sync.Mutex
	var got []recorded
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, recorded{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, string(b)})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	c, err := New(Config{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, func() []recorded {
		mu.Lock()
		defer mu.Unlock()
		return append([]recorded(nil), got...)
	}
}

// TestWithRawAnswer checks that the answer is stored byte for byte, with
// the fields the decoded type lacks, and that a failed call leaves it.
func TestWithRawAnswer(t *testing.T) {
	t.Parallel()
	const answer = `{ "id": "j1", "topic": "a", "state": "ready", "future_field": [1, 2] }` + "\n"
	c, _ := rawServer(t, http.StatusOK, answer)
	var raw []byte
	j, err := c.Get(WithRawAnswer(context.Background(), &raw), "j1")
	if err != nil {
		t.Fatal(err)
	}
	if j.ID != "j1" || j.State != StateReady {
		t.Errorf("decoded %+v", j)
	}
	if string(raw) != answer {
		t.Errorf("raw answer %q, want %q", raw, answer)
	}
	if _, err := c.Get(context.Background(), "j1"); err != nil {
		t.Fatal(err)
	}

	failing, _ := rawServer(t, http.StatusNotFound, `{"error": {"code": "not_found", "message": "no job j2"}}`)
	kept := []byte("kept")
	if _, err := failing.Get(WithRawAnswer(context.Background(), &kept), "j2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("err %v, want ErrNotFound", err)
	}
	if string(kept) != "kept" {
		t.Errorf("a failed call stored %q", kept)
	}
	garbled, _ := rawServer(t, http.StatusOK, `not JSON`)
	if _, err := garbled.Get(WithRawAnswer(context.Background(), &kept), "j3"); err == nil {
		t.Fatal("an answer that is not JSON was decoded")
	}
	if string(kept) != "kept" {
		t.Errorf("a call whose answer could not be decoded stored %q", kept)
	}
}

// TestPutRawJSON checks that PutTopicJSON and PutScheduleJSON send the
// JSON given byte for byte, to the right route and with next, and refuse
// what is not one JSON object without sending it.
func TestPutRawJSON(t *testing.T) {
	t.Parallel()
	c, got := rawServer(t, http.StatusOK, `{"name": "x"}`)
	ctx := context.Background()
	const cfg = `{"max_attempts": 5,  "rate": {"limit": 100}}`
	topic, err := c.PutTopicJSON(ctx, "orders/close", json.RawMessage("\n"+cfg+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if topic.Name != "x" {
		t.Errorf("decoded %+v", topic)
	}
	const def = `{"cron": "@every 15m", "topic": "cleanup"}`
	if _, err := c.PutScheduleJSON(ctx, "s1", json.RawMessage(def), 5); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutScheduleJSON(ctx, "s2", json.RawMessage(def), -1); err != nil {
		t.Fatal(err)
	}
	want := []recorded{
		{http.MethodPut, "/v1/topics/orders%2Fclose", "", cfg},
		{http.MethodPut, "/v1/schedules/s1", "next=5", def},
		{http.MethodPut, "/v1/schedules/s2", "", def},
	}
	if g := got(); len(g) != len(want) {
		t.Fatalf("requests %+v, want %+v", g, want)
	} else {
		for i := range want {
			if g[i] != want[i] {
				t.Errorf("request %d: %+v, want %+v", i, g[i], want[i])
			}
		}
	}

	for _, bad := range []string{``, `{`, `[1]`, `"text"`, `{} {}`} {
		if _, err := c.PutTopicJSON(ctx, "t", json.RawMessage(bad)); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("PutTopicJSON(%q): %v, want ErrInvalidArgument", bad, err)
		}
		if _, err := c.PutScheduleJSON(ctx, "s", json.RawMessage(bad), -1); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("PutScheduleJSON(%q): %v, want ErrInvalidArgument", bad, err)
		}
	}
	if n := len(got()); n != len(want) {
		t.Errorf("%d requests sent for refused bodies", n-len(want))
	}
}
