package main

import (
	"encoding/json"
	"net/http"
	"time"
)

// claimAndAck is the consumer of the end-to-end load tests: it claims jobs
// of topic from the service at base, up to 100 at a time waiting up to wait
// for them, and acknowledges each batch in one call, until stop is closed.
// It calls claimed with the IDs of each batch claimed, before their ack,
// and acked, after each ack call answered in full, with the IDs whose
// acknowledgement succeeded (perhaps none). A failed claim is tried again
// 50 ms later, not to spin; a job whose ack failed comes again after its
// ttr.
func claimAndAck(hc *http.Client, base, topic, wait string, stop <-chan struct{}, claimed, acked func(ids []string)) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		status, answer, err := postJSON(hc, base, "/v1/topics/"+topic+"/claim", map[string]any{"max": 100, "wait": wait})
		if err != nil || status != http.StatusOK {
			time.Sleep(50 * time.Millisecond) // failing: do not spin
			continue
		}
		var out struct {
			Jobs []struct {
				ID    string `json:"id"`
				Lease string `json:"lease"`
			} `json:"jobs"`
		}
		if json.Unmarshal(answer, &out) != nil || len(out.Jobs) == 0 {
			continue
		}
		ids := make([]string, len(out.Jobs))
		acks := make([]map[string]string, len(out.Jobs))
		for i, d := range out.Jobs {
			ids[i] = d.ID
			acks[i] = map[string]string{"id": d.ID, "lease": d.Lease}
		}
		claimed(ids)
		status, answer, err = postJSON(hc, base, "/v1/acks", map[string]any{"acks": acks})
		if err != nil || status != http.StatusOK {
			continue // delivered again after the ttr
		}
		var settled struct {
			Results []struct {
				Error *struct{ Code string } `json:"error"`
			} `json:"results"`
		}
		if json.Unmarshal(answer, &settled) != nil || len(settled.Results) != len(acks) {
			continue
		}
		var ok []string
		for i, r := range settled.Results {
			if r.Error == nil {
				ok = append(ok, ids[i])
			}
		}
		acked(ok)
	}
}
