package conn

import (
	"errors"
	"testing"

	json "github.com/go-json-experiment/json"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// readParamsRef is ReadParams as it was written before its one-pass walk:
// every object decoded by StrictMembers. The fuzz test holds the two to
// the same answers.
func readParamsRef(msg *jsonrpc.Message) (CallParams, error) {
	var cp CallParams
	top, err := StrictMembers(msg.Raw, WatchedTop)
	if err != nil {
		return cp, errors.New("mcpgate: the request " + err.Error())
	}
	raw, ok := top["params"]
	if !ok {
		return cp, nil
	}
	params, err := StrictMembers(raw, WatchedParams)
	if err != nil {
		return cp, errors.New("mcpgate: params " + err.Error())
	}
	for _, f := range []struct {
		key string
		dst *string
	}{{"name", &cp.Name}, {"uri", &cp.URI}} {
		if v, ok := params[f.key]; ok && json.Unmarshal(v, f.dst) != nil {
			return cp, errors.New("mcpgate: params." + f.key + " must be a string")
		}
	}
	if v, ok := params["arguments"]; ok {
		cp.Arguments = v
	}
	if v, ok := params["ref"]; ok {
		ref, err := StrictMembers(v, WatchedRef)
		if err != nil {
			return cp, errors.New("mcpgate: params.ref " + err.Error())
		}
		for _, f := range []struct {
			key string
			dst *string
		}{{"type", &cp.Ref.Type}, {"name", &cp.Ref.Name}, {"uri", &cp.Ref.URI}} {
			if v, ok := ref[f.key]; ok && json.Unmarshal(v, f.dst) != nil {
				return cp, errors.New("mcpgate: params.ref." + f.key + " must be a string")
			}
		}
	}
	return cp, nil
}

var readParamsSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///a\u0062"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p"},"argument":{}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","Name":"b"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","n\u0061me":"b"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"x":1,"x":2}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":null,"uri":7}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"requeſtState":"s"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1]}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","Params":{}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"ref":null}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"ref":{"type":1}}}`,
	"{ \"params\" : { \"name\" : \"a\\\"b\" , \"arguments\" : [ 1 , { } , \"]\" ] } , \"id\" : 1 , \"method\" : \"m\" , \"jsonrpc\" : \"2.0\" }",
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"\xff\"}}",
}

// TestReadParams: the one-pass ReadParams answers as the decoding one
// did, on cases of each rule (a name in another case, escaped, twice at
// depth; null and non-string names; params or ref not objects).
func TestReadParams(t *testing.T) {
	for _, s := range readParamsSeeds {
		compareReadParams(t, s)
	}
}

func FuzzReadParams(f *testing.F) {
	for _, s := range readParamsSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { compareReadParams(t, s) })
}

func compareReadParams(t *testing.T, s string) {
	t.Helper()
	msg, err := jsonrpc.Parse([]byte(s))
	if err != nil {
		return
	}
	got, gerr := ReadParams(&msg)
	want, werr := readParamsRef(&msg)
	if (gerr == nil) != (werr == nil) {
		t.Fatalf("%s:\nReadParams error %v, the decoding one %v", s, gerr, werr)
	}
	if gerr != nil {
		return
	}
	if got.Name != want.Name || got.URI != want.URI || got.Ref != want.Ref || string(got.Arguments) != string(want.Arguments) {
		t.Fatalf("%s:\nReadParams %+v (arguments %s), the decoding one %+v (arguments %s)", s, got, got.Arguments, want, want.Arguments)
	}
}

// TestReadParamsNoAllocs: reading a tools/call's params costs its name,
// not a decoding of the message (the validating pass's decoder is
// pooled).
func TestReadParamsNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under -race")
	}
	msg, err := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello","n":[1,2,3]},"_meta":{"progressToken":"p"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = ReadParams(&msg) }); n > 1 {
		t.Fatalf("%.1f allocations per ReadParams, want at most 1 (the name)", n)
	}
}
