package eras

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/mcpgate/mcpgate/internal/protocol"
)

// Discover returns the server/discover result (schema.ts DiscoverResult)
// for a session-era server, built from initResult, the raw JSON InitializeResult
// the server gave the gateway:
//
//	{"resultType":"complete","supportedVersions":[…],"capabilities":{…},
//	 "instructions":…,"ttlMs":0,"cacheScope":"private",
//	 "_meta":{"io.modelcontextprotocol/serverInfo":{…}}}
//
// supportedVersions is [protocol.StatelessVersions] followed by
// sessionVersions (the versions the gateway itself serves to session-era
// clients), without
// repeats. capabilities is the server's, less the keys in drop (what the
// gateway cannot serve in front of it); discover must list only what works
// (conformance sep-2575-discover-capabilities-match-handlers). instructions
// is kept if it is a string. serverInfo moves to _meta, where
// 2026-07-28 puts a server's identity (spec PR #3002); it is left out if
// the server gave none. ttlMs 0 and cacheScope "private" are always safe.
//
// It is an error for initResult not to be an object with a capabilities
// object. Values are copied as the server wrote them, compacted.
func Discover(initResult []byte, sessionVersions []string, drop []string) ([]byte, error) {
	var init struct {
		Capabilities json.RawMessage `json:"capabilities"`
		Instructions json.RawMessage `json:"instructions"`
		ServerInfo   json.RawMessage `json:"serverInfo"`
	}
	if err := json.Unmarshal(initResult, &init); err != nil {
		return nil, fmt.Errorf("modern: initialize result: %w", err)
	}
	var caps map[string]json.RawMessage
	if err := json.Unmarshal(init.Capabilities, &caps); err != nil || caps == nil {
		return nil, errors.New("modern: initialize result has no capabilities object")
	}
	for _, k := range drop {
		delete(caps, k)
	}

	out := struct {
		ResultType        string                     `json:"resultType"`
		SupportedVersions []string                   `json:"supportedVersions"`
		Capabilities      map[string]json.RawMessage `json:"capabilities"` // keys sorted
		Instructions      json.RawMessage            `json:"instructions,omitempty"`
		TTLMs             int                        `json:"ttlMs"`
		CacheScope        string                     `json:"cacheScope"`
		Meta              map[string]json.RawMessage `json:"_meta,omitempty"`
	}{ResultType: "complete", Capabilities: caps, CacheScope: "private"}
	out.SupportedVersions = slices.Clone(protocol.StatelessVersions)
	for _, v := range sessionVersions {
		if !slices.Contains(out.SupportedVersions, v) {
			out.SupportedVersions = append(out.SupportedVersions, v)
		}
	}
	if len(init.Instructions) > 0 && init.Instructions[0] == '"' {
		out.Instructions = init.Instructions
	}
	if len(init.ServerInfo) > 0 && !bytes.Equal(init.ServerInfo, []byte("null")) {
		out.Meta = map[string]json.RawMessage{protocol.MetaServerInfo: init.ServerInfo}
	}

	// An Encoder, not Marshal: Marshal would rewrite <, > and & in the
	// server's strings as \u003c… (still valid, but not what it wrote).
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return nil, fmt.Errorf("modern: discover result: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
