package jsonrpc

import (
	"errors"
	"testing"
)

func TestIsBatch(t *testing.T) {
	for in, want := range map[string]bool{
		`[]`: true, " \t\r\n[1]": true, `{}`: false, ``: false, `   `: false, `x[`: false, `"["`: false,
	} {
		if got := IsBatch([]byte(in)); got != want {
			t.Errorf("IsBatch(%q) = %v", in, got)
		}
	}
}

func TestSplitBatch(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
		err  error
	}{
		{"two", `[{"jsonrpc":"2.0","id":1,"method":"a"}, {"jsonrpc":"2.0","method":"b"}]`,
			[]string{`{"jsonrpc":"2.0","id":1,"method":"a"}`, `{"jsonrpc":"2.0","method":"b"}`}, nil},
		{"whitespace", " \n[ {\"a\":1} ,\n{ } ]\n", []string{`{"a":1}`, `{ }`}, nil},
		{"non-object elements kept", `[1,"x",null,[2,3]]`, []string{`1`, `"x"`, `null`, `[2,3]`}, nil},
		{"nested arrays", `[[[]],[{"a":[1]}]]`, []string{`[[]]`, `[{"a":[1]}]`}, nil},
		{"empty", `[]`, nil, ErrInvalidRequest},
		{"empty with space", ` [ ] `, nil, ErrInvalidRequest},
		{"object", `{"jsonrpc":"2.0","method":"m"}`, nil, ErrInvalidRequest},
		{"number", `1`, nil, ErrInvalidRequest},
		{"garbage", `[1,2,garbage]`, nil, ErrParse},
		{"unterminated", `[1,2`, nil, ErrParse},
		{"trailing comma", `[1,]`, nil, ErrParse},
		{"trailing data", `[1] [2]`, nil, ErrParse},
		{"duplicate key in element left to Parse", `[{"a":1,"a":2}]`, []string{`{"a":1,"a":2}`}, nil},
		{"invalid utf8", "[\"\xff\"]", nil, ErrParse},
		{"empty input", ``, nil, ErrParse},
		{"not json", `hello`, nil, ErrParse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SplitBatch([]byte(tt.in))
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("err = %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d elements %q, want %d", len(got), got, len(tt.want))
			}
			for i := range got {
				if string(got[i]) != tt.want[i] {
					t.Errorf("element %d = %s, want %s", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestSplitBatchSubslices(t *testing.T) {
	in := []byte(`[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","id":2,"method":"b"}]`)
	elems, err := SplitBatch(in)
	if err != nil {
		t.Fatal(err)
	}
	if &elems[0][0] != &in[1] {
		t.Error("first element is not a sub-slice of the input")
	}
	// Appending to an element must not overwrite the next one.
	_ = append(elems[0], 'X')
	if string(elems[1]) != `{"jsonrpc":"2.0","id":2,"method":"b"}` {
		t.Errorf("append to element overwrote input: %s", elems[1])
	}
	for i, e := range elems {
		m, err := Parse(e)
		if err != nil {
			t.Fatalf("element %d: %v", i, err)
		}
		if got := string(m.Bytes(m.ID)); got != string(rune('1'+i)) {
			t.Errorf("element %d id = %s", i, got)
		}
	}
}
