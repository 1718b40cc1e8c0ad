package eras

import (
	"encoding/json"
	"strings"
)

// This file is what a stateless request's client capabilities become for
// a server of the session eras, which learns its client's capabilities
// once, from initialize: the gateway runs translation processes per set
// of capabilities (internal/servers translate.go), each initialized with
// what its set declares.

// CapSet is the client capabilities a stateless request declared, as far
// as a session-era server can tell them apart: sampling, elicitation and
// roots, each present or not.
type CapSet uint8

const (
	CapSampling CapSet = 1 << iota
	CapElicitation
	CapRoots
)

// ParseCapSet reads the raw io.modelcontextprotocol/clientCapabilities
// object of a stateless request. Elicitation counts in form mode only
// ({} means form mode, 2025-11-25): a client naming only url mode gets a
// process that declares no elicitation rather than one claiming a mode it
// lacks; URL-mode elicitation is not declared to translation processes.
func ParseCapSet(caps []byte) CapSet {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(caps, &m)
	present := func(v json.RawMessage) bool { return len(v) > 0 && string(v) != "null" }
	var s CapSet
	if present(m["sampling"]) {
		s |= CapSampling
	}
	if e := m["elicitation"]; present(e) {
		var modes map[string]json.RawMessage
		_ = json.Unmarshal(e, &modes) // not an object: names no mode
		_, form := modes["form"]
		if _, url := modes["url"]; form || !url {
			s |= CapElicitation
		}
	}
	if present(m["roots"]) {
		s |= CapRoots
	}
	return s
}

// Declared is the capabilities object a process for s declares in its
// initialize: each as bare as the revision lets a client declare it.
func (s CapSet) Declared() []byte {
	b := []byte{'{'}
	add := func(kv string) {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, kv...)
	}
	if s&CapSampling != 0 {
		add(`"sampling":{}`)
	}
	if s&CapElicitation != 0 {
		add(`"elicitation":{"form":{}}`)
	}
	if s&CapRoots != 0 {
		add(`"roots":{}`)
	}
	return append(b, '}')
}

// String names s for logs.
func (s CapSet) String() string {
	var names []string
	for _, c := range []struct {
		bit  CapSet
		name string
	}{{CapSampling, "sampling"}, {CapElicitation, "elicitation"}, {CapRoots, "roots"}} {
		if s&c.bit != 0 {
			names = append(names, c.name)
		}
	}
	if names == nil {
		return "none"
	}
	return strings.Join(names, ",")
}
