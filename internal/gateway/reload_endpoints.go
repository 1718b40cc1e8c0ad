package gateway

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/policy"
)

// What a reload does to a running endpoint (see reload.go): members
// changed in place keep its sessions; the keys below, which rename, filter
// or page every item the endpoint exposes, rebuild it and end its sessions.

// endpointKeysChanged returns the keys of endpoint entry ep that differ
// from old and that a running endpoint cannot take in place: every key
// but "servers" (members change in place), "auth" and "policy" (the
// handler applies them to the next requests). nil when old is nil (the
// endpoint is new).
func endpointKeysChanged(old, ep *config.Endpoint) []string {
	if old == nil {
		return nil
	}
	var keys []string
	va, vb := reflect.ValueOf(*old), reflect.ValueOf(*ep)
	t := va.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		switch f.Name {
		case "Name", "Servers", "Auth", "Policy":
			continue
		}
		if !f.IsExported() {
			continue // implicit: an "all" written in the file is the same endpoint
		}
		if !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			keys = append(keys, jsonKey(f.Name))
		}
	}
	return keys
}

// endpointRebuiltReason is what the sessions of endpoint name, rebuilt
// because keys changed, are told (and what is logged).
func endpointRebuiltReason(name string, keys []string) string {
	paths := make([]string, len(keys))
	for i, k := range keys {
		paths[i] = "gateway.endpoints." + name + "." + k
	}
	return fmt.Sprintf("%s: %s changed, which renames, filters or pages every item the endpoint exposes; initialize again",
		reasonEndpointChanged, strings.Join(paths, ", "))
}

// keepPolicies puts the running compiled policies (oldSet, of oldCfg) into
// set (compiled from cfg) wherever the policy's config did not change, so
// that an endpoint sees an unchanged member's policy as the same one and
// keeps its lists.
func keepPolicies(oldCfg *config.Config, oldSet policy.Set, cfg *config.Config, set policy.Set) {
	for name := range set.Servers {
		if o, ok := oldCfg.Servers[name]; ok && oldSet.Servers[name] != nil && reflect.DeepEqual(o.Policy, cfg.Servers[name].Policy) {
			set.Servers[name] = oldSet.Servers[name]
		}
	}
	for name := range set.Endpoints {
		if o, ok := oldCfg.Endpoints[name]; ok && oldSet.Endpoints[name] != nil && reflect.DeepEqual(o.Policy, cfg.Endpoints[name].Policy) {
			set.Endpoints[name] = oldSet.Endpoints[name]
		}
	}
}
