package policy

import (
	"errors"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
)

// maxCost bounds the work of one expression's evaluation (CEL's cost
// units: about one per operation and per element a comprehension
// visits), so that an expression over a large claim or argument cannot
// hold a request up.
const maxCost = 100_000

// env is the CEL environment of every expression: its variables.
var env = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("principal", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("kind", cel.StringType),
		cel.Variable("name", cel.StringType),
		cel.Variable("target", cel.StringType),
		cel.Variable("arguments", cel.MapType(cel.StringType, cel.DynType)),
	)
})

// compileWhen compiles a rule's expression, which must be boolean.
func compileWhen(src string) (cel.Program, error) {
	e, err := env()
	if err != nil {
		return nil, err
	}
	ast, iss := e.Compile(src)
	if iss.Err() != nil {
		return nil, errors.New(firstLine(iss.Err().Error()))
	}
	if t := ast.OutputType(); !t.IsExactType(cel.BoolType) && !t.IsExactType(cel.DynType) {
		return nil, errors.New("must be a boolean expression, not one of type " + t.String())
	}
	return e.Program(ast, cel.CostLimit(maxCost), cel.EvalOptions(cel.OptOptimize))
}

// eval evaluates prg: true only when it gives true (an error, such as a
// missing claim or the cost limit, or a non-boolean result, is false).
func eval(prg cel.Program, vars map[string]any) bool {
	out, _, err := prg.Eval(vars)
	if err != nil {
		return false
	}
	b, ok := out.Value().(bool)
	return ok && b
}

// firstLine is CEL's error message without its source excerpt and its
// "ERROR: <input>:" prefix: "1:18: Syntax error: ...".
func firstLine(msg string) string {
	msg, _, _ = strings.Cut(msg, "\n")
	return strings.TrimPrefix(msg, "ERROR: <input>:")
}
