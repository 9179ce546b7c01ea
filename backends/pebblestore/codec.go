package pebblestore

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/delayq/delayq/core"
)

// Key prefixes: one byte each, then the parts of the key (see the package
// doc, Keys).
const (
	prefixMeta     = 'm' // m<id>: the state of an unfinished job
	prefixFinished = 'x' // x<id>: the state of a done or cancelled job
	prefixRecord   = 'j' // j<id>: what a put sets and nothing changes
	prefixError    = 'e' // e<id>: the last error, when there is one
	prefixHistory  = 'h' // h<id>: the attempts that ended, when there are some
	prefixExpiry   = 'f' // f<finished ms, 8 bytes><id>: finished jobs by finish time
	prefixDead     = 'd' // d<topic>\x00<died ns, 8 bytes><id>: dead jobs by topic and death
	prefixPaused   = 'p' // p<name>: a paused topic (no value)
	prefixCount    = 'c' // c<topic>\x00<state><bucket, 8 bytes>: finished counts
	prefixKey      = 'k' // k<topic>\x00<key>\x00<id>: jobs by business key (no value)
	// sizeKey holds the unfinished jobs and their id bytes at the last
	// Close: the next Open sizes its index by it without counting.
	sizeKey = "s"
	// keysIndexedKey marks a database whose jobs' business keys are all in
	// k keys (Store.indexKeys).
	keysIndexedKey = "K"
)

// metaVersion and recordVersion lead their values, so that a later format
// can tell them apart. A meta with a priority other than 0 is written as
// metaVersionPriority (the priority follows everything else); one without
// keeps metaVersion. A record with a retry schedule is written as
// recordVersionDelays (the schedule follows created_at); one without keeps
// recordVersion, as before schedules existed. A record with its own URL is
// written as recordVersionURL: the schedule, its count possibly 0, then
// the URL, so that records without one keep their earlier forms. A record
// with an expiry is written as recordVersionExpiry: the schedule and the
// URL, either possibly empty, then the expiry (ms). A
// reserved meta is written as metaVersionAttempt: the priority, possibly
// 0, then the start (ms) and via of the attempt in progress; others keep
// their earlier forms, and a reserved meta of an earlier form reads as an
// attempt started at its updated_at, via unknown. A finished meta (x) of a
// job whose only attempt ended with the finish is written as
// metaVersionEnded: the priority, then that attempt as an h value, so that
// the ack of a job delivered once writes no h key. A meta of a job with its
// own retention is written as metaVersionFull: the priority, the attempt
// in progress (start and via) when reserved, the retention (ms), then the
// ended attempts, the rest, possibly empty. A reserved meta whose attempt
// in progress names an instance or a consumer is written as
// metaVersionFrom: the form of metaVersionFull with the instance and the
// consumer after the via, its retention possibly 0. A record of a job
// with Changes is written as recordVersionChanges: every field of
// recordVersionThen, each possibly empty, then the changes
// (encodeChanges). An h value whose attempts name an instance or a
// consumer is written as historyVersionFrom: each attempt's instance and
// consumer after its error.
const (
	metaVersion          = 1
	metaVersionPriority  = 2
	metaVersionAttempt   = 3
	metaVersionEnded     = 4
	metaVersionFull      = 5
	metaVersionFrom      = 6
	recordVersion        = 1
	recordVersionDelays  = 2
	recordVersionURL     = 3
	recordVersionExpiry  = 4
	recordVersionThen    = 5
	recordVersionChanges = 6
	// recordVersionLast is the newest form a record may have.
	recordVersionLast  = recordVersionChanges
	historyVersion     = 1
	historyVersionFrom = 2
)

var errCorrupt = errors.New("pebblestore: corrupt record")

func idKey(prefix byte, id string) []byte {
	k := make([]byte, 0, 1+len(id))
	return append(append(k, prefix), id...)
}

func expiryKey(finished time.Time, id string) []byte {
	k := make([]byte, 0, 9+len(id))
	k = append(k, prefixExpiry)
	k = binary.BigEndian.AppendUint64(k, uint64(finished.UnixMilli()))
	return append(k, id...)
}

func deadKey(topic string, died time.Time, id string) []byte {
	k := deadPrefix(topic)
	k = binary.BigEndian.AppendUint64(k, uint64(died.UnixNano()))
	return append(k, id...)
}

// keyPrefix is where the jobs of topic with business key key start; topic
// names and keys never hold a zero byte, so a key is not taken for the
// start of a longer one.
func keyPrefix(topic, key string) []byte {
	k := make([]byte, 0, 3+len(topic)+len(key)+32)
	k = append(k, prefixKey)
	k = append(k, topic...)
	k = append(k, 0)
	k = append(k, key...)
	return append(k, 0)
}

// keyIndexKey is the k key of job id of topic with business key key.
func keyIndexKey(topic, key, id string) []byte {
	return append(keyPrefix(topic, key), id...)
}

// deadPrefix is where the dead jobs of topic start; topic names never hold
// a zero byte.
func deadPrefix(topic string) []byte {
	k := make([]byte, 0, 2+len(topic)+8+32)
	k = append(k, prefixDead)
	k = append(k, topic...)
	return append(k, 0)
}

// meta is the mutable part of a job: what a claim, an ack or a retry
// changes, and all that a restart needs to rebuild the schedule.
type meta struct {
	topic       string
	state       core.State
	runAt       int64 // ms
	attempt     int
	maxAttempts int
	ttr         time.Duration
	updatedAt   int64 // ns
	leaseExp    int64 // ms, while reserved
	lease       lease // while reserved
	priority    int
	started     int64         // ms, the attempt in progress's start, while reserved
	via         uint8         // viaCodes, the attempt in progress's via, while reserved
	instance    string        // the attempt in progress's instance, while reserved
	consumer    string        // the attempt in progress's consumer, while reserved
	ended       []byte        // an h value: attempts that ended, of a finished job without an h key
	retention   time.Duration // the job's own retention (ms precision), 0 for the store's
}

// viaCodes are the one-byte forms of core.Attempt.Via; 0 is none (or one
// a claim named that the store does not know).
var viaCodes = map[string]uint8{
	core.ViaPull: 1, core.ViaWebSocket: 2, core.ViaGRPC: 3, core.ViaWebhook: 4, core.ViaNATS: 5,
}

var codeVias = func() [6]string {
	var v [6]string
	for via, c := range viaCodes {
		v[c] = via
	}
	return v
}()

// outcomeCodes are the one-byte forms of core.Attempt.Outcome.
var outcomeCodes = map[string]uint8{
	core.OutcomeAcked: 1, core.OutcomeRetried: 2, core.OutcomeBuried: 3, core.OutcomeLeaseExpired: 4,
	core.OutcomeReleased: 5, core.OutcomeCancelled: 6,
}

var codeOutcomes = func() [7]string {
	var o [7]string
	for out, c := range outcomeCodes {
		o[c] = out
	}
	return o
}()

// stateCodes are the one-byte forms of the states.
var stateCodes = map[core.State]byte{
	core.StateScheduled: 1, core.StateReady: 2, core.StateReserved: 3,
	core.StateDone: 4, core.StateDead: 5, core.StateCancelled: 6,
}

var codeStates = func() [7]core.State {
	var s [7]core.State
	for st, c := range stateCodes {
		s[c] = st
	}
	return s
}()

func (m *meta) encode() []byte {
	b := make([]byte, 0, 48+len(m.topic)+len(m.instance)+len(m.consumer))
	version := byte(metaVersion)
	switch {
	case m.state == core.StateReserved && (m.instance != "" || m.consumer != ""):
		version = metaVersionFrom
	case m.retention != 0:
		version = metaVersionFull
	case m.state == core.StateReserved:
		version = metaVersionAttempt
	case m.ended != nil:
		version = metaVersionEnded
	case m.priority != 0:
		version = metaVersionPriority
	}
	b = append(b, version, stateCodes[m.state])
	b = binary.AppendUvarint(b, uint64(len(m.topic)))
	b = append(b, m.topic...)
	b = binary.AppendVarint(b, m.runAt)
	b = binary.AppendUvarint(b, uint64(m.attempt))
	b = binary.AppendUvarint(b, uint64(m.maxAttempts))
	b = binary.AppendUvarint(b, uint64(m.ttr/time.Millisecond))
	b = binary.AppendVarint(b, m.updatedAt)
	if m.state == core.StateReserved {
		b = binary.AppendVarint(b, m.leaseExp)
		b = append(b, m.lease[:]...)
	}
	if version >= metaVersionPriority {
		b = binary.AppendVarint(b, int64(m.priority))
	}
	if version == metaVersionAttempt || (version >= metaVersionFull && m.state == core.StateReserved) {
		b = binary.AppendVarint(b, m.started)
		b = append(b, m.via)
	}
	if version == metaVersionFrom {
		b = appendString(b, m.instance)
		b = appendString(b, m.consumer)
	}
	if version >= metaVersionFull {
		b = binary.AppendUvarint(b, uint64(m.retention/time.Millisecond))
	}
	if version == metaVersionEnded || version >= metaVersionFull {
		b = append(b, m.ended...)
	}
	return b
}

func decodeMeta(b []byte) (meta, error) {
	m, topic, err := decodeMetaBytes(b)
	m.topic = string(topic)
	return m, err
}

// decodeMetaBytes is decodeMeta leaving the topic out of m: its bytes
// alias b, so that a scan of every job allocates nothing per job.
func decodeMetaBytes(b []byte) (meta, []byte, error) {
	var m meta
	if len(b) < 2 || b[0] < metaVersion || b[0] > metaVersionFrom || b[1] == 0 || int(b[1]) >= len(codeStates) {
		return m, nil, errCorrupt
	}
	m.state = codeStates[b[1]]
	d := decoder{b: b[2:]}
	topic := d.bytes()
	m.runAt = d.varint()
	m.attempt = int(d.small())
	m.maxAttempts = int(d.small())
	m.ttr = time.Duration(d.small()) * time.Millisecond
	m.updatedAt = d.varint()
	if m.state == core.StateReserved {
		m.leaseExp = d.varint()
		copy(m.lease[:], d.take(len(m.lease)))
	}
	if b[0] >= metaVersionPriority {
		m.priority = int(d.varint())
	}
	if m.state == core.StateReserved {
		m.started = m.updatedAt / int64(time.Millisecond)
	}
	if b[0] == metaVersionAttempt || (b[0] >= metaVersionFull && m.state == core.StateReserved) {
		m.started = d.varint()
		if v := d.take(1); v != nil {
			m.via = v[0]
		}
		if m.via >= uint8(len(codeVias)) {
			d.fail()
		}
	}
	if b[0] == metaVersionFrom {
		m.instance, m.consumer = string(d.bytes()), string(d.bytes())
	}
	if b[0] >= metaVersionFull {
		if m.retention = time.Duration(d.uvarint()) * time.Millisecond; m.retention < 0 || m.retention == 0 && b[0] == metaVersionFull {
			d.fail()
		}
		if d.err == nil && len(d.b) > 0 {
			m.ended = d.b // the rest, aliasing b
		}
	}
	if b[0] == metaVersionEnded {
		m.ended = d.b // the rest, aliasing b
		if len(m.ended) == 0 {
			d.fail()
		}
	}
	if d.err != nil {
		return m, nil, d.err
	}
	return m, topic, nil
}

// record is what a put sets and no later change touches but a requeue,
// which adds to the changes.
type record struct {
	key         string
	traceParent string
	createdAt   int64           // ns
	delays      []time.Duration // the job's retry schedule, nil for none
	url         string          // the job's own webhook URL, empty for none
	expiresAt   int64           // ms, the job's expiry; 0 for none
	then        []byte          // the JSON of the job's next step, nil for none
	changes     []core.Change   // the job's Changes
	body        []byte
}

func (r *record) encode() []byte {
	n := 28 + len(r.key) + len(r.traceParent) + 8*len(r.delays) + len(r.url) + len(r.then) + len(r.body)
	for _, c := range r.changes {
		n += 16 + len(c.Token)
	}
	b := make([]byte, 0, n)
	version := byte(recordVersion)
	switch {
	case len(r.changes) > 0:
		version = recordVersionChanges
	case r.then != nil:
		version = recordVersionThen
	case r.expiresAt != 0:
		version = recordVersionExpiry
	case r.url != "":
		version = recordVersionURL
	case len(r.delays) > 0:
		version = recordVersionDelays
	}
	b = append(b, version)
	b = binary.AppendUvarint(b, uint64(len(r.key)))
	b = append(b, r.key...)
	b = binary.AppendUvarint(b, uint64(len(r.traceParent)))
	b = append(b, r.traceParent...)
	b = binary.AppendVarint(b, r.createdAt)
	if version >= recordVersionDelays {
		b = binary.AppendUvarint(b, uint64(len(r.delays)))
		for _, d := range r.delays {
			b = binary.AppendUvarint(b, uint64(d))
		}
	}
	if version >= recordVersionURL {
		b = binary.AppendUvarint(b, uint64(len(r.url)))
		b = append(b, r.url...)
	}
	if version >= recordVersionExpiry {
		b = binary.AppendVarint(b, r.expiresAt)
	}
	if version >= recordVersionThen {
		b = binary.AppendUvarint(b, uint64(len(r.then)))
		b = append(b, r.then...)
	}
	if version == recordVersionChanges {
		b = appendChanges(b, r.changes)
	}
	return append(b, r.body...)
}

// recordKey returns the business key of an encoded record, copied,
// without decoding the rest: what a claim bounding jobs per key reads.
func recordKey(b []byte) (string, error) {
	if len(b) < 1 || b[0] < recordVersion || b[0] > recordVersionLast {
		return "", errCorrupt
	}
	d := decoder{b: b[1:]}
	k := string(d.bytes())
	return k, d.err
}

func decodeRecord(b []byte) (record, error) {
	var r record
	if len(b) < 1 || b[0] < recordVersion || b[0] > recordVersionLast {
		return r, errCorrupt
	}
	d := decoder{b: b[1:]}
	r.key = string(d.bytes())
	r.traceParent = string(d.bytes())
	r.createdAt = d.varint()
	if b[0] >= recordVersionDelays {
		n := d.uvarint()
		if (n == 0 && b[0] == recordVersionDelays) || n > core.DelaysMax {
			d.fail()
		}
		for i := uint64(0); i < n && d.err == nil; i++ {
			v := d.uvarint()
			if v > uint64(core.DelayMax) {
				d.fail()
			}
			r.delays = append(r.delays, time.Duration(v))
		}
	}
	if b[0] >= recordVersionURL {
		r.url = string(d.bytes())
		if r.url == "" && b[0] == recordVersionURL {
			d.fail()
		}
	}
	if b[0] >= recordVersionExpiry {
		if r.expiresAt = d.varint(); r.expiresAt == 0 && b[0] == recordVersionExpiry {
			d.fail()
		}
	}
	if b[0] >= recordVersionThen {
		if r.then = bytes.Clone(d.bytes()); len(r.then) == 0 {
			r.then = nil
			if b[0] == recordVersionThen {
				d.fail()
			}
		}
	}
	if b[0] == recordVersionChanges {
		r.changes = decodeChanges(&d)
	}
	if d.err != nil {
		return r, d.err
	}
	if len(d.b) > 0 {
		r.body = append([]byte(nil), d.b...)
	}
	return r, nil
}

// job assembles a job from its parts. Errors: errCorrupt for a next step
// that is not a step's JSON.
func job(id string, m *meta, r *record, lastError string) (*core.Job, error) {
	j := &core.Job{
		ID:          id,
		Topic:       m.topic,
		Key:         r.key,
		Body:        r.body,
		RunAt:       time.UnixMilli(m.runAt).UTC(),
		TTR:         m.ttr,
		MaxAttempts: m.maxAttempts,
		Attempt:     m.attempt,
		State:       m.state,
		CreatedAt:   time.Unix(0, r.createdAt).UTC(),
		UpdatedAt:   time.Unix(0, m.updatedAt).UTC(),
		LastError:   lastError,
		TraceParent: r.traceParent,
		RetryDelays: r.delays,
		Priority:    m.priority,
		URL:         r.url,
		Retention:   m.retention,
		Changes:     r.changes,
	}
	if r.expiresAt != 0 {
		j.ExpiresAt = time.UnixMilli(r.expiresAt).UTC()
	}
	if m.state == core.StateReserved {
		j.Lease = m.lease.String()
		j.LeaseExpiresAt = time.UnixMilli(m.leaseExp).UTC()
	}
	if r.then != nil {
		if err := json.Unmarshal(r.then, &j.Then); err != nil {
			return nil, fmt.Errorf("%w: job %q: then: %v", errCorrupt, id, err)
		}
	}
	return j, nil
}

// withHistory sets j's History: the ended attempts of raw (an h value,
// nil for none) and of m, then, while m is reserved, the attempt in
// progress; the newest within core's bounds (core.TrimHistory).
func withHistory(j *core.Job, m *meta, raw []byte) error {
	h, err := decodeHistory(raw)
	if err == nil && m.ended != nil {
		var ended []core.Attempt
		ended, err = decodeHistory(m.ended)
		h = append(h, ended...)
	}
	if err != nil {
		return fmt.Errorf("pebblestore: job %q: history: %w", j.ID, err)
	}
	if m.state == core.StateReserved {
		h = append(h, m.attemptInProgress())
	}
	j.History = core.TrimHistory(h)
	return nil
}

// attemptInProgress is the attempt in progress of reserved m.
func (m *meta) attemptInProgress() core.Attempt {
	return core.Attempt{Attempt: m.attempt, StartedAt: time.UnixMilli(m.started).UTC(), Via: codeVias[m.via],
		Instance: m.instance, Consumer: m.consumer}
}

// encodeHistory is the h value of attempts that ended: per attempt its
// number, start (ms), duration (ms), via and outcome codes, and error,
// then (historyVersionFrom) its instance and consumer.
func encodeHistory(h []core.Attempt) []byte {
	n, version := 1, byte(historyVersion)
	for k := range h {
		n += 24 + len(h[k].Error) + len(h[k].Instance) + len(h[k].Consumer)
		if h[k].Instance != "" || h[k].Consumer != "" {
			version = historyVersionFrom
		}
	}
	b := make([]byte, 0, n)
	b = append(b, version)
	for k := range h {
		a := &h[k]
		b = binary.AppendUvarint(b, uint64(a.Attempt))
		b = binary.AppendVarint(b, a.StartedAt.UnixMilli())
		b = binary.AppendVarint(b, a.EndedAt.UnixMilli()-a.StartedAt.UnixMilli())
		b = append(b, viaCodes[a.Via], outcomeCodes[a.Outcome])
		b = appendString(b, a.Error)
		if version == historyVersionFrom {
			b = appendString(b, a.Instance)
			b = appendString(b, a.Consumer)
		}
	}
	return b
}

// decodeHistory reads what encodeHistory wrote; nil for nil.
func decodeHistory(b []byte) ([]core.Attempt, error) {
	if b == nil {
		return nil, nil
	}
	if len(b) < 1 || b[0] != historyVersion && b[0] != historyVersionFrom {
		return nil, errCorrupt
	}
	d := decoder{b: b[1:]}
	var h []core.Attempt
	for len(d.b) > 0 && d.err == nil {
		var a core.Attempt
		a.Attempt = int(d.small())
		start := d.varint()
		end := start + d.varint()
		a.StartedAt, a.EndedAt = time.UnixMilli(start).UTC(), time.UnixMilli(end).UTC()
		if c := d.take(2); c != nil {
			if int(c[0]) >= len(codeVias) || c[1] == 0 || int(c[1]) >= len(codeOutcomes) {
				d.fail()
				break
			}
			a.Via, a.Outcome = codeVias[c[0]], codeOutcomes[c[1]]
		}
		a.Error = string(d.bytes())
		if b[0] == historyVersionFrom {
			a.Instance, a.Consumer = string(d.bytes()), string(d.bytes())
		}
		h = append(h, a)
	}
	if d.err != nil {
		return nil, d.err
	}
	return h, nil
}

// metaOf returns the meta of a job.
func metaOf(j *core.Job) meta {
	m := meta{
		topic:       j.Topic,
		state:       j.State,
		runAt:       j.RunAt.UnixMilli(),
		attempt:     j.Attempt,
		maxAttempts: j.MaxAttempts,
		ttr:         j.TTR,
		updatedAt:   j.UpdatedAt.UnixNano(),
		priority:    j.Priority,
		retention:   j.Retention,
	}
	if j.State == core.StateReserved {
		m.leaseExp = j.LeaseExpiresAt.UnixMilli()
		m.lease, _ = parseLease(j.Lease)
	}
	return m
}

// ended returns the attempts of j's History that ended: all but one in
// progress.
func ended(j *core.Job) []core.Attempt {
	h := j.History
	if len(h) > 0 && h[len(h)-1].Running() {
		h = h[:len(h)-1]
	}
	return h
}

// recordOf returns the record of j. Errors: the JSON encoding's of j's
// next step.
func recordOf(j *core.Job) (record, error) {
	r := record{key: j.Key, traceParent: j.TraceParent, createdAt: j.CreatedAt.UnixNano(), delays: j.RetryDelays, url: j.URL,
		changes: j.Changes, body: j.Body}
	if !j.ExpiresAt.IsZero() {
		r.expiresAt = j.ExpiresAt.UnixMilli()
	}
	if j.Then != nil {
		var err error
		if r.then, err = json.Marshal(j.Then); err != nil {
			return r, fmt.Errorf("pebblestore: job %q: then: %w", j.ID, err)
		}
	}
	return r, nil
}

// appendString appends s to b, its length first.
func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// changeKinds and originCodes are the one-byte forms of core.Change's
// Kind and Via; an origin not listed is kept as 0, none.
var (
	changeKinds = []string{1: core.ChangeCreated, 2: core.ChangeReplaced, 3: core.ChangeRequeued}
	originCodes = []string{1: core.OriginHTTP, 2: core.OriginGRPC, 3: core.OriginNATS, 4: core.OriginKafka,
		5: core.OriginSchedule, 6: core.OriginImport, 7: core.OriginChain, 8: core.OriginEvents, 9: core.OriginNotices}
)

// appendChanges appends a job's Changes to b: their count, then per change
// its kind and via codes, time (ms) and token.
func appendChanges(b []byte, changes []core.Change) []byte {
	b = binary.AppendUvarint(b, uint64(len(changes)))
	for _, c := range changes {
		b = append(b, byte(max(slices.Index(changeKinds[1:], c.Kind)+1, 0)), byte(max(slices.Index(originCodes[1:], c.Via)+1, 0)))
		b = binary.AppendVarint(b, c.At.UnixMilli())
		b = appendString(b, c.Token)
	}
	return b
}

// decodeChanges reads what appendChanges wrote.
func decodeChanges(d *decoder) []core.Change {
	n := d.uvarint()
	if n > core.ChangesMax {
		d.fail()
		return nil
	}
	changes := make([]core.Change, 0, n)
	for range n {
		codes := d.take(2)
		if codes == nil || codes[0] == 0 || int(codes[0]) >= len(changeKinds) || int(codes[1]) >= len(originCodes) {
			d.fail()
			return nil
		}
		at := d.varint()
		changes = append(changes, core.Change{Kind: changeKinds[codes[0]], Via: originCodes[codes[1]],
			At: time.UnixMilli(at).UTC(), Token: string(d.bytes())})
	}
	return changes
}

// decoder reads the varint-framed values of a meta or a record, keeping the
// first error.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

// small reads a count or a duration in ms, which stores keep far below
// 2^32.
func (d *decoder) small() uint32 {
	v := d.uvarint()
	if v > 1<<32-1 {
		d.fail()
		return 0
	}
	return uint32(v)
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) take(n int) []byte {
	if d.err != nil || n < 0 || n > len(d.b) {
		d.fail()
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	return d.take(int(n))
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated", errCorrupt)
	}
	d.b = nil
}
