package mux

import (
	"errors"
	"strconv"
	"strings"

	json "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// The task a tasks/get, tasks/result or tasks/cancel names decides whether
// it is forwarded at all (tasks.go), so the gateway must read the same
// task id the server will. Go's encoding/json matches member names in any
// case and keeps the last of a duplicate: {"taskId":"theirs","TaskId":
// "mine"} reads as "mine" there, and as "theirs" to a server reading the
// exact name (the TypeScript and Python SDKs), which would hand one
// session another's task. So the id is read by its exact name, a member
// named twice is refused, and so is one spelled like "taskId" or "params"
// in another case: whichever way a server reads such a request, it is not
// one the gateway can vouch for.

// Why a task request's id cannot be read (the -32602 reply says it).
var (
	errTaskIDMissing   = errors.New("taskId must be a string")
	errTaskIDAmbiguous = errors.New("the request is not one plain JSON object (a member named twice?)")
)

// strictTaskID returns the string params.taskId of raw, read strictly.
func strictTaskID(raw []byte) (string, error) {
	top, err := strictMembers(raw, "params")
	if err != nil {
		return "", err
	}
	params, ok := top["params"]
	if !ok {
		return "", errTaskIDMissing
	}
	p, err := strictMembers(params, "taskId")
	if err != nil {
		return "", err
	}
	v, ok := p["taskId"]
	if !ok || v.Kind() != '"' {
		return "", errTaskIDMissing
	}
	var id string
	if json.Unmarshal(v, &id) != nil {
		return "", errTaskIDMissing
	}
	return id, nil
}

// strictMembers decodes the JSON object raw by member name (unescaped),
// refusing a duplicate name and a name equal to watched in another case.
func strictMembers(raw []byte, watched string) (map[string]jsontext.Value, error) {
	var m map[string]jsontext.Value
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, errTaskIDAmbiguous
	}
	for k := range m {
		if k != watched && strings.EqualFold(k, watched) {
			return nil, errors.New("a member " + strconv.Quote(k) + ": write " + strconv.Quote(watched))
		}
	}
	return m, nil
}
