package conn

import (
	"encoding/json"

	"github.com/mcpgate/mcpgate/internal/auth"
)

// Policy decides what a principal may use of one target.
type Policy interface {
	// Allows reports whether principal p (nil: anonymous) may see and
	// use the item of kind ("tool", "prompt", "resource") named name (a
	// resource's URI or template); args are a call's arguments (nil in
	// lists).
	Allows(p *auth.Principal, kind, name string, args json.RawMessage) bool
	// AllowsAll reports whether p may use every item of kind: its lists
	// need no filtering.
	AllowsAll(p *auth.Principal, kind string) bool
}
