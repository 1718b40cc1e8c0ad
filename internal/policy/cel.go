package policy

import (
	"errors"
	"reflect"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/ext"
	"cel.dev/cel-go/interpreter"
)

// maxCost bounds the work of one expression's evaluation (CEL's cost
// units: about one per operation and per element a comprehension
// visits), so that an expression over a large claim or argument cannot
// hold a request up.
const maxCost = 100_000

// principal is what an expression sees as "principal": an object type
// with exactly these fields (not a map), so that the checker refuses a
// misspelt field ("principal.nme") or a comparison of the wrong type
// ("principal.name == 1") when the config is loaded, instead of an
// expression that never matches. Claims stay dynamic: they are whatever
// the issuer put in its tokens.
type principal struct {
	Name   string         `cel:"name"`
	Kind   string         `cel:"kind"` // "key", "token" or "anonymous"
	Scopes []string       `cel:"scopes"`
	Claims map[string]any `cel:"claims"`
	Issuer string         `cel:"issuer"`
}

// principalFields names principal's fields as expressions see them,
// for errors: "name, kind, scopes, claims, issuer".
func principalFields() string {
	var names []string
	for f := range reflect.TypeFor[principal]().Fields() {
		names = append(names, f.Tag.Get("cel"))
	}
	return strings.Join(names, ", ")
}

// principalType is principal's CEL object type.
var principalType = cel.ObjectType("policy.principal")

// env is the CEL environment of every expression: its variables, each
// with its type, so that Compile type-checks an expression against what
// vars binds.
var env = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		ext.NativeTypes(reflect.TypeFor[principal](), ext.ParseStructTags(true)),
		cel.Variable("principal", principalType),
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
		msg := firstLine(iss.Err().Error())
		if strings.Contains(msg, "undefined field") {
			// The only object type is principal's (maps have no
			// fixed fields): say which fields it has.
			msg += " (principal has " + principalFields() + ")"
		}
		return nil, errors.New(msg)
	}
	if t := ast.OutputType(); !t.IsExactType(cel.BoolType) && !t.IsExactType(cel.DynType) {
		return nil, errors.New("must be a boolean expression, not one of type " + t.String())
	}
	return e.Program(ast, cel.CostLimit(maxCost), cel.EvalOptions(cel.OptOptimize))
}

// eval evaluates prg: matched only when it gives true (an error, such as
// a missing claim, or a non-boolean result, does not match). judged is
// false when the evaluation was cut short, at the cost limit above all:
// then what made it costly is the request's own (a call's arguments, a
// URI), and the caller refuses the request whatever the rule's effect (a
// deny rule that did not match would let through exactly the requests
// costly enough).
func eval(prg cel.Program, vars map[string]any) (matched bool, failed, cut bool) {
	out, _, err := prg.Eval(vars)
	if err != nil {
		var cancelled interpreter.EvalCancelledError
		return false, true, errors.As(err, &cancelled)
	}
	b, ok := out.Value().(bool)
	return ok && b, false, false
}

// firstLine is CEL's error message without its source excerpt and its
// "ERROR: <input>:" prefix: "1:18: Syntax error: ...".
func firstLine(msg string) string {
	msg, _, _ = strings.Cut(msg, "\n")
	return strings.TrimPrefix(msg, "ERROR: <input>:")
}
