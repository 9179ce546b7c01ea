package httptransport

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/service"
	"github.com/delayq/delayq/transports/wire"
)

// ackBatch serves POST /v1/acks with {"acks": [{"id", "lease"}, ...]}: 200
// with one result per ack, in order, {"id"} when the delivery is done,
// {"id", "error"} otherwise, each ack failing on its own as POST
// /v1/jobs/{id}/ack would (service.AckBatch, which writes them together).
// An empty list is 400, more than the engine's MaxBatch 413, and when every
// ack failed with a server-side error the request is answered with that
// error instead.
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
	ids := make([]string, n)
	errs, err := s.svc.AckBatch(r.Context(), n, func(i int) (core.AckJobParams, error) {
		it, err := itemAt("acks", items, raw, i)
		if it == nil {
			ids[i] = itemID(raw[i])
			return core.AckJobParams{}, err
		}
		ids[i] = it.ID
		return core.AckJobParams{ID: it.ID, Lease: it.Lease}, nil
	})
	if err != nil {
		return err
	}
	return s.writeItemResults(w, r, ids, errs)
}

// nackBatch serves POST /v1/nacks with {"nacks": [{"id", "lease", "delay",
// "error"}, ...]}: each nack is what POST /v1/jobs/{id}/nack does, and the
// answer, caps and whole-request errors are those of POST /v1/acks. Nacks
// are the failure path, so they are not written together
// (service.NackBatch).
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
	ids := make([]string, n)
	errs, err := s.svc.NackBatch(r.Context(), n, func(i int) (*core.NackParams, error) {
		it, err := itemAt("nacks", items, raw, i)
		if it == nil {
			ids[i] = itemID(raw[i])
			return nil, err
		}
		ids[i] = it.ID
		return it.params()
	})
	if err != nil {
		return err
	}
	return s.writeItemResults(w, r, ids, errs)
}

// writeItemResults answers 200 {"results": [{"id"} | {"id", "error"}, ...]}
// for the items named ids ("" when one named none) and their errors.
func (s *Server) writeItemResults(w http.ResponseWriter, r *http.Request, ids []string, errs []error) error {
	b := make([]byte, 0, 16+len(ids)*48)
	b = append(b, `{"results":[`...)
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = appendString(b, id)
		if errs[i] != nil {
			b = append(b, ',')
			b = appendErrorFields(b, s.apiError(r, errs[i]))
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
	if err := wire.DecodeObject(data, "", &env); err != nil {
		return nil, nil, err
	}
	return decodeItems[ackItem]("acks", env.Acks, limit)
}

// decodeNackBatch decodes the body of POST /v1/nacks as decodeAckBatch does
// that of POST /v1/acks.
func decodeNackBatch(data []byte, limit int) ([]*nackItem, []json.RawMessage, error) {
	var env nackBatchRequest
	if err := wire.DecodeObject(data, "", &env); err != nil {
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
// set. A list that is absent, null or not an array is a *core.FieldError
// on field wrapping core.ErrInvalidArgument; service.CheckBatchLimit
// judges the count, limit at most, before any item is decoded.
func decodeItems[T any](field string, list json.RawMessage, limit int) (items []*T, raw []json.RawMessage, err error) {
	list = trimJSONSpace(list)
	n := 0
	if !isNull(list) {
		if list[0] != '[' {
			return nil, nil, core.Invalid(field, "%s must be an array", field)
		}
		n = countItems(list)
	}
	if err := service.CheckBatchLimit(field, n, limit); err != nil {
		return nil, nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(list))
	dec.DisallowUnknownFields()
	if dec.Decode(&items) == nil && !slices.Contains(items, nil) {
		return items, nil, nil
	}
	if err := json.Unmarshal(list, &raw); err != nil {
		return nil, nil, wire.DecodeError(field, err)
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
	if err := wire.DecodeObject(raw[i], "", it); err != nil {
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
