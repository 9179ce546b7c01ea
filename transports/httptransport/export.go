package httptransport

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"time"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/service"
	"github.com/delayq/delayq/transports/wire"
)

// exportFlushBytes is how much of an export is buffered before it is
// written and flushed to the client.
const exportFlushBytes = 64 << 10

// exportJobs serves GET /v1/export: every scheduled, ready, reserved and
// dead job as NDJSON, one job per line in the form appendExportJob writes,
// flushed as it goes. A token restricted to topics gets only the jobs of
// its topics. With encryption at rest the bodies come sealed, in plaintext
// with ?plaintext=true. 501 unimplemented when the backend cannot export. An error
// once lines were sent aborts the connection, so that a client sees a
// broken transfer rather than a short export.
func (s *Server) exportJobs(w http.ResponseWriter, r *http.Request) error {
	rc := http.NewResponseController(w)
	started := false
	b := make([]byte, 0, exportFlushBytes+4096)
	flush := func() error {
		// Bounded by progress: each flush must be taken within the write
		// timeout, however long the whole export takes. A socket
		// deadline: the real clock.
		_ = rc.SetWriteDeadline(time.Now().Add(s.writeTimeout))
		if !started {
			started = true
			h := w.Header()
			h.Set("Content-Type", ndjsonType)
			h.Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusOK)
		}
		if len(b) > 0 {
			if _, err := w.Write(b); err != nil {
				return err
			}
			b = b[:0]
		}
		return rc.Flush()
	}
	var opts service.ExportOptions
	switch plain := r.URL.Query().Get("plaintext"); plain {
	case "", "false":
	case "true":
		opts.Plaintext = true
	default:
		return core.Invalid("plaintext", "plaintext must be true or false, not %q", plain)
	}
	err := s.svc.Export(r.Context(), opts, func(sc *core.Schedule) error {
		line, err := scheduleExportLine(sc)
		b = append(append(b, line...), '\n')
		return err
	}, func(j *core.Job) error {
		b = appendExportJob(b, j)
		b = append(b, '\n')
		if len(b) >= exportFlushBytes {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	switch {
	case err == nil:
		return nil
	case !started:
		return err
	}
	s.logError(r, toAPIError(err), fmt.Errorf("export ended early: %w", err))
	panic(http.ErrAbortHandler)
}

// appendExportJob appends one line of an export: the job's fields, state,
// history and changes, its body byte for byte, but never its lease.
func appendExportJob(b []byte, j *core.Job) []byte {
	b = appendJobFields(b, j)
	b = append(b, `,"last_error":`...)
	b = appendString(b, j.LastError)
	b = appendChanges(b, j.Changes)
	return append(b, '}')
}

// exportLine is the wire form of one line of an import: a line of an
// export.
type exportLine struct {
	ID          string          `json:"id"`
	Topic       string          `json:"topic"`
	Key         string          `json:"key"`
	Body        json.RawMessage `json:"body"`
	RunAt       json.RawMessage `json:"run_at"`
	TTR         json.RawMessage `json:"ttr"`
	MaxAttempts int             `json:"max_attempts"`
	Attempt     int             `json:"attempt"`
	State       string          `json:"state"`
	CreatedAt   json.RawMessage `json:"created_at"`
	LastError   string          `json:"last_error"`
	Backoff     json.RawMessage `json:"backoff"`
	Priority    int             `json:"priority"`
	URL         string          `json:"url"`
	ExpiresAt   json.RawMessage `json:"expires_at"`
	Retention   json.RawMessage `json:"retention"`
	History     []attemptLine   `json:"history"`
	Changes     []changeLine    `json:"changes"`
}

// changeLine is the wire form of one change of an export line.
type changeLine struct {
	At    json.RawMessage `json:"at"`
	Kind  string          `json:"kind"`
	Via   string          `json:"via"`
	Token string          `json:"token"`
}

// attemptLine is the wire form of one attempt of an export line's history.
type attemptLine struct {
	Attempt   int             `json:"attempt"`
	StartedAt json.RawMessage `json:"started_at"`
	EndedAt   json.RawMessage `json:"ended_at"`
	Via       string          `json:"via"`
	Instance  string          `json:"instance"`
	Consumer  string          `json:"consumer"`
	Outcome   string          `json:"outcome"`
	Error     string          `json:"error"`
}

// decodeExportLine decodes one line of an import into a job. It checks the
// wire form only; Engine.Import validates the values.
func decodeExportLine(data []byte) (*core.Job, error) {
	var l exportLine
	if err := wire.DecodeObject(data, "", &l); err != nil {
		return nil, err
	}
	j := &core.Job{
		ID:          l.ID,
		Topic:       l.Topic,
		Key:         l.Key,
		Body:        l.Body, // a copy: RawMessage copies what it decodes
		MaxAttempts: l.MaxAttempts,
		Attempt:     l.Attempt,
		State:       core.State(l.State),
		LastError:   l.LastError,
		Priority:    l.Priority,
		URL:         l.URL,
	}
	var err error
	if j.RunAt, _, err = parseTime("run_at", l.RunAt); err != nil {
		return nil, err
	}
	if j.CreatedAt, _, err = parseTime("created_at", l.CreatedAt); err != nil {
		return nil, err
	}
	if j.ExpiresAt, _, err = parseTime("expires_at", l.ExpiresAt); err != nil {
		return nil, err
	}
	if j.TTR, _, err = parseDuration("ttr", l.TTR); err != nil {
		return nil, err
	}
	if j.Retention, _, err = parseDuration("retention", l.Retention); err != nil {
		return nil, err
	}
	if j.RetryDelays, err = wire.DecodeJobBackoff(l.Backoff); err != nil {
		return nil, err
	}
	for _, a := range l.History {
		at := core.Attempt{Attempt: a.Attempt, Via: a.Via, Instance: a.Instance, Consumer: a.Consumer, Outcome: a.Outcome, Error: a.Error}
		if at.StartedAt, _, err = parseTime("history.started_at", a.StartedAt); err != nil {
			return nil, err
		}
		if at.EndedAt, _, err = parseTime("history.ended_at", a.EndedAt); err != nil {
			return nil, err
		}
		j.History = append(j.History, at)
	}
	for _, c := range l.Changes {
		ch := core.Change{Kind: c.Kind, Via: c.Via, Token: c.Token}
		if ch.At, _, err = parseTime("changes.at", c.At); err != nil {
			return nil, err
		}
		j.Changes = append(j.Changes, ch)
	}
	return j, nil
}

// importAnswer is the answer to POST /v1/import.
type importAnswer struct {
	Imported int           `json:"imported"`
	Skipped  int           `json:"skipped"`
	Failed   int           `json:"failed"`
	Errors   []importError `json:"errors"`
}

// importError is a line of an import that failed.
type importError struct {
	Line  int             `json:"line"`
	Error json.RawMessage `json:"error"`
}

// importJobs serves POST /v1/import: an NDJSON body (Content-Type
// application/x-ndjson, else 415) of exported jobs, read as a stream whose
// every read must return within the body read timeout, however long the
// whole import takes, and given to Engine.Import in batches, each line bounded
// as a single job request is. It answers 200 with the counts of jobs
// imported, skipped (their id was in use) and failed, and the errors of the
// first failed lines, each failing alone with its line number (1-based;
// blank lines count and are ignored). A job with an id of the engine's
// derived forms fails, not skips, from a token restricted to topics
// (service.AllowImportedID). 501 unimplemented when the backend
// cannot import; a store failure answers its error, and since an import is
// idempotent by id the whole body may be sent again.
func (s *Server) importJobs(w http.ResponseWriter, r *http.Request) error {
	if err := checkMediaType(r, ndjsonType); err != nil {
		return err
	}
	im, err := s.svc.StartImport(r.Context(), int(min(s.maxRequestBytes, math.MaxInt)))
	if err != nil {
		return err
	}
	rc := http.NewResponseController(w)
	rd := bufio.NewReaderSize(&progressReader{r: r.Body, rc: rc, timeout: s.bodyReadTimeout, writeTimeout: s.writeTimeout}, 64<<10)
	var line []byte
	for n := 1; ; n++ {
		var err error
		var tooLong bool
		line, tooLong, err = readLine(rd, line[:0], s.maxJobBytes)
		if err != nil && !errors.Is(err, io.EOF) {
			return core.Invalid("", "reading the request body failed at line %d: %v", n, err)
		}
		eof := err != nil
		err = nil
		switch {
		case tooLong:
			im.Fail(int64(n), core.TooLarge("", "line %d is longer than the limit of %d bytes", n, s.maxJobBytes))
		case isScheduleLine(line):
			sc, derr := decodeScheduleLine(line)
			err = im.Schedule(int64(n), sc, derr)
		case len(trimJSONSpace(line)) > 0:
			j, derr := decodeExportLine(line)
			err = im.Job(int64(n), j, len(line), derr)
		}
		if err == nil && eof {
			err = im.Flush()
		}
		if err != nil {
			return err // the store's failure: the whole body may be sent again
		}
		if eof {
			break
		}
	}
	_ = rc.SetReadDeadline(time.Time{})
	ans := importAnswer{Imported: int(im.Imported), Skipped: int(im.Skipped), Failed: int(im.Failed), Errors: make([]importError, len(im.Errors))}
	for i, e := range im.Errors {
		ans.Errors[i] = importError{Line: int(e.Index), Error: appendErrorObject(nil, toAPIError(e.Err))}
	}
	// Lines that failed decoding were listed before those the engine
	// refused in the same batch.
	slices.SortStableFunc(ans.Errors, func(a, b importError) int { return cmp.Compare(a.Line, b.Line) })
	s.writeJSON(w, r, http.StatusOK, &ans)
	return nil
}

// progressReader bounds a streamed body by progress: before each read it
// moves the read deadline to timeout from now, and the write deadline of
// the answer that comes after the body to writeTimeout past that.
type progressReader struct {
	r                     io.Reader
	rc                    *http.ResponseController
	timeout, writeTimeout time.Duration
}

func (p *progressReader) Read(b []byte) (int, error) {
	deadline := time.Now().Add(p.timeout) // a socket deadline: the real clock
	_ = p.rc.SetReadDeadline(deadline)
	_ = p.rc.SetWriteDeadline(deadline.Add(p.writeTimeout))
	return p.r.Read(b)
}

// readLine reads one line from rd into buf, without its newline (and \r).
// A line longer than limit is read to its end but not kept: tooLong is
// true. err is io.EOF after the last line.
func readLine(rd *bufio.Reader, buf []byte, limit int64) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := rd.ReadSlice('\n')
		if !tooLong {
			if int64(len(buf)+len(chunk)) > limit+2 {
				tooLong, buf = true, buf[:0]
			} else {
				buf = append(buf, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		buf = bytes.TrimSuffix(buf, []byte("\n"))
		buf = bytes.TrimSuffix(buf, []byte("\r"))
		if !tooLong && int64(len(buf)) > limit {
			tooLong, buf = true, buf[:0]
		}
		return buf, tooLong, err
	}
}

// appendErrorObject appends the error object `{"code":...}` of e.
func appendErrorObject(b []byte, e wire.Error) []byte {
	b = append(b, `{"code":`...)
	b = appendString(b, e.Code)
	b = append(b, `,"message":`...)
	b = appendString(b, e.Message)
	b = append(b, `,"field":`...)
	b = appendString(b, e.Field)
	return append(b, '}')
}
