// Command ws measures how many idle WebSocket subscribers one delayq
// instance holds and what they cost it: it opens -conns subscriptions
// (spread over -topics topics) to a running `delayq serve`, holds them idle
// for -hold (longer than the server's 20s ping interval, so keepalives are
// exercised), reads the server's resident memory from /proc/<pid>/status
// before and after, then pushes one job per topic and times its delivery
// to one of that topic's subscribers. It prints a Markdown summary.
//
//	delayq serve --backend memory &
//	go run ./loadtest/ws -pid $! -conns 10000
//
// The server and this program each need a file descriptor per connection
// (ulimit -n), and loopback needs as many ephemeral ports.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

func main() {
	var (
		server   = flag.String("server", "http://127.0.0.1:8080", "delayq base URL")
		pid      = flag.Int("pid", 0, "process id of the delayq server, to read its memory (0: not read)")
		conns    = flag.Int("conns", 10000, "idle subscribers to open")
		topics   = flag.Int("topics", 100, "topics the subscribers spread over")
		prefetch = flag.Int("prefetch", 16, "prefetch of each subscriber")
		dialers  = flag.Int("dialers", 64, "connections opened at once")
		hold     = flag.Duration("hold", 45*time.Second, "how long the subscribers stay idle")
		timeout  = flag.Duration("timeout", 5*time.Minute, "bound on the whole run")
	)
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := run(ctx, *server, *pid, *conns, *topics, *prefetch, *dialers, *hold); err != nil {
		fmt.Fprintln(os.Stderr, "ws:", err)
		os.Exit(1)
	}
}

// subscriber is one idle connection; its reader answers pings and reports
// deliveries.
type subscriber struct {
	conn  *websocket.Conn
	topic string
}

// delivery is a job frame as the reader saw it.
type delivery struct {
	at    time.Time
	id    string
	lease string
	conn  *websocket.Conn
}

func run(ctx context.Context, server string, pid, n, topics, prefetch, dialers int, hold time.Duration) error {
	base := strings.TrimRight(server, "/")
	wsBase := "ws" + strings.TrimPrefix(base, "http")
	httpc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}
	topicOf := func(i int) string { return fmt.Sprintf("wsidle.t%d", i%topics) }

	rssBefore, err := rssKiB(pid)
	if err != nil {
		return err
	}

	var (
		subs      = make([]*subscriber, n)
		delivered = make(chan delivery, topics*2)
		dropped   atomic.Int64
		readers   sync.WaitGroup
		next      atomic.Int64
		dialWG    sync.WaitGroup
		dialErr   atomic.Value
	)
	readCtx, stopReading := context.WithCancel(context.Background())
	defer stopReading()
	start := time.Now()
	for range dialers {
		dialWG.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				url := fmt.Sprintf("%s/v1/topics/%s/subscribe?prefetch=%d", wsBase, topicOf(i), prefetch)
				dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				conn, _, err := websocket.Dial(dctx, url, &websocket.DialOptions{HTTPClient: httpc})
				cancel()
				if err != nil {
					dialErr.CompareAndSwap(nil, fmt.Errorf("connection %d: %w", i, err))
					return
				}
				conn.SetReadLimit(-1)
				subs[i] = &subscriber{conn: conn, topic: topicOf(i)}
				readers.Go(func() {
					for {
						_, data, err := conn.Read(readCtx)
						if err != nil {
							if readCtx.Err() == nil {
								dropped.Add(1)
							}
							return
						}
						var f struct{ Type, ID, Lease string }
						if json.Unmarshal(data, &f) == nil && f.Type == "job" {
							delivered <- delivery{at: time.Now(), id: f.ID, lease: f.Lease, conn: conn}
						}
					}
				})
			}
		})
	}
	dialWG.Wait()
	defer func() {
		stopReading()
		for _, s := range subs {
			if s != nil {
				_ = s.conn.CloseNow()
			}
		}
		readers.Wait()
	}()
	if err, _ := dialErr.Load().(error); err != nil {
		return err
	}
	opened := time.Since(start)
	rssOpen, err := rssKiB(pid)
	if err != nil {
		return err
	}

	fmt.Fprintf(os.Stderr, "ws: %d subscribers open in %s; holding them idle for %s\n", n, opened.Round(time.Millisecond), hold)
	cpuBefore, err := cpuTime(pid)
	if err != nil {
		return err
	}
	select {
	case <-time.After(hold):
	case <-ctx.Done():
		return ctx.Err()
	}
	rssHeld, err := rssKiB(pid)
	if err != nil {
		return err
	}
	cpuHeld, err := cpuTime(pid)
	if err != nil {
		return err
	}
	if d := dropped.Load(); d > 0 {
		return fmt.Errorf("%d of %d idle subscribers were disconnected while idle", d, n)
	}

	// One job per topic: each goes to one of the topic's idle subscribers.
	pushed := map[string]time.Time{}
	for t := range topics {
		at := time.Now()
		id, err := push(ctx, httpc, base, topicOf(t))
		if err != nil {
			return err
		}
		pushed[id] = at
	}
	var lat []time.Duration
	for len(lat) < topics {
		select {
		case d := <-delivered:
			at, ok := pushed[d.id]
			if !ok {
				continue // a job of an earlier run
			}
			lat = append(lat, d.at.Sub(at))
			ack, _ := json.Marshal(map[string]string{"type": "ack", "id": d.id, "lease": d.lease})
			if err := d.conn.Write(ctx, websocket.MessageText, ack); err != nil {
				return fmt.Errorf("ack: %w", err)
			}
		case <-ctx.Done():
			return fmt.Errorf("%d of %d jobs delivered: %w", len(lat), topics, ctx.Err())
		}
	}
	slices.Sort(lat)

	fmt.Printf("| idle WebSocket subscribers | %d over %d topics, prefetch %d |\n| --- | --- |\n", n, topics, prefetch)
	fmt.Printf("| time to open them (%d at once) | %s (%.0f/s) |\n", dialers, opened.Round(time.Millisecond), float64(n)/opened.Seconds())
	fmt.Printf("| dropped while idle for %s | %d |\n", hold, dropped.Load())
	if pid != 0 {
		fmt.Printf("| server RSS before | %.1f MiB |\n", float64(rssBefore)/1024)
		fmt.Printf("| server RSS with them open | %.1f MiB (%.1f KiB per subscriber) |\n", float64(rssOpen)/1024, float64(rssOpen-rssBefore)/float64(n))
		fmt.Printf("| server RSS after %s idle | %.1f MiB (%.1f KiB per subscriber) |\n", hold, float64(rssHeld)/1024, float64(rssHeld-rssBefore)/float64(n))
		fmt.Printf("| server CPU while idle | %.1f%% of one core |\n", 100*(cpuHeld-cpuBefore).Seconds()/hold.Seconds())
	}
	fmt.Printf("| push to delivery, 1 job per topic | p50 %s, max %s |\n", lat[len(lat)/2].Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond))
	return nil
}

// push creates a due job on topic over HTTP and returns its id.
func push(ctx context.Context, c *http.Client, base, topic string) (string, error) {
	body, _ := json.Marshal(map[string]any{"topic": topic, "body": map[string]int{"n": 1}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/jobs", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	var out struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil || res.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("push: status %d: %v", res.StatusCode, err)
	}
	return out.ID, nil
}

// cpuTime reads the user and system CPU time process pid has used; 0 when
// pid is 0.
func cpuTime(pid int) (time.Duration, error) {
	if pid == 0 {
		return 0, nil
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the server's CPU time: %w", err)
	}
	// Fields after the command name, which is in parentheses: utime and
	// stime are the 12th and 13th, in clock ticks (100 per second on Linux).
	rest := string(data)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0, errors.New("short /proc/<pid>/stat")
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// rssKiB reads the resident set size of process pid; 0 when pid is 0.
func rssKiB(pid int) (int64, error) {
	if pid == 0 {
		return 0, nil
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the server's memory: %w", err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, errors.New("no VmRSS in /proc/<pid>/status")
}
