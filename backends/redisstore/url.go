package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ParseURL returns a client for a Redis URL, for `--redis-url`. The caller
// closes it (after closing the stores over it). Forms:
//
//	redis://[user:password@]host[:port][/db][?option=value...]
//	rediss://...                                   the same over TLS
//	redis+cluster://[user:password@]h1:p1,h2:p2[?option=value...]
//	rediss+cluster://...                           Redis Cluster over TLS
//	redis+sentinel://[user:password@]s1:p1,s2:p2/master[/db][?option=value...]
//	rediss+sentinel://...                          Sentinel, TLS to the servers
//
// The cluster form lists seed nodes (one is enough; the client learns the
// rest). go-redis's own cluster form, redis://h1:p1?addr=h2:p2&addr=h3:p3,
// is accepted too: an addr option makes a redis:// URL a cluster URL. In the
// sentinel form the hosts are Sentinels and the path names the master; the
// user and password go to both Sentinels and the master. Options are
// go-redis's URL options in snake case (dial_timeout=3s, pool_size=50,
// protocol=2, ...); unknown ones are errors. The port defaults to 6379.
func ParseURL(rawURL string) (redis.UniversalClient, error) {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return nil, fmt.Errorf("redisstore: redis URL %q has no scheme", redactURL(rawURL))
	}
	base, mode, _ := strings.Cut(strings.ToLower(scheme), "+")
	if base != "redis" && base != "rediss" {
		return nil, fmt.Errorf("redisstore: redis URL scheme %q: want redis, rediss, redis+cluster or redis+sentinel", scheme)
	}
	switch mode {
	case "":
		u, err := url.Parse(rawURL)
		if err != nil {
			return nil, fmt.Errorf("redisstore: redis URL: %w", redactErr(err, rawURL))
		}
		if u.Query().Has("addr") {
			opt, err := redis.ParseClusterURL(rawURL)
			if err != nil {
				return nil, fmt.Errorf("redisstore: redis cluster URL: %w", redactErr(err, rawURL))
			}
			opt.MaxRetries = maxRetries(rawURL, opt.MaxRetries)
			return redis.NewClusterClient(opt), nil
		}
		opt, err := redis.ParseURL(rawURL)
		if err != nil {
			return nil, fmt.Errorf("redisstore: redis URL: %w", redactErr(err, rawURL))
		}
		opt.MaxRetries = maxRetries(rawURL, opt.MaxRetries)
		return redis.NewClient(opt), nil
	case "cluster":
		plain, err := withAddrs(base, rest, false)
		if err != nil {
			return nil, err
		}
		opt, err := redis.ParseClusterURL(plain)
		if err != nil {
			return nil, fmt.Errorf("redisstore: redis cluster URL: %w", redactErr(err, plain))
		}
		opt.MaxRetries = maxRetries(plain, opt.MaxRetries)
		return redis.NewClusterClient(opt), nil
	case "sentinel":
		plain, err := withAddrs(base, rest, true)
		if err != nil {
			return nil, err
		}
		opt, err := redis.ParseFailoverURL(plain)
		if err != nil {
			return nil, fmt.Errorf("redisstore: redis sentinel URL: %w", redactErr(err, plain))
		}
		if opt.Username == "" && opt.Password == "" {
			opt.Username, opt.Password = opt.SentinelUsername, opt.SentinelPassword
		}
		opt.MaxRetries = maxRetries(plain, opt.MaxRetries)
		return redis.NewFailoverClient(opt), nil
	}
	return nil, fmt.Errorf("redisstore: redis URL scheme %q: want redis, rediss, redis+cluster or redis+sentinel", scheme)
}

// maxRetries is the client's MaxRetries: parsed, when the URL sets
// max_retries, else -1, none. go-redis retries a call whose connection
// failed after it was written, and the store's scripts are not
// idempotent: a claim whose answer was lost ran again and reserved other
// jobs, the first run's jobs spending an attempt unseen until their leases
// ran out (an hour-long history run with partitions found it), and an ack
// or a put run again answers 409 for what it did. Without a retry such a
// call fails (503), which the API documents as a result unknown. A
// Cluster client still tries such a call once more within its redirect
// loop (MaxRedirects), which MOVED and ASK need.
func maxRetries(rawURL string, parsed int) int {
	if u, err := url.Parse(rawURL); err == nil && u.Query().Has("max_retries") {
		return parsed
	}
	return -1
}

// withAddrs rewrites "[userinfo@]h1,h2,...[/path][?query]" into go-redis's
// form "<base>://[userinfo@]h1[/path]?addr=h2&...&query". For sentinel, the
// first path element names the master (master_name) and the rest is the db.
func withAddrs(base, rest string, sentinel bool) (string, error) {
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	userinfo := ""
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		userinfo, authority = authority[:i+1], authority[i+1:]
	}
	var hosts []string
	for h := range strings.SplitSeq(authority, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hosts = append(hosts, h)
		}
	}
	if len(hosts) == 0 {
		return "", errors.New("redisstore: redis URL names no host")
	}
	path, query, _ := strings.Cut(tail, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return "", fmt.Errorf("redisstore: redis URL query: %w", err)
	}
	for _, h := range hosts[1:] {
		q.Add("addr", h)
	}
	if sentinel {
		parts := strings.FieldsFunc(path, func(r rune) bool { return r == '/' })
		if len(parts) == 0 {
			return "", errors.New("redisstore: redis+sentinel URL names no master: want redis+sentinel://host:port/master")
		}
		q.Set("master_name", parts[0])
		path = ""
		if len(parts) > 1 {
			path = "/" + strings.Join(parts[1:], "/")
		}
	}
	out := base + "://" + userinfo + hosts[0] + path
	if len(q) > 0 {
		out += "?" + q.Encode()
	}
	return out, nil
}

// redactURL hides the password of a URL for error messages.
func redactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	if i := strings.LastIndexByte(raw, '@'); i >= 0 {
		if j := strings.Index(raw, "://"); j >= 0 && j < i {
			return raw[:j+3] + "xxxxx" + raw[i:]
		}
	}
	return raw
}

// redactErr replaces a URL's password in err's text.
func redactErr(err error, raw string) error {
	u, perr := url.Parse(raw)
	if perr != nil || u.User == nil {
		return err
	}
	pw, ok := u.User.Password()
	if !ok || pw == "" || !strings.Contains(err.Error(), pw) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), pw, "xxxxx"))
}

// AppendOnly reports whether the Redis behind client keeps an append-only
// file (CONFIG GET appendonly). Without one, a restart of Redis loses every
// write since its last snapshot, answered jobs among them, so serve warns
// of it. With a Cluster client it asks one node. Errors: the server's, such
// as a managed Redis that refuses CONFIG, or a reply without the setting.
func AppendOnly(ctx context.Context, client redis.UniversalClient) (bool, error) {
	v, err := client.ConfigGet(ctx, "appendonly").Result()
	if err != nil {
		return false, fmt.Errorf("redisstore: config get appendonly: %w", err)
	}
	on, ok := v["appendonly"]
	if !ok {
		return false, errors.New("redisstore: config get appendonly: no such setting in the reply")
	}
	return on == "yes", nil
}
