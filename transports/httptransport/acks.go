package httptransport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/delayq/delayq/core"
)

// ackBatch serves POST /v1/acks with {"acks": [{"id", "lease"}, ...]}: 200
// with one result per ack, in order, {"id"} when the delivery is done,
// {"id", "error"} otherwise, each ack failing on its own as POST
// /v1/jobs/{id}/ack would. The acks that pass decoding and the token's check
// go to Engine.AckBatch, which writes them together. An empty list is 400,
// more than the engine's MaxBatch 413, and when every ack failed with a
// server-side error the request is answered with that error instead.
func (s *Server) ackBatch(w http.ResponseWriter, r *http.Request) error {
	data, release, err := readBody(w, r, s.maxRequestBytes)
	if err != nil {
		return err
	}
	items, raw, err := decodeAckBatch(data, s.engine.Limits().MaxBatch)
	release()
	if err != nil {
		return err
	}
	n := max(len(items), len(raw))

	results := make([]itemResult, n)
	acks := make([]core.AckJobParams, 0, n)
	idx := make([]int, 0, n)
	for i := range n {
		it, err := itemAt("acks", items, raw, i)
		if it == nil {
			results[i] = itemResult{id: itemID(raw[i]), err: err}
			continue
		}
		results[i].id = it.ID
		if err := s.allowJob(r, it.ID); err != nil {
			results[i].err = err
			continue
		}
		acks = append(acks, core.AckJobParams{ID: it.ID, Lease: it.Lease})
		idx = append(idx, i)
	}
	items, raw = nil, nil
	if len(acks) > 0 {
		errs, err := s.engine.AckBatch(r.Context(), &core.AckJobsParams{Acks: acks})
		if err != nil {
			return err
		}
		for k, err := range errs {
			results[idx[k]].err = err
		}
	}
	return s.writeItemResults(w, r, "acks", results)
}

// nackBatch serves POST /v1/nacks with {"nacks": [{"id", "lease", "delay",
// "error"}, ...]}: each nack is what POST /v1/jobs/{id}/nack does, and the
// answer, caps and whole-request errors are those of POST /v1/acks. Nacks
// are the failure path, so they are not written together: each goes to
// Engine.Nack on its own, in order.
func (s *Server) nackBatch(w http.ResponseWriter, r *http.Request) error {
	data, release, err := readBody(w, r, s.maxRequestBytes)
	if err != nil {
		return err
	}
	items, raw, err := decodeNackBatch(data, s.engine.Limits().MaxBatch)
	release()
	if err != nil {
		return err
	}
	n := max(len(items), len(raw))

	results := make([]itemResult, n)
	for i := range n {
		it, err := itemAt("nacks", items, raw, i)
		if it == nil {
			results[i] = itemResult{id: itemID(raw[i]), err: err}
			continue
		}
		results[i].id = it.ID
		// The token's check comes first, as on the single route.
		err = s.allowJob(r, it.ID)
		var p *core.NackParams
		if err == nil {
			p, err = it.params()
		}
		if err == nil {
			err = s.engine.Nack(r.Context(), p)
		}
		results[i].err = err
	}
	return s.writeItemResults(w, r, "nacks", results)
}

// itemResult is the outcome of one item of an ack or nack batch: the id it
// named ("" when it named none) and its error, nil when settled.
type itemResult struct {
	id  string
	err error
}

// writeItemResults answers 200 {"results": [{"id"} | {"id", "error"}, ...]}.
// Server-side failures are logged once per batch; when every item failed
// with one, the request is answered with the first of them instead, so that
// clients retry it as one.
func (s *Server) writeItemResults(w http.ResponseWriter, r *http.Request, noun string, results []itemResult) error {
	var serverErr error
	serverErrs := 0
	for _, res := range results {
		if res.err != nil && toAPIError(res.err).Status >= http.StatusInternalServerError {
			serverErr = cmpErr(serverErr, res.err)
			serverErrs++
		}
	}
	if serverErrs == len(results) {
		return serverErr
	}
	if serverErr != nil {
		s.logError(r, toAPIError(serverErr), fmt.Errorf("%d %s of the batch failed server-side, the first: %w", serverErrs, noun, serverErr))
	}

	b := make([]byte, 0, 16+len(results)*48)
	b = append(b, `{"results":[`...)
	for i, res := range results {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = appendString(b, res.id)
		if res.err != nil {
			b = append(b, ',')
			b = appendErrorFields(b, s.apiError(r, describeLease(res.err, res.id)))
		}
		b = append(b, '}')
	}
	b = append(b, "]}"...)
	writeRaw(w, http.StatusOK, b)
	return nil
}

// decodeAckBatch decodes the body of POST /v1/acks, at most limit acks, as
// decodeItems does its list; the body itself must be a well-formed object.
func decodeAckBatch(data []byte, limit int) ([]*ackItem, []json.RawMessage, error) {
	var env ackBatchRequest
	if err := decodeObject(data, "", &env); err != nil {
		return nil, nil, err
	}
	return decodeItems[ackItem]("acks", env.Acks, limit)
}

// decodeNackBatch decodes the body of POST /v1/nacks as decodeAckBatch does
// that of POST /v1/acks.
func decodeNackBatch(data []byte, limit int) ([]*nackItem, []json.RawMessage, error) {
	var env nackBatchRequest
	if err := decodeObject(data, "", &env); err != nil {
		return nil, nil, err
	}
	return decodeItems[nackItem]("nacks", env.Nacks, limit)
}

// ackBatchRequest is the wire form of POST /v1/acks; the list is decoded by
// decodeItems so that one bad ack fails alone.
type ackBatchRequest struct {
	Acks json.RawMessage `json:"acks"`
}

// nackBatchRequest is the wire form of POST /v1/nacks.
type nackBatchRequest struct {
	Nacks json.RawMessage `json:"nacks"`
}

// ackItem is the wire form of one ack of POST /v1/acks.
type ackItem struct {
	ID    string `json:"id"`
	Lease string `json:"lease"`
}

// nackItem is the wire form of one nack of POST /v1/nacks: the fields of
// POST /v1/jobs/{id}/nack and the job's id.
type nackItem struct {
	ID    string          `json:"id"`
	Lease string          `json:"lease"`
	Delay json.RawMessage `json:"delay"`
	Error string          `json:"error"`
}

// params turns a decoded nack into the engine's parameters; a bad delay is
// a *core.FieldError on delay. The engine checks the rest.
func (it *nackItem) params() (*core.NackParams, error) {
	p := &core.NackParams{ID: it.ID, Lease: it.Lease, Error: it.Error}
	d, ok, err := parseDuration("delay", it.Delay)
	if err != nil {
		return nil, err
	}
	if ok {
		p.Delay = &d
	}
	return p, nil
}

// decodeItems decodes list, the array under field of a batch request
// already decoded as a whole (so valid JSON), into its 1 to limit items,
// strictly as decodeObject would. Most lists are well formed and decode in
// one pass; otherwise raw holds each item, to be decoded on its own by
// itemAt so that a bad item fails alone. So exactly one of items and raw is
// set. A list that is absent, null, empty or not an array is a
// *core.FieldError on field wrapping core.ErrInvalidArgument, one of more
// than limit items one wrapping core.ErrTooLarge, found before any item is
// decoded.
func decodeItems[T any](field string, list json.RawMessage, limit int) (items []*T, raw []json.RawMessage, err error) {
	list = trimJSONSpace(list)
	n := 0
	if !isNull(list) {
		if list[0] != '[' {
			return nil, nil, core.Invalid(field, "%s must be an array", field)
		}
		n = countItems(list)
	}
	switch {
	case n == 0:
		return nil, nil, core.Invalid(field, "%s must hold at least one item", field)
	case n > limit:
		return nil, nil, core.TooLarge(field, "a batch holds at most %d %s, not %d", limit, field, n)
	}
	dec := json.NewDecoder(bytes.NewReader(list))
	dec.DisallowUnknownFields()
	if dec.Decode(&items) == nil && !slices.Contains(items, nil) {
		return items, nil, nil
	}
	if err := json.Unmarshal(list, &raw); err != nil {
		return nil, nil, decodeError(field, err)
	}
	return nil, raw, nil
}

// countItems counts the elements of list, a valid JSON array, without
// decoding them: the commas outside strings at its top level, so that a
// list over the cap costs no allocation.
func countItems(list []byte) int {
	if inner := trimJSONSpace(list[1:]); len(inner) == 0 || inner[0] == ']' {
		return 0
	}
	n, depth, inString, escaped := 1, 0, false, false
	for _, c := range list {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			depth++
		case ']', '}':
			depth--
		case ',':
			if depth == 1 {
				n++
			}
		}
	}
	return n
}

// itemAt returns item i of the list field decoded by decodeItems: from
// items, or decoded from raw[i] on its own. A raw item that fails to decode
// has no item and a *core.FieldError naming its field; the values are left
// to the caller.
func itemAt[T any](field string, items []*T, raw []json.RawMessage, i int) (*T, error) {
	if items != nil {
		return items[i], nil
	}
	if b := trimJSONSpace(raw[i]); len(b) == 0 || b[0] != '{' {
		return nil, core.Invalid("", "each item of %s must be a JSON object", field)
	}
	it := new(T)
	if err := decodeObject(raw[i], "", it); err != nil {
		return nil, err
	}
	return it, nil
}

// itemID returns the id that a batch item which failed to decode names, ""
// when it has no string id, so that its result still says which job it was.
func itemID(raw json.RawMessage) string {
	var v struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(raw, &v) != nil {
		return ""
	}
	var id string
	if json.Unmarshal(v.ID, &id) != nil {
		return ""
	}
	return id
}
