package httptransport

import (
	"net/http"
	"strconv"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/service"
	"github.com/delayq/delayq/transports/wire"
)

// listTopics serves GET /v1/topics: every topic that is configured or has
// jobs, with counts, sorted by name; for a token restricted to some topics,
// only those.
func (s *Server) listTopics(w http.ResponseWriter, r *http.Request) error {
	ts, err := s.svc.ListTopics(r.Context())
	if err != nil {
		return err
	}
	v := topicListView{Topics: make([]topicView, 0, len(ts))}
	for _, t := range ts {
		v.Topics = append(v.Topics, newTopicView(t))
	}
	s.writeJSON(w, r, http.StatusOK, v)
	return nil
}

// getTopic serves GET /v1/topics/{topic}: its configuration with defaults
// filled and its counts; 404 when the topic is neither configured nor has
// jobs.
func (s *Server) getTopic(w http.ResponseWriter, r *http.Request) error {
	t, err := s.svc.GetTopic(r.Context(), r.PathValue("topic"))
	if err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, newTopicView(t))
	return nil
}

// putTopic serves PUT /v1/topics/{topic}: it stores the configuration and
// answers 200 with it as GET shows it.
func (s *Server) putTopic(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("topic")
	data, release, err := readBody(w, r, wire.SmallRequestBytes)
	if err != nil {
		return err
	}
	t, err := decodeTopicRequest(name, data)
	release()
	if err != nil {
		return err
	}
	stored, err := s.svc.PutTopic(r.Context(), t)
	if err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, newTopicView(stored))
	return nil
}

// deleteTopic serves DELETE /v1/topics/{topic}: 204 when its configuration
// was dropped (its jobs stay); 404 when it had none.
func (s *Server) deleteTopic(w http.ResponseWriter, r *http.Request) error {
	if err := s.svc.DeleteTopic(r.Context(), r.PathValue("topic")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// pauseTopic serves POST /v1/topics/{topic}/pause: the topic's deliveries
// stop on every instance (claims take nothing, push deliveries stop) while
// intake goes on. 200 with the topic as GET shows it.
func (s *Server) pauseTopic(w http.ResponseWriter, r *http.Request) error {
	return s.setPaused(w, r, true)
}

// resumeTopic serves POST /v1/topics/{topic}/resume: deliveries start
// again. 200 with the topic as GET shows it.
func (s *Server) resumeTopic(w http.ResponseWriter, r *http.Request) error {
	return s.setPaused(w, r, false)
}

func (s *Server) setPaused(w http.ResponseWriter, r *http.Request, paused bool) error {
	t, err := s.svc.SetTopicPaused(r.Context(), r.PathValue("topic"), paused)
	if err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, newTopicView(t))
	return nil
}

// listDead serves GET /v1/topics/{topic}/dead?limit=100: up to limit dead
// jobs of the topic, oldest death first, as GET shows jobs.
func (s *Server) listDead(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryLimit(r, core.DeadLimitMax)
	if err != nil {
		return err
	}
	jobs, err := s.svc.ListDead(r.Context(), &core.ListDeadJobsParams{Topic: r.PathValue("topic"), Limit: limit})
	if err != nil {
		return err
	}
	writeJobList(w, jobs, appendJob, nil)
	return nil
}

// queryLimit returns the query's limit, service.ListLimitDefault when it has none;
// the engine checks its range.
func queryLimit(r *http.Request, max int) (int, error) {
	q := r.URL.Query()
	if !q.Has("limit") {
		return service.ListLimitDefault, nil
	}
	n, err := strconv.Atoi(q.Get("limit"))
	if err != nil {
		return 0, core.Invalid("limit", "limit must be an integer between 1 and %d", max)
	}
	return n, nil
}

// findJobs serves GET /v1/topics/{topic}/jobs: with key=K&after=ID&limit=100
// the topic's jobs with business key K in id order, those after the id ID,
// and a full page also says "next_after", the after of the next page; with
// state=S (listJobs) the topic's jobs in state S. Each job as GET shows it.
func (s *Server) findJobs(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	switch {
	case q.Has("key") && q.Has("state"):
		return core.Invalid("state", "key and state exclude each other")
	case q.Has("state"):
		return s.listJobs(w, r)
	case !q.Has("key"):
		return core.Invalid("key", "key or state is required: /v1/topics/{topic}/jobs?state=ready or ?key=...")
	}
	limit, err := queryLimit(r, core.FindLimitMax)
	if err != nil {
		return err
	}
	jobs, next, err := s.svc.FindJobs(r.Context(), &core.FindJobsParams{
		Topic: r.PathValue("topic"), Key: q.Get("key"), After: q.Get("after"), Limit: limit})
	if err != nil {
		return err
	}
	writeJobList(w, jobs, appendJob, pageTail(next, -1))
	return nil
}

// listJobs serves GET /v1/topics/{topic}/jobs?state=S&after=C&limit=100: a
// page of the topic's jobs in state S (core.Store.ListJobs), with
// "next_after" when there may be more. With contains=TEXT it answers the
// jobs whose body holds TEXT among at most scan jobs read from after
// (core.Engine.SearchJobs), and adds "scanned".
func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, err := queryLimit(r, core.ListLimitMax)
	if err != nil {
		return err
	}
	p := core.SearchJobsParams{ListJobsParams: core.ListJobsParams{
		Topic: r.PathValue("topic"), State: core.State(q.Get("state")), After: q.Get("after"), Limit: limit,
	}, Contains: q.Get("contains")}
	switch {
	case !q.Has("scan"):
	case !q.Has("contains"):
		return core.Invalid("scan", "scan needs contains")
	default:
		if p.Scan, err = strconv.Atoi(q.Get("scan")); err != nil || p.Scan < 1 {
			return core.Invalid("scan", "scan must be an integer between 1 and %d", core.ListScanMax)
		}
	}
	jobs, next, scanned, err := s.svc.ListJobs(r.Context(), &p, q.Has("contains"))
	if err != nil {
		return err
	}
	writeJobList(w, jobs, appendJob, pageTail(next, scanned))
	return nil
}

// pageTail appends the fields of a page of a listing after its jobs:
// "next_after" when next is set and "scanned" when not negative.
func pageTail(next string, scanned int) func([]byte) []byte {
	return func(b []byte) []byte {
		if next != "" {
			b = appendString(append(b, `,"next_after":`...), next)
		}
		if scanned >= 0 {
			b = strconv.AppendInt(append(b, `,"scanned":`...), int64(scanned), 10)
		}
		return b
	}
}

// cancelByKeyView is the answer to DELETE /v1/topics/{topic}/jobs?key=K.
type cancelByKeyView struct {
	// Cancelled are the ids of the jobs cancelled, in id order.
	Cancelled []string `json:"cancelled"`
	// Reserved are the ids of the jobs left because a consumer holds them.
	Reserved []string `json:"reserved"`
}

// cancelByKey serves DELETE /v1/topics/{topic}/jobs?key=K: it cancels the
// topic's unfinished jobs with business key K and answers 200 with the ids
// it cancelled and those it left because they are reserved.
func (s *Server) cancelByKey(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if !q.Has("key") {
		return core.Invalid("key", "key is required: /v1/topics/{topic}/jobs?key=...")
	}
	res, err := s.svc.CancelByKey(r.Context(), r.PathValue("topic"), q.Get("key"))
	if err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, cancelByKeyView{Cancelled: res.Cancelled, Reserved: res.Reserved})
	return nil
}
