package natsstore

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func TestZZProbe(t *testing.T) {
	b := setup(t)
	j := job("probe.topic", time.Hour)
	put(t, b.store, j)
	m, err := b.store.stream.GetLastMsgForSubject(context.Background(), b.store.names.jobFilter(j.ID))
	if err != nil {
		t.Fatal(err)
	}
	hl := 0
	for k, v := range m.Header {
		fmt.Printf("%s: %v\n", k, v)
		hl += len(k) + len(v[0]) + 4
	}
	fmt.Printf("subject %s (%d) header ~%d data %d: %q\n", m.Subject, len(m.Subject), hl, len(m.Data), m.Data)
}
