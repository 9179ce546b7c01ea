package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
)

// ErrExportTruncated is returned by Export and yielded by ExportSeq when
// the export ended before its last line: the service failed after it had
// begun, or the connection broke. It matches ErrUnavailable too.
var ErrExportTruncated = fmt.Errorf("delayq: the export was cut short: %w", ErrUnavailable)

// Export streams every scheduled, ready, reserved and dead job
// (GET /v1/export) to fn, one export line at a time, as it comes: the raw
// JSON object (decode it into a Job, or pass it to Import as a line). fn's
// line is valid only until fn returns. An error of fn stops the export and
// is returned. Errors: ErrPermissionDenied (admin), a 501 unimplemented,
// ErrUnavailable, ErrExportTruncated.
func (c *Client) Export(ctx context.Context, fn func(line json.RawMessage) error) error {
	return c.ExportWith(ctx, ExportOptions{}, fn)
}

// ExportOptions are the options of ExportWith.
type ExportOptions struct {
	// Plaintext asks a service with encryption at rest for the bodies in
	// clear (?plaintext=true), which it otherwise exports sealed.
	Plaintext bool
}

// ExportWith is Export with opts.
func (c *Client) ExportWith(ctx context.Context, opts ExportOptions, fn func(line json.RawMessage) error) error {
	for line, err := range c.exportSeq(ctx, opts) {
		if err != nil {
			return err
		}
		if err := fn(line); err != nil {
			return err
		}
	}
	return nil
}

// ExportSeq is Export as an iterator: it yields each export line, or an
// error (then nothing more). Stopping the loop ends the export. Each line
// is valid only until the next iteration.
func (c *Client) ExportSeq(ctx context.Context) iter.Seq2[json.RawMessage, error] {
	return c.exportSeq(ctx, ExportOptions{})
}

// exportSeq is ExportSeq with opts.
func (c *Client) exportSeq(ctx context.Context, opts ExportOptions) iter.Seq2[json.RawMessage, error] {
	var q url.Values
	if opts.Plaintext {
		q = url.Values{"plaintext": {"true"}}
	}
	return func(yield func(json.RawMessage, error) bool) {
		resp, err := c.send(ctx, &request{method: http.MethodGet, path: "/v1/export", query: q})
		if err != nil {
			yield(nil, err)
			return
		}
		defer resp.Body.Close()
		r := bufio.NewReaderSize(resp.Body, 64<<10)
		for {
			line, err := r.ReadSlice('\n')
			if errors.Is(err, bufio.ErrBufferFull) {
				// A line longer than the buffer: gather it whole.
				var buf bytes.Buffer
				buf.Write(line)
				for errors.Is(err, bufio.ErrBufferFull) {
					line, err = r.ReadSlice('\n')
					buf.Write(line)
				}
				line = buf.Bytes()
			}
			switch {
			case err == io.EOF && len(bytes.TrimSpace(line)) == 0:
				return
			case err == io.EOF:
				yield(nil, ErrExportTruncated)
				return
			case err != nil:
				if ctx.Err() != nil {
					yield(nil, fmt.Errorf("delayq: export: %w", ctx.Err()))
				} else {
					yield(nil, fmt.Errorf("%w: %w", ErrExportTruncated, err))
				}
				return
			}
			line = bytes.TrimSpace(line)
			if len(line) == 0 {
				continue
			}
			if !yield(json.RawMessage(line), nil) {
				return
			}
		}
	}
}

// Imported is the answer of Import.
type Imported struct {
	// Imported, Skipped and Failed count the lines: jobs created, jobs
	// skipped because their id is known, lines refused.
	Imported, Skipped, Failed int
	// Errors are the errors of the first 1000 failed lines.
	Errors []LineError
}

// LineError is why one line of an import failed.
type LineError struct {
	// Line is the 1-based line number.
	Line int
	// Err is the line's error, with its code, message and field.
	Err *APIError
}

// Import sends export lines (NDJSON, as Export gives them) from r
// (POST /v1/import), streaming, and returns the counts and the errors of
// the lines that failed: each bad line fails alone. A job whose id the
// service knows is skipped, so an import may be sent again. Errors:
// ErrPermissionDenied (admin), a 501 unimplemented, ErrUnavailable (send
// the whole body again).
func (c *Client) Import(ctx context.Context, r io.Reader) (*Imported, error) {
	var out struct {
		Imported int `json:"imported"`
		Skipped  int `json:"skipped"`
		Failed   int `json:"failed"`
		Errors   []struct {
			Line  int `json:"line"`
			Error *struct {
				Code    string `json:"code"`
				Message string `json:"message"`
				Field   string `json:"field"`
			} `json:"error"`
		} `json:"errors"`
	}
	if _, err := c.do(ctx, &request{method: http.MethodPost, path: "/v1/import", reader: r, contentType: "application/x-ndjson"}, &out); err != nil {
		return nil, err
	}
	res := &Imported{Imported: out.Imported, Skipped: out.Skipped, Failed: out.Failed}
	for _, e := range out.Errors {
		le := LineError{Line: e.Line, Err: &APIError{}}
		if e.Error != nil {
			le.Err = &APIError{Code: e.Error.Code, Message: e.Error.Message, Field: e.Error.Field}
		}
		res.Errors = append(res.Errors, le)
	}
	return res, nil
}
