package webhook

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/vm"
)

// MaxConditionLen bounds the source of a delivery.success condition.
const MaxConditionLen = 4096

// conditionCacheSize bounds the compiled conditions kept; past it the cache
// starts over, which costs a recompile per topic and nothing else.
const conditionCacheSize = 1024

// answer is the environment a delivery.success condition is evaluated in.
type answer struct {
	// Status is the HTTP status code of the answer.
	Status int `expr:"status"`
	// Body is the answer parsed as JSON, nil when it is not JSON.
	Body any `expr:"body"`
	// Headers holds the first value of each header, by canonical name.
	Headers map[string]string `expr:"headers"`
}

// conditions caches compiled conditions by source, so that deliveries do
// not compile them again. Programs are immutable and safe to run
// concurrently.
type conditions struct {
	mu       sync.Mutex
	programs map[string]*vm.Program
}

// compile returns the program of a condition source, compiling it on first
// use. The error is expr's message on one line.
func (c *conditions) compile(src string) (*vm.Program, error) {
	c.mu.Lock()
	p := c.programs[src]
	c.mu.Unlock()
	if p != nil {
		return p, nil
	}
	if len(src) > MaxConditionLen {
		return nil, fmt.Errorf("condition is %d bytes, more than the limit of %d", len(src), MaxConditionLen)
	}
	if strings.TrimSpace(src) == "" {
		return nil, errors.New("condition is blank")
	}
	p, err := expr.Compile(src, expr.Env(answer{}), expr.AsBool())
	if err != nil {
		return nil, errors.New(exprMessage(err))
	}
	c.mu.Lock()
	if c.programs == nil || len(c.programs) >= conditionCacheSize {
		c.programs = make(map[string]*vm.Program)
	}
	c.programs[src] = p
	c.mu.Unlock()
	return p, nil
}

// eval runs a compiled condition over an answer.
func eval(p *vm.Program, a *answer) (bool, error) {
	out, err := expr.Run(p, a)
	if err != nil {
		return false, errors.New(exprMessage(err))
	}
	ok, isBool := out.(bool)
	if !isBool {
		return false, fmt.Errorf("condition returned %T, not bool", out)
	}
	return ok, nil
}

// exprMessage renders an expr error on one line: the message and, when
// known, the line and column, without expr's multi-line source snippet.
func exprMessage(err error) string {
	var fe *file.Error
	if errors.As(err, &fe) {
		if fe.Line > 0 {
			return fmt.Sprintf("%s (%d:%d)", fe.Message, fe.Line, fe.Column)
		}
		return fe.Message
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}
