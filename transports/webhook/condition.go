package webhook

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/interpreter"
)

// Limits of delivery.success conditions, which whoever may configure a
// topic writes and every delivery of the topic runs.
const (
	// MaxConditionLen bounds the source of a delivery.success condition.
	MaxConditionLen = 4096
	// MaxConditionCost bounds the cost of one evaluation of a condition, in
	// CEL cost units: one per operation, plus one per 10 characters, bytes
	// or entries of the strings and lists an operation reads or builds (see
	// runtimeCost), so that it bounds the memory an evaluation allocates
	// too, to about 10 MB. An evaluation that reaches it stops with an
	// error.
	MaxConditionCost = 1_000_000
	// MaxConditionEstimatedCost bounds the worst cost CEL estimates for a
	// condition over an answer of MaxAnswerBytes, checked when the topic is
	// set. The estimate multiplies the sizes of nested iterations as if each
	// could hold the whole answer, so it is far above what evaluations
	// cost; it refuses what is explosive (a macro over the body nested in
	// another) and leaves the rest to MaxConditionCost.
	MaxConditionEstimatedCost = 100 * MaxConditionCost
	// maxConditionDepth bounds the nesting of a condition's syntax.
	maxConditionDepth = 32
	// interruptCheckFrequency is how many iterations of a comprehension run
	// between checks of the delivery's context.
	interruptCheckFrequency = 64
)

// conditionCacheSize bounds the compiled conditions kept; past it the cache
// starts over, which costs a recompile per topic and nothing else.
const conditionCacheSize = 1024

// conditionEnv is the CEL environment of delivery.success: status, body
// and headers, CEL's standard functions and macros, and comparisons
// between numbers of different types (a JSON number is a double, so that
// body.code < 5 compares a double with an int).
var conditionEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("status", cel.IntType),
		cel.Variable("body", cel.DynType),
		cel.Variable("headers", cel.MapType(cel.StringType, cel.StringType)),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
		cel.ParserRecursionLimit(maxConditionDepth),
		cel.ParserExpressionSizeLimit(MaxConditionLen),
	)
})

// compileMu serialises the compiles of conditions (compile).
var compileMu sync.Mutex

// conditions compiles conditions and caches them by source, so that
// deliveries do not compile them again. Programs are immutable and safe to
// run concurrently.
type conditions struct {
	// maxAnswer bounds the sizes of body and headers for the cost estimate.
	maxAnswer int64

	mu       sync.Mutex
	programs map[string]cel.Program
}

// compile returns the program of a condition source, compiling it on first
// use. It refuses a source that is too long or blank, does not compile to a
// boolean, or whose estimated cost over an answer of maxAnswer bytes
// exceeds MaxConditionCost. The error is one line.
func (c *conditions) compile(src string) (cel.Program, error) {
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
	env, err := conditionEnv()
	if err != nil {
		return nil, fmt.Errorf("condition environment: %w", err)
	}
	// cel-go's checker copies the shared environment's declarations
	// without a lock (a race CI's -race found between two compiles):
	// compiles, rare since cached, take turns.
	compileMu.Lock()
	defer compileMu.Unlock()
	ast, iss := env.Compile(src)
	if err := iss.Err(); err != nil {
		return nil, errors.New(celMessage(err))
	}
	if t := ast.OutputType(); !t.IsExactType(cel.BoolType) && !t.IsExactType(cel.DynType) {
		return nil, fmt.Errorf("condition must be a bool, not %s", t)
	}
	est, err := env.EstimateCost(ast, sizeEstimator{maxAnswer: uint64(c.maxAnswer)})
	if err != nil {
		return nil, fmt.Errorf("estimating the condition's cost: %s", celMessage(err))
	}
	if est.Max > MaxConditionEstimatedCost {
		return nil, fmt.Errorf("condition may cost up to %s over an answer of %d bytes, more than the limit of %d; iterate over less (macros such as all and exists nested over the body multiply)",
			costString(est.Max), c.maxAnswer, MaxConditionEstimatedCost)
	}
	p, err = env.Program(ast,
		cel.CostTracking(runtimeCost{}),
		cel.CostLimit(MaxConditionCost),
		cel.InterruptCheckFrequency(interruptCheckFrequency),
	)
	if err != nil {
		return nil, errors.New(celMessage(err))
	}
	c.mu.Lock()
	if c.programs == nil || len(c.programs) >= conditionCacheSize {
		c.programs = make(map[string]cel.Program)
	}
	c.programs[src] = p
	c.mu.Unlock()
	return p, nil
}

// costString renders a cost estimate, "unbounded" for CEL's saturated
// maximum.
func costString(c uint64) string {
	if c == ^uint64(0) {
		return "unbounded"
	}
	return fmt.Sprint(c)
}

// sizeEstimator tells CEL's cost estimate how large body and headers, and
// anything in them, can be: at most maxAnswer entries or bytes, as the
// answer read is at most maxAnswer bytes and its headers at most
// maxAnswerHeaderBytes.
type sizeEstimator struct{ maxAnswer uint64 }

// EstimateSize implements cost.Estimator.
func (e sizeEstimator) EstimateSize(n cost.AstNode) *cost.SizeEstimate {
	path := n.Path()
	if len(path) == 0 {
		return nil
	}
	var sz cost.SizeEstimate
	switch path[0] {
	case "body":
		sz = cost.RangedSizeEstimate(0, e.maxAnswer)
	case "headers":
		sz = cost.RangedSizeEstimate(0, maxAnswerHeaderBytes)
	default:
		return nil
	}
	return &sz
}

// EstimateCallCost implements cost.Estimator: the standard estimates.
func (sizeEstimator) EstimateCallCost(string, string, *cost.AstNode, []cost.AstNode) *cost.CallEstimate {
	return nil
}

// Cost factors of CEL's standard cost model, which runtimeCost applies.
const (
	stringTraversalCostFactor   = 0.1
	regexStringLengthCostFactor = 0.25
)

// runtimeCost adds to CEL's run-time cost what its standard trackers miss:
// a call over dyn values (body and anything in it) is dispatched at run
// time without an overload ID, and CEL then counts it as 1 whatever the
// size of its strings and lists, so that body.s + body.s over a 64 KiB
// string would cost as little as 1 + 1. Such a call costs here in
// proportion to the sizes of its arguments and result, as its typed
// overload would; matches in proportion to the product of the string's and
// the pattern's.
type runtimeCost struct{}

// CallCost implements cost.ActualCostEstimator; nil leaves a call with an
// overload ID to CEL's standard trackers.
func (runtimeCost) CallCost(function, overloadID string, args []ref.Val, result ref.Val) *uint64 {
	if overloadID != "" {
		return nil
	}
	var c uint64
	if function == "matches" && len(args) == 2 {
		c = cost.SafeMultiply(
			cost.SafeMultiplyByFactor(sizeOf(args[0])+1, stringTraversalCostFactor),
			cost.SafeMultiplyByFactor(sizeOf(args[1]), regexStringLengthCostFactor))
	} else {
		n := sizeOf(result)
		for _, a := range args {
			n = cost.SafeAdd(n, sizeOf(a))
		}
		c = cost.SafeMultiplyByFactor(n, stringTraversalCostFactor)
	}
	c = cost.SafeAdd(c, 1)
	return &c
}

// sizeOf returns the size CEL gives a value: characters of a string, bytes,
// entries of a list or map; 0 for other values.
func sizeOf(v ref.Val) uint64 {
	if s, ok := v.(traits.Sizer); ok {
		if n, ok := s.Size().(types.Int); ok && n > 0 {
			return uint64(n)
		}
	}
	return 0
}

// answer is the environment a delivery.success condition is evaluated in.
type answer struct {
	// Status is the HTTP status code of the answer.
	Status int
	// Body is the answer parsed as JSON, nil when it is not JSON.
	Body any
	// Headers holds the first value of each header, by canonical name.
	Headers map[string]string
}

// errConditionLimit is wrapped by the errors of evaluations stopped by
// MaxConditionCost.
var errConditionLimit = errors.New("condition stopped")

// eval runs a compiled condition over an answer. It stops when a limit is
// reached, with an error wrapping errConditionLimit, or when ctx is done,
// with an error wrapping ctx's.
func eval(ctx context.Context, p cel.Program, a *answer) (bool, error) {
	out, _, err := p.ContextEval(ctx, map[string]any{
		"status":  a.Status,
		"body":    a.Body,
		"headers": a.Headers,
	})
	if err == nil && types.IsError(out) {
		err, _ = out.Value().(error)
	}
	if err != nil {
		if cancelled, ok := errors.AsType[interpreter.EvalCancelledError](err); ok {
			switch cancelled.Cause {
			case interpreter.CostLimitExceeded:
				return false, fmt.Errorf("%w: it reached the cost limit of %d", errConditionLimit, MaxConditionCost)
			}
		}
		if ctx.Err() != nil {
			return false, fmt.Errorf("condition interrupted: %w", context.Cause(ctx))
		}
		return false, errors.New(celMessage(err))
	}
	ok, isBool := out.Value().(bool)
	if !isBool {
		return false, fmt.Errorf("condition returned %s, not bool", out.Type())
	}
	return ok, nil
}

// celMessage renders a CEL error on one line, without CEL's source
// snippet: "ERROR: <input>:1:8: Syntax error: ..." becomes
// "1:8: syntax error: ...".
func celMessage(err error) string {
	msg := err.Error()
	var lines []string
	for line := range strings.SplitSeq(msg, "\n") {
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, "ERROR: <input>:"); ok {
			lines = append(lines, rest)
		}
	}
	if len(lines) == 0 {
		return strings.Join(strings.Fields(msg), " ")
	}
	return strings.Join(lines, "; ")
}
