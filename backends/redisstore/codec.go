package redisstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"github.com/delayq/delayq/core"
)

// errShortReply is a script answer of the wrong shape: a script of another
// version runs under the same name.
var errShortReply = errors.New("redisstore: unexpected script reply")

// Fields of a job hash.
const (
	fState     = "s" // state name
	fTopic     = "t"
	fKey       = "k" // absent when empty
	fBody      = "b" // absent when empty
	fRunAt     = "r" // Unix ms
	fTTR       = "d" // ms
	fMax       = "m" // max attempts
	fAttempt   = "a"
	fCreated   = "c" // Unix ms
	fUpdated   = "u" // Unix ms
	fLastError = "e"
	fLease     = "l" // meaningful while reserved
	fLeaseExp  = "x" // Unix ms, meaningful while reserved
	fTrace     = "p" // traceparent, absent when empty
	fDelays    = "w" // retry delays, ns, comma-separated; absent when none
	fPriority  = "y" // absent when 0
	fURL       = "h" // the job's own webhook URL, absent when none
	fVia       = "v" // the via of the claim in progress (encodeVia); a hash keeps the last one
	fHistory   = "H" // the attempts that ended, absent until one did (History in lib.lua)
	fExpiresAt = "z" // Unix ms, absent when none
	fRetention = "R" // ms, the job's own retention, absent when none
	fThen      = "T" // the JSON of the job's next step, absent when none
	fChanges   = "C" // the job's Changes (encodeChanges), absent when none
)

// viaLetters are the one-letter forms of core.Attempt.Via in a job hash:
// a claim writes one to fVia, and an ended attempt keeps it. A via not
// listed is kept as none.
var viaLetters = map[string]string{
	core.ViaPull: "p", core.ViaWebSocket: "w", core.ViaGRPC: "g", core.ViaWebhook: "h", core.ViaNATS: "n",
}

// outcomeLetters are the one-letter forms of core.Attempt.Outcome.
var outcomeLetters = map[string]string{
	core.OutcomeAcked: "a", core.OutcomeRetried: "r", core.OutcomeBuried: "b", core.OutcomeLeaseExpired: "x",
	core.OutcomeReleased: "l", core.OutcomeCancelled: "c",
}

var letterVias, letterOutcomes = invert(viaLetters), invert(outcomeLetters)

func invert(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[v] = k
	}
	return out
}

// encodeVia is the fVia value of a claim of p: the letter of its via
// (empty for none or one not known), then, when it names an instance or a
// consumer, "/" and the instance, "/" and the consumer; both are
// core.CleanName'd, so that neither holds a '/' or a ','.
func encodeVia(p *core.ClaimJobsParams) string {
	v := viaLetters[p.Via]
	if p.Instance == "" && p.Consumer == "" {
		return v
	}
	return v + "/" + p.Instance + "/" + p.Consumer
}

// decodeVia reads what encodeVia wrote, as a claim's params.
func decodeVia(s string) *core.ClaimJobsParams {
	letter, rest, _ := strings.Cut(s, "/")
	instance, consumer, _ := strings.Cut(rest, "/")
	return &core.ClaimJobsParams{Via: letterVias[letter], Instance: instance, Consumer: consumer}
}

// changeLetters are the one-letter forms of core.Change.Kind.
var changeLetters = map[string]string{core.ChangeCreated: "c", core.ChangeReplaced: "r", core.ChangeRequeued: "q"}

var letterChanges = invert(changeLetters)

// putChange is the argument of the put script that says how a job's put
// came: the via and token of the last of its Changes, "<via>,<token>";
// the script makes the change of it (Changes in lib.lua).
func putChange(j *core.Job) string {
	if n := len(j.Changes); n > 0 {
		return j.Changes[n-1].Via + "," + core.CleanName(j.Changes[n-1].Token)
	}
	return ","
}

// encodeChanges is the fChanges field of changes, as lib.lua writes it:
// each "<kind letter><at ms>,<via>,<token>", joined by '|'; lib.lua
// leaves out the time of a put's created entry, the job's created_at
// (decodeChanges).
func encodeChanges(changes []core.Change) string {
	var b []byte
	for i, c := range changes {
		if i > 0 {
			b = append(b, '|')
		}
		b = append(b, changeLetters[c.Kind]...)
		b = strconv.AppendInt(b, c.At.UnixMilli(), 10)
		b = append(b, ',')
		b = append(b, c.Via...)
		b = append(b, ',')
		b = append(b, core.CleanName(c.Token)...)
	}
	return string(b)
}

var errChanges = errors.New("malformed changes")

// decodeChanges reads an fChanges field of a job created at created,
// the time of an entry that has none.
func decodeChanges(s string, created time.Time) ([]core.Change, error) {
	var changes []core.Change
	for e := range strings.SplitSeq(s, "|") {
		if e == "" {
			return nil, errChanges
		}
		kind, ok := letterChanges[e[:1]]
		at, rest, ok2 := strings.Cut(e[1:], ",")
		via, token, ok3 := strings.Cut(rest, ",")
		c := core.Change{At: created, Kind: kind, Via: via, Token: token}
		var err error
		if at != "" {
			var ms int64
			ms, err = strconv.ParseInt(at, 10, 64)
			c.At = msTime(ms)
		}
		if !ok || !ok2 || !ok3 || err != nil {
			return nil, errChanges
		}
		changes = append(changes, c)
	}
	return changes, nil
}

// encodeHistory is the fHistory field of attempts that ended, as
// ended_attempt in lib.lua writes it (each via as encodeVia); empty for
// none.
func encodeHistory(h []core.Attempt) string {
	if len(h) == 0 {
		return ""
	}
	b := strconv.AppendInt(nil, int64(len(h)), 10)
	b = append(b, '|')
	for k := range h {
		a := &h[k]
		start := a.StartedAt.UnixMilli()
		b = strconv.AppendInt(b, int64(a.Attempt), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, start, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, a.EndedAt.UnixMilli()-start, 10)
		b = append(b, ',')
		b = append(b, encodeVia(&core.ClaimJobsParams{Via: a.Via, Instance: core.CleanName(a.Instance), Consumer: core.CleanName(a.Consumer)})...)
		b = append(b, ',')
		b = append(b, outcomeLetters[a.Outcome]...)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(len(a.Error)), 10)
		b = append(b, ':')
		b = append(b, a.Error...)
	}
	return string(b)
}

var errHistory = errors.New("malformed history")

// decodeHistory reads an fHistory field.
func decodeHistory(s string) ([]core.Attempt, error) {
	n, rest, ok := strings.Cut(s, "|")
	count, err := strconv.Atoi(n)
	if !ok || err != nil || count < 0 || count > core.HistoryMax {
		return nil, errHistory
	}
	h := make([]core.Attempt, 0, count)
	for rest != "" {
		var f [6]string
		for i := range 5 {
			if f[i], rest, ok = strings.Cut(rest, ","); !ok {
				return nil, errHistory
			}
		}
		if f[5], rest, ok = strings.Cut(rest, ":"); !ok {
			return nil, errHistory
		}
		attempt, err1 := strconv.Atoi(f[0])
		start, err2 := strconv.ParseInt(f[1], 10, 64)
		dur, err3 := strconv.ParseInt(f[2], 10, 64)
		elen, err4 := strconv.Atoi(f[5])
		outcome, known := letterOutcomes[f[4]]
		if err := errors.Join(err1, err2, err3, err4); err != nil || !known || elen < 0 || elen > len(rest) {
			return nil, errHistory
		}
		v := decodeVia(f[3])
		h = append(h, core.Attempt{Attempt: attempt, StartedAt: msTime(start), EndedAt: msTime(start + dur),
			Via: v.Via, Instance: v.Instance, Consumer: v.Consumer, Outcome: outcome, Error: rest[:elen]})
		rest = rest[elen:]
	}
	if len(h) != count {
		return nil, errHistory
	}
	return h, nil
}

// decodeMap turns a job hash into a job.
func decodeMap(id string, m map[string]string) (*core.Job, error) {
	j := &core.Job{ID: id}
	var err error
	num := func(f string) int64 {
		v, ok := m[f]
		if !ok || err != nil {
			return 0
		}
		n, perr := strconv.ParseInt(v, 10, 64)
		if perr != nil {
			err = fmt.Errorf("redisstore: job %q: field %s: %w", id, f, perr)
		}
		return n
	}
	j.State = core.State(m[fState])
	j.Topic = m[fTopic]
	j.Key = m[fKey]
	if b, ok := m[fBody]; ok {
		j.Body = []byte(b)
	}
	j.RunAt = msTime(num(fRunAt))
	j.TTR = time.Duration(num(fTTR)) * time.Millisecond
	j.MaxAttempts = int(num(fMax))
	j.Attempt = int(num(fAttempt))
	j.CreatedAt = msTime(num(fCreated))
	j.UpdatedAt = msTime(num(fUpdated))
	j.LastError = m[fLastError]
	if j.State == core.StateReserved {
		// The fields stay after a lease ends (see finish in lib.lua).
		j.Lease = m[fLease]
		j.LeaseExpiresAt = msTime(num(fLeaseExp))
	}
	j.TraceParent = m[fTrace]
	j.URL = m[fURL]
	j.Priority = int(num(fPriority))
	if _, ok := m[fExpiresAt]; ok {
		j.ExpiresAt = msTime(num(fExpiresAt))
	}
	j.Retention = time.Duration(num(fRetention)) * time.Millisecond
	if then, ok := m[fThen]; ok && err == nil {
		if err = json.Unmarshal([]byte(then), &j.Then); err != nil {
			err = fmt.Errorf("redisstore: job %q: field %s: %w", id, fThen, err)
		}
	}
	if hist, ok := m[fHistory]; ok && err == nil {
		if j.History, err = decodeHistory(hist); err != nil {
			err = fmt.Errorf("redisstore: job %q: field %s: %w", id, fHistory, err)
		}
	}
	if j.State == core.StateReserved {
		// The attempt in progress: the claim's time is u until the end of
		// the delivery (History in lib.lua).
		v := decodeVia(m[fVia])
		j.History = append(j.History, core.Attempt{Attempt: j.Attempt, StartedAt: j.UpdatedAt, Via: v.Via,
			Instance: v.Instance, Consumer: v.Consumer})
	}
	// The script keeps the ended attempts within the bounds; this drops
	// what the attempt in progress pushes out.
	j.History = core.TrimHistory(j.History)
	if c, ok := m[fChanges]; ok && err == nil {
		if j.Changes, err = decodeChanges(c, j.CreatedAt); err != nil {
			err = fmt.Errorf("redisstore: job %q: field %s: %w", id, fChanges, err)
		}
	}
	if w, ok := m[fDelays]; ok && err == nil {
		j.RetryDelays, err = decodeDelays(w)
		if err != nil {
			err = fmt.Errorf("redisstore: job %q: field %s: %w", id, fDelays, err)
		}
	}
	if err != nil {
		return nil, err
	}
	if j.State == "" || j.Topic == "" {
		return nil, fmt.Errorf("redisstore: job %q: hash without state or topic", id)
	}
	return j, nil
}

// encodePriority is the argument of a job's priority to the put and
// import scripts: empty for 0, which the hash leaves out.
func encodePriority(p int) string {
	if p == 0 {
		return ""
	}
	return strconv.Itoa(p)
}

// encodeExpiresAt is the argument of a job's expiry to the put and import
// scripts: Unix ms, empty for none, which the hash leaves out.
func encodeExpiresAt(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(t.UnixMilli(), 10)
}

// encodeRetention is the argument of a job's own retention to the put and
// import scripts: ms, empty for none, which the hash leaves out.
func encodeRetention(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return strconv.FormatInt(d.Milliseconds(), 10)
}

// encodeThen is the argument of a job's next step to the put script: its
// JSON, empty for none, which the hash leaves out. Errors: the JSON
// encoding's.
func encodeThen(j *core.Job) (string, error) {
	if j.Then == nil {
		return "", nil
	}
	b, err := json.Marshal(j.Then)
	if err != nil {
		return "", fmt.Errorf("redisstore: job %q: then: %w", j.ID, err)
	}
	return string(b), nil
}

// encodeDelays is the form of a retry schedule in a job hash: its delays
// in ns, comma-separated; empty for none.
func encodeDelays(delays []time.Duration) string {
	b := make([]byte, 0, 12*len(delays))
	for i, d := range delays {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(d), 10)
	}
	return string(b)
}

// decodeDelays reads what encodeDelays wrote.
func decodeDelays(s string) ([]time.Duration, error) {
	var delays []time.Duration
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, err
		}
		delays = append(delays, time.Duration(n))
	}
	return delays, nil
}

// decodeFlat turns a script's answer of a job (job_all in lib.lua) into a
// job: a hash's fields as HGETALL gives them, or a packed job, {its string}
// or {its string, its body}. A hash has a dozen fields or more, so one or
// two values are a packed job.
func decodeFlat(id string, flat []any) (*core.Job, error) {
	if len(flat) == 1 || len(flat) == 2 {
		return decodePacked(id, asString(flat[0]), flat[1:])
	}
	m := make(map[string]string, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		m[asString(flat[i])] = asString(flat[i+1])
	}
	return decodeMap(id, m)
}

// decodePacked turns a packed job, a MessagePack map of the fields a hash
// holds (numbers as integers), and its body when it has a key of its own,
// into a job.
func decodePacked(id, raw string, body []any) (*core.Job, error) {
	m, err := packedFields(raw)
	if err != nil {
		return nil, fmt.Errorf("redisstore: job %q: packed: %w", id, err)
	}
	if len(body) == 1 {
		m[fBody] = asString(body[0])
	}
	return decodeMap(id, m)
}

// packedFields reads the fields of a packed job as a hash holds them:
// numbers in decimal, a field the script emptied (false or nil) left out.
// It reads each value as what it is, with no map of interfaces between,
// which would cost a claimed job about a third more time and 16 more
// allocations (BenchmarkDecodePacked).
func packedFields(raw string) (map[string]string, error) {
	dec := msgpack.GetDecoder()
	defer msgpack.PutDecoder(dec)
	dec.Reset(strings.NewReader(raw))
	n, err := dec.DecodeMapLen()
	if err != nil {
		return nil, err
	}
	// A job has about 25 fields at most; a larger count is only a hint
	// of garbage, which runs out of bytes before it fills a map.
	m := make(map[string]string, min(max(n, 0), 32)+1)
	for range n {
		k, err := dec.DecodeString()
		if err != nil {
			return nil, err
		}
		c, err := dec.PeekCode()
		if err != nil {
			return nil, err
		}
		var v string
		switch {
		case msgpcode.IsString(c) || msgpcode.IsBin(c):
			v, err = dec.DecodeString()
		case c == msgpcode.Uint64:
			var u uint64
			u, err = dec.DecodeUint64()
			v = strconv.FormatUint(u, 10)
		case msgpcode.IsFixedNum(c) || c >= msgpcode.Uint8 && c <= msgpcode.Int64:
			var i int64
			i, err = dec.DecodeInt64()
			v = strconv.FormatInt(i, 10)
		case c == msgpcode.Float || c == msgpcode.Double:
			// A whole number Lua could not pack as an integer.
			var f float64
			f, err = dec.DecodeFloat64()
			v = strconv.FormatFloat(f, 'f', -1, 64)
		case c == msgpcode.Nil || c == msgpcode.False || c == msgpcode.True:
			// A field the script emptied.
			if err := dec.Skip(); err != nil {
				return nil, err
			}
			continue
		default:
			return nil, fmt.Errorf("field %s: msgpack code %#x", k, c)
		}
		if err != nil {
			return nil, err
		}
		m[k] = v
	}
	return m, nil
}

// view reports a stored job as of now (Job.AsOf), as the next script to
// touch it will make it.
func view(j *core.Job, now time.Time) *core.Job {
	j.AsOf(now)
	return j
}

func msTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

func asString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	case int64:
		return strconv.FormatInt(v, 10)
	}
	return ""
}

// asInt reads an integer reply, or a number sent as a string; -1 otherwise.
func asInt(v any) int64 {
	switch v := v.(type) {
	case int64:
		return v
	case string:
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
	}
	return -1
}

// putPart is what the put script needs of job j besides its id, topic,
// key, run_at and priority, as put.lua takes it: the body when it gets a
// key of its own (longer than the store's inline bytes), else empty; how
// the put came, as the new job's change log starts (C: "c,<via>,<token>"),
// packed; and the part it packs of the job (Packed puts in lib.lua), the
// body in it when the job keeps it. A store of hashes takes the same
// arguments and unpacks the part into the hash's fields.
type putPart struct {
	body, changes, packed string
}

// putAdded is how many fields put.lua appends to the part of a new job (s,
// c, u and C): the part's header counts them, so that the script appends
// them without rewriting it (0.27 µs a job, half of building the job's
// string).
const putAdded = 4

// newPutPart returns the put script's arguments of j, bodies longer than
// inline in keys of their own, packing with m. Errors: the JSON encoding
// of its next step.
func newPutPart(j *core.Job, inline int, m *packedMap) (putPart, error) {
	then, err := encodeThen(j)
	if err != nil {
		return putPart{}, err
	}
	p := putPart{body: string(j.Body), changes: m.packString("c," + putChange(j))}
	m.reset()
	m.str(fTopic, j.Topic)
	m.int(fRunAt, j.RunAt.UnixMilli())
	m.int(fTTR, j.TTR.Milliseconds())
	m.int(fMax, int64(j.MaxAttempts))
	m.int(fAttempt, 0)
	if j.Priority != 0 {
		m.int(fPriority, int64(j.Priority))
	}
	if j.Key != "" {
		m.str(fKey, j.Key)
	}
	if len(j.Body) > 0 && len(j.Body) <= inline {
		m.str(fBody, p.body)
		p.body = ""
	}
	if j.TraceParent != "" {
		m.str(fTrace, j.TraceParent)
	}
	if len(j.RetryDelays) > 0 {
		m.str(fDelays, encodeDelays(j.RetryDelays))
	}
	if j.URL != "" {
		m.str(fURL, j.URL)
	}
	if !j.ExpiresAt.IsZero() {
		m.int(fExpiresAt, j.ExpiresAt.UnixMilli())
	}
	if j.Retention > 0 {
		m.int(fRetention, j.Retention.Milliseconds())
	}
	if then != "" {
		m.str(fThen, then)
	}
	p.packed = m.end(putAdded)
	return p, nil
}

// packedMap writes MessagePack map16s of string keys to strings and
// integers (compact), as cmsgpack (the scripts' MessagePack) reads them,
// one after another: newPackedMap, then reset before each.
type packedMap struct {
	n   int
	buf bytes.Buffer
	enc *msgpack.Encoder
}

// newPackedMap returns a packedMap with its encoder.
func newPackedMap() *packedMap {
	m := &packedMap{}
	m.enc = msgpack.NewEncoder(&m.buf)
	return m
}

// packString returns s packed as a MessagePack string. It uses the
// buffer of the map: call it between maps.
func (m *packedMap) packString(s string) string {
	m.buf.Reset()
	_ = m.enc.EncodeString(s)
	return m.buf.String()
}

// reset starts a map: its header, whose count bytes the map's end fills.
func (m *packedMap) reset() {
	m.n = 0
	m.buf.Reset()
	m.buf.Write([]byte{0xde, 0, 0})
}

// str adds key k with string v (writes to a bytes.Buffer do not fail).
func (m *packedMap) str(k, v string) {
	m.n++
	_ = m.enc.EncodeString(k)
	_ = m.enc.EncodeString(v)
}

// int adds key k with integer v.
func (m *packedMap) int(k string, v int64) {
	m.n++
	_ = m.enc.EncodeString(k)
	_ = m.enc.EncodeInt(v)
}

// end returns the map written since reset, its header counting more
// entries besides, which its reader appends.
func (m *packedMap) end(more int) string {
	b := m.buf.Bytes()
	n := m.n + more
	b[1], b[2] = byte(n>>8), byte(n)
	return string(b)
}
