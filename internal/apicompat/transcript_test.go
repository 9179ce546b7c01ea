package apicompat_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// update rewrites the transcripts instead of comparing with them: a
// deliberate change of the API's behaviour, reviewed as their diff.
var update = flag.Bool("update", false, "rewrite the transcripts in testdata (a deliberate change of the API)")

// ulidPattern matches a generated job id (a ULID) anywhere in a transcript.
var ulidPattern = regexp.MustCompile(`\b[0-9A-HJKMNP-TV-Z]{26}\b`)

// placeholderPattern matches the placeholders a transcript holds.
var placeholderPattern = regexp.MustCompile(`<(id|lease)-[0-9]+>`)

// dynamicKeys are the JSON keys whose values differ from run to run,
// with the kind of placeholder that replaces them. Generated ids are found
// by their form instead, since the scenario chooses most ids itself, and
// cursors are ids.
var dynamicKeys = map[string]string{
	"lease": "lease",
	// A consumer's address (a job's history and trail): its port is the
	// client's, chosen by the system.
	"consumer": "consumer",
	// GET /v1/version: what built the server differs from one machine
	// and one commit to the next.
	"go_version": "go",
	"commit":     "commit",
}

// transcript records one scenario's requests and answers, normalized, and
// compares them with testdata/<name> at the end of the test.
type transcript struct {
	t    *testing.T
	name string
	buf  bytes.Buffer
	// placeholders maps a value seen in an answer to its placeholder, and
	// values the other way, so that a step can name a value by its
	// placeholder before it is sent.
	placeholders map[string]string
	values       map[string]string
	counts       map[string]int
	// complete is set once the whole scenario ran.
	complete bool
}

// newTranscript returns the transcript of testdata/name, checked (or
// rewritten with -update) when the test ends, if its scenario ran to the
// end (complete).
func newTranscript(t *testing.T, name string) *transcript {
	tr := &transcript{t: t, name: name, placeholders: map[string]string{}, values: map[string]string{}, counts: map[string]int{}}
	t.Cleanup(func() {
		// A scenario cut short by a failure would differ from the file
		// everywhere after it; with -update the file is written anyway,
		// to be read.
		if *update || tr.complete {
			tr.check()
		}
	})
	return tr
}

// remember gives value a placeholder of kind, unless it has one.
func (tr *transcript) remember(kind, value string) {
	if value == "" || tr.placeholders[value] != "" {
		return
	}
	tr.counts[kind]++
	p := fmt.Sprintf("<%s-%d>", kind, tr.counts[kind])
	tr.placeholders[value], tr.values[p] = p, value
}

// collect remembers the dynamic values of JSON documents (one, or NDJSON
// lines), in the order they appear. A body that is not JSON holds none.
func (tr *transcript) collect(body []byte) {
	dec := json.NewDecoder(bytes.NewReader(body))
	// inObject and wantKey say, for each open container, whether it is an
	// object and whether its next string is a key.
	var inObject, wantKey []bool
	var key string
	for {
		tok, err := dec.Token()
		if err != nil {
			return
		}
		top := len(inObject) - 1
		isKey := top >= 0 && inObject[top] && wantKey[top]
		if top >= 0 && inObject[top] {
			wantKey[top] = !wantKey[top]
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				inObject, wantKey = append(inObject, v == '{'), append(wantKey, v == '{')
			default:
				inObject, wantKey = inObject[:top], wantKey[:top]
				// The container was a value: its parent's next string is
				// a key again, which the toggle above made wrong.
				if top > 0 && inObject[top-1] {
					wantKey[top-1] = true
				}
			}
			key = ""
		case string:
			if isKey {
				key = v
				continue
			}
			if kind := dynamicKeys[key]; kind != "" {
				tr.remember(kind, v)
			}
			key = ""
		default:
			key = ""
		}
	}
}

// normalize replaces every value remembered so far, and every ULID (which
// it remembers as an id), by its placeholder, and no-break spaces by
// spaces.
func (tr *transcript) normalize(s string) string {
	for _, id := range ulidPattern.FindAllString(s, -1) {
		tr.remember("id", id)
	}
	values := make([]string, 0, len(tr.placeholders))
	for v := range tr.placeholders {
		values = append(values, v)
	}
	// Longest first, so that no value is cut by a shorter one in it.
	slices.SortFunc(values, func(a, b string) int { return len(b) - len(a) })
	for _, v := range values {
		s = strings.ReplaceAll(s, v, tr.placeholders[v])
	}
	// protobuf-go puts a no-break space instead of a space after "proto:"
	// in its error messages, chosen by a hash of the binary, so that no one
	// matches them: one build's answer would differ from another's.
	return strings.ReplaceAll(s, "\u00a0", " ")
}

// resolve replaces the placeholders in s by their values, for a request
// written with them.
func (tr *transcript) resolve(s string) string {
	return placeholderPattern.ReplaceAllStringFunc(s, func(p string) string {
		v, ok := tr.values[p]
		if !ok {
			tr.t.Fatalf("%s: the scenario names %s before any answer gave it", tr.name, p)
		}
		return v
	})
}

// section starts the record of one step.
func (tr *transcript) section(title string) {
	if tr.buf.Len() > 0 {
		tr.buf.WriteByte('\n')
	}
	fmt.Fprintf(&tr.buf, "### %s\n", title)
}

// lines records text, each line after prefix, normalized.
func (tr *transcript) lines(prefix, text string) {
	text = tr.normalize(text)
	for l := range strings.SplitSeq(strings.TrimRight(text, "\n"), "\n") {
		tr.buf.WriteString(strings.TrimRight(prefix+" "+l, " "))
		tr.buf.WriteByte('\n')
	}
}

// check compares the transcript with its file, or rewrites the file with
// -update.
func (tr *transcript) check() {
	path := filepath.Join("testdata", tr.name)
	got := tr.buf.String()
	if *update {
		require.NoError(tr.t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(tr.t, err, "no transcript: run go test ./internal/apicompat -update once, and review it")
	if got != string(want) {
		tr.t.Errorf("the API answered otherwise than %s records (- recorded, + now):\n%s\n"+
			"If the change is meant, run go test ./internal/apicompat -update, review the diff and add a CHANGELOG line.",
			path, lineDiff(string(want), got))
	}
}

// indentJSON re-indents a JSON document the same way whatever its
// whitespace, keeping its keys' order; it returns other text as it is.
func indentJSON(b []byte) string {
	var out bytes.Buffer
	if err := json.Indent(&out, bytes.TrimSpace(b), "", "  "); err != nil {
		return string(b)
	}
	return out.String()
}

// clip shortens a request body that is only there for its size.
func clip(body string) string {
	if len(body) <= 1000 {
		return body
	}
	return fmt.Sprintf("%s... (%d bytes)", body[:60], len(body))
}

// lineDiff returns the lines that differ between want and got, with two
// lines of context, as "-" (want) and "+" (got) lines in hunks headed by
// their line in want: a longest common subsequence over the part between
// the common head and tail.
func lineDiff(want, got string) string {
	a, b := strings.Split(want, "\n"), strings.Split(got, "\n")
	head := 0
	for head < len(a) && head < len(b) && a[head] == b[head] {
		head++
	}
	tail := 0
	for tail < len(a)-head && tail < len(b)-head && a[len(a)-1-tail] == b[len(b)-1-tail] {
		tail++
	}
	ma, mb := a[head:len(a)-tail], b[head:len(b)-tail]
	if len(ma)*len(mb) > 4_000_000 {
		return fmt.Sprintf("(too many changes to show: from line %d)\n- %s\n+ %s", head+1, strings.Join(ma, "\n- "), strings.Join(mb, "\n+ "))
	}
	// lcs[i][j] is the length of the longest common subsequence of ma[i:]
	// and mb[j:].
	lcs := make([][]int32, len(ma)+1)
	for i := range lcs {
		lcs[i] = make([]int32, len(mb)+1)
	}
	for i := len(ma) - 1; i >= 0; i-- {
		for j := len(mb) - 1; j >= 0; j-- {
			if ma[i] == mb[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	// ops are the diff's lines, with the line of want each is at.
	type op struct {
		mark byte
		line int
		text string
	}
	var ops []op
	for l := max(0, head-2); l < head; l++ {
		ops = append(ops, op{' ', l + 1, a[l]})
	}
	i, j := 0, 0
	for i < len(ma) || j < len(mb) {
		switch {
		case i < len(ma) && j < len(mb) && ma[i] == mb[j]:
			ops = append(ops, op{' ', head + i + 1, ma[i]})
			i, j = i+1, j+1
		case i < len(ma) && (j == len(mb) || lcs[i+1][j] >= lcs[i][j+1]):
			ops = append(ops, op{'-', head + i + 1, ma[i]})
			i++
		default:
			ops = append(ops, op{'+', head + i + 1, mb[j]})
			j++
		}
	}
	for l := len(a) - tail; l < min(len(a), len(a)-tail+2); l++ {
		ops = append(ops, op{' ', l + 1, a[l]})
	}
	// Print the changed lines with two lines of context, each hunk headed
	// by its line in want and the step it is in.
	const context = 2
	var out strings.Builder
	last := -2
	for k, o := range ops {
		near := false
		for d := max(0, k-context); d <= min(len(ops)-1, k+context); d++ {
			near = near || ops[d].mark != ' '
		}
		if !near {
			continue
		}
		if last != k-1 {
			step := ""
			for l := min(o.line, len(a)) - 1; l >= 0; l-- {
				if strings.HasPrefix(a[l], "### ") {
					step = a[l]
					break
				}
			}
			fmt.Fprintf(&out, "@@ line %d, in %s\n", o.line, step)
		}
		fmt.Fprintf(&out, "%c %s\n", o.mark, o.text)
		last = k
	}
	return out.String()
}
