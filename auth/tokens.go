package auth

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"golang.org/x/time/rate"
)

// Scope is a permission a token grants.
type Scope string

// Scopes of API tokens.
const (
	// ScopePush creates, replaces, gets and cancels jobs.
	ScopePush Scope = "push"
	// ScopeConsume claims, acks, nacks, touches and subscribes, and gets jobs.
	ScopeConsume Scope = "consume"
	// ScopeAdmin configures topics, lists and requeues dead jobs and does
	// everything else, including what push and consume grant.
	ScopeAdmin Scope = "admin"
)

// minTokenLen is the shortest plain token accepted, so that a token is not
// guessable.
const minTokenLen = 16

// Token is one configured API token, as a tokens file lists it.
type Token struct {
	// Name identifies the token in logs and error messages. Required and
	// unique.
	Name string `json:"name" yaml:"name"`
	// Token is the secret a client sends as `Authorization: Bearer <token>`,
	// at least 16 bytes. Exactly one of Token and SHA256 is set.
	Token string `json:"token" yaml:"token"`
	// SHA256 is the hex SHA-256 digest of the secret, for files that should
	// not hold the secret itself.
	SHA256 string `json:"sha256" yaml:"sha256"`
	// Scopes are what the token grants: push, consume, admin. Required.
	Scopes []Scope `json:"scopes" yaml:"scopes"`
	// Topics are the topic patterns the token may use; empty means all.
	Topics []string `json:"topics" yaml:"topics"`
	// IntakeRate bounds the jobs the token may create or replace, in jobs
	// per second, averaged: a batch counts each of its jobs. It is a quota
	// of this Tokens set, so of one delayq instance; zero means none.
	IntakeRate float64 `json:"intake_rate" yaml:"intake_rate"`
	// IntakeBurst is how many jobs the token may create at once beyond
	// IntakeRate, and so the largest batch it may send. Only with
	// IntakeRate.
	//
	// Defaults to IntakeRate rounded up (one second's worth), at least 1.
	IntakeBurst int `json:"intake_burst" yaml:"intake_burst"`
}

// Identity is an authenticated token: its name, scopes and topic patterns,
// never its secret.
type Identity struct {
	// Name is the token's name, for logs.
	Name   string
	scopes []Scope
	topics []string
	// intake is the token's intake quota, nil without one; every request
	// of the token shares it.
	intake *rate.Limiter
	// set is the Tokens that made the identity, for its clock.
	set *Tokens
}

// Tokens is a set of API tokens. The zero value and nil hold none. It is
// safe for concurrent use.
type Tokens struct {
	// NowFunc is where intake quotas take the time from; tests set a fake
	// clock's Now to drive them without waiting. Set it, if at all, before
	// the set is used. (A func, not a core.Clock: auth imports nothing of
	// this module.)
	//
	// Defaults to time.Now.
	NowFunc func() time.Time
	entries []entry
}

type entry struct {
	digest [sha256.Size]byte
	id     *Identity
}

// ParseTokens decodes a list of tokens from YAML or JSON (a JSON document is
// YAML). Unknown fields are errors.
func ParseTokens(data []byte) ([]Token, error) {
	var list []Token
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&list); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, fmt.Errorf("auth: tokens: %w", err)
	}
	return list, nil
}

// LoadFile reads and parses a tokens file (see ParseTokens).
func LoadFile(path string) ([]Token, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	list, err := ParseTokens(data)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return list, nil
}

// NewTokens checks list and returns the set. It names the token at fault
// (by name or position, never by secret) when a name is missing or
// repeated, a secret is missing, short, given twice or repeated, a scope is
// unknown or a topic pattern is malformed.
func NewTokens(list []Token) (*Tokens, error) {
	t := &Tokens{entries: make([]entry, 0, len(list))}
	names := make(map[string]bool, len(list))
	digests := make(map[[sha256.Size]byte]bool, len(list))
	for i, tok := range list {
		where := fmt.Sprintf("token %d", i+1)
		if tok.Name == "" {
			return nil, fmt.Errorf("auth: %s: name is required", where)
		}
		where = fmt.Sprintf("token %q", tok.Name)
		if names[tok.Name] {
			return nil, fmt.Errorf("auth: %s: name is used twice", where)
		}
		names[tok.Name] = true
		var digest [sha256.Size]byte
		switch {
		case tok.Token != "" && tok.SHA256 != "":
			return nil, fmt.Errorf("auth: %s: give token or sha256, not both", where)
		case tok.Token != "":
			if len(tok.Token) < minTokenLen {
				return nil, fmt.Errorf("auth: %s: token must be at least %d characters", where, minTokenLen)
			}
			digest = sha256.Sum256([]byte(tok.Token))
		case tok.SHA256 != "":
			b, err := hex.DecodeString(strings.TrimSpace(tok.SHA256))
			if err != nil || len(b) != sha256.Size {
				return nil, fmt.Errorf("auth: %s: sha256 must be 64 hex digits", where)
			}
			copy(digest[:], b)
		default:
			return nil, fmt.Errorf("auth: %s: token or sha256 is required", where)
		}
		if digests[digest] {
			return nil, fmt.Errorf("auth: %s: the same secret is given to another token", where)
		}
		digests[digest] = true
		if len(tok.Scopes) == 0 {
			return nil, fmt.Errorf("auth: %s: scopes are required (push, consume, admin)", where)
		}
		for _, s := range tok.Scopes {
			switch s {
			case ScopePush, ScopeConsume, ScopeAdmin:
			default:
				return nil, fmt.Errorf("auth: %s: unknown scope %q; want push, consume or admin", where, s)
			}
		}
		for _, p := range tok.Topics {
			if err := ValidatePattern(p); err != nil {
				return nil, fmt.Errorf("auth: %s: %w", where, err)
			}
		}
		intake, err := newIntakeLimiter(tok.IntakeRate, tok.IntakeBurst)
		if err != nil {
			return nil, fmt.Errorf("auth: %s: %w", where, err)
		}
		t.entries = append(t.entries, entry{digest: digest, id: &Identity{
			Name:   tok.Name,
			scopes: slices.Clone(tok.Scopes),
			topics: slices.Clone(tok.Topics),
			intake: intake,
			set:    t,
		}})
	}
	return t, nil
}

// now returns NowFunc's time, time.Now's without one.
func (t *Tokens) now() time.Time {
	if t != nil && t.NowFunc != nil {
		return t.NowFunc()
	}
	return time.Now()
}

// newIntakeLimiter returns the limiter of an intake quota, nil for none.
func newIntakeLimiter(perSecond float64, burst int) (*rate.Limiter, error) {
	switch {
	case math.IsNaN(perSecond) || math.IsInf(perSecond, 0) || perSecond < 0:
		return nil, errors.New("intake_rate must be a positive number of jobs per second")
	case burst < 0:
		return nil, errors.New("intake_burst must be a positive number of jobs")
	case perSecond == 0 && burst > 0:
		return nil, errors.New("intake_burst needs intake_rate")
	case perSecond == 0:
		return nil, nil
	}
	if burst == 0 {
		burst = int(min(math.Ceil(perSecond), math.MaxInt32))
	}
	return rate.NewLimiter(rate.Limit(perSecond), burst), nil
}

// Len returns how many tokens the set holds; with none, transports serve
// without authentication.
func (t *Tokens) Len() int {
	if t == nil {
		return 0
	}
	return len(t.entries)
}

// Authenticate returns the identity of the token whose secret is secret, or
// false. It compares SHA-256 digests with every configured token in
// constant time, so its duration tells nothing of which token came close.
func (t *Tokens) Authenticate(secret string) (*Identity, bool) {
	if t == nil || secret == "" {
		return nil, false
	}
	digest := sha256.Sum256([]byte(secret))
	var found *Identity
	for i := range t.entries {
		if subtle.ConstantTimeCompare(digest[:], t.entries[i].digest[:]) == 1 {
			found = t.entries[i].id
		}
	}
	return found, found != nil
}

// HasScope reports whether the identity grants s; admin grants every scope.
func (id *Identity) HasScope(s Scope) bool {
	return slices.Contains(id.scopes, s) || slices.Contains(id.scopes, ScopeAdmin)
}

// HasAnyScope reports whether the identity grants one of scopes.
func (id *Identity) HasAnyScope(scopes ...Scope) bool {
	return slices.ContainsFunc(scopes, id.HasScope)
}

// IntakeBurst returns the most jobs the identity may create at once under
// its intake quota (see Token.IntakeBurst), and false when it has no quota.
func (id *Identity) IntakeBurst() (int, bool) {
	if id.intake == nil {
		return 0, false
	}
	return id.intake.Burst(), true
}

// AllowIntake takes n jobs from the identity's intake quota, all or none.
// When the quota holds fewer than n now, it takes nothing and returns false
// with how long until it will hold n. More jobs than IntakeBurst are never
// allowed (wait is then 0): check it first. Without a quota it returns true.
func (id *Identity) AllowIntake(n int) (wait time.Duration, ok bool) {
	if id.intake == nil {
		return 0, true
	}
	now := id.set.now()
	r := id.intake.ReserveN(now, n)
	if !r.OK() {
		return 0, false
	}
	if wait = r.DelayFrom(now); wait > 0 {
		r.CancelAt(now)
		return wait, false
	}
	return 0, true
}

// Topics returns a copy of the identity's topic patterns, nil when it may
// use every topic.
func (id *Identity) Topics() []string { return slices.Clone(id.topics) }

// Restricted reports whether the identity is limited to some topics.
func (id *Identity) Restricted() bool { return len(id.topics) > 0 }

// AllowsTopic reports whether the identity may use topic: it has no topic
// patterns, or one of them matches.
func (id *Identity) AllowsTopic(topic string) bool {
	if len(id.topics) == 0 {
		return true
	}
	for _, p := range id.topics {
		if MatchTopic(p, topic) {
			return true
		}
	}
	return false
}

// ValidatePattern checks a topic pattern: dot-separated non-empty tokens,
// each `*`, `>` (last only) or made of topic characters.
func ValidatePattern(p string) error {
	if p == "" {
		return errors.New("topic pattern must not be empty")
	}
	parts := strings.Split(p, ".")
	for i, part := range parts {
		switch {
		case part == "":
			return fmt.Errorf("topic pattern %q has an empty token", p)
		case part == ">" && i != len(parts)-1:
			return fmt.Errorf("topic pattern %q: > must be the last token", p)
		case part == "*" || part == ">":
		case strings.ContainsAny(part, "*> \t"):
			return fmt.Errorf("topic pattern %q: wildcards must be whole tokens", p)
		}
	}
	return nil
}

// MatchTopic reports whether topic matches the NATS-style pattern: `*` is
// one token, a final `>` one or more, other tokens match literally.
func MatchTopic(pattern, topic string) bool {
	for {
		pt, prest, pmore := strings.Cut(pattern, ".")
		tt, trest, tmore := strings.Cut(topic, ".")
		switch {
		case pt == ">":
			return tt != ""
		case pt != "*" && pt != tt, tt == "":
			return false
		case !pmore || !tmore:
			return pmore == tmore
		}
		pattern, topic = prest, trest
	}
}
