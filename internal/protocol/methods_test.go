package protocol

import "testing"

func TestMethodTables(t *testing.T) {
	type kinds struct {
		client, server, list, listChanged, input, removed, task bool
	}
	tests := []struct {
		method string
		want   kinds
	}{
		{"initialize", kinds{client: true, removed: true}},
		{"ping", kinds{client: true, removed: true}},
		{"logging/setLevel", kinds{client: true, removed: true}},
		{"resources/subscribe", kinds{client: true, removed: true}},
		{"resources/unsubscribe", kinds{client: true, removed: true}},
		{"tools/list", kinds{client: true, list: true}},
		{"prompts/list", kinds{client: true, list: true}},
		{"resources/list", kinds{client: true, list: true}},
		{"resources/templates/list", kinds{client: true, list: true}},
		{"tools/call", kinds{client: true, input: true}},
		{"prompts/get", kinds{client: true, input: true}},
		{"resources/read", kinds{client: true, input: true}},
		{"completion/complete", kinds{client: true}},
		{"server/discover", kinds{client: true}},
		{"subscriptions/listen", kinds{client: true}},
		{"tasks/get", kinds{client: true, removed: true, task: true}},
		{"tasks/list", kinds{client: true, removed: true, task: true}},
		{"tasks/result", kinds{client: true, removed: true, task: true}},
		{"tasks/cancel", kinds{client: true, removed: true, task: true}},
		// A tasks method the gateway has no label for is still a removed one.
		{"tasks/unknown", kinds{removed: true, task: true}},
		{"sampling/createMessage", kinds{server: true}},
		{"elicitation/create", kinds{server: true}},
		{"roots/list", kinds{server: true}},
		{"notifications/tools/list_changed", kinds{listChanged: true}},
		{"notifications/prompts/list_changed", kinds{listChanged: true}},
		{"notifications/resources/list_changed", kinds{listChanged: true}},
		{"notifications/resources/updated", kinds{}},
		{"notifications/initialized", kinds{removed: true}},
		{"notifications/roots/list_changed", kinds{removed: true}},
		{"notifications/elicitation/complete", kinds{removed: true}},
		{"notifications/cancelled", kinds{}},
		{"notifications/progress", kinds{}},
		{"", kinds{}},
		{"Tools/call", kinds{}},
		{"tasks", kinds{}},
	}
	for _, tt := range tests {
		got := kinds{
			client:      IsClientRequest(tt.method),
			server:      IsServerRequest(tt.method),
			list:        IsListMethod(tt.method),
			listChanged: IsListChanged(tt.method),
			input:       AllowsInputRequired(tt.method),
			removed:     RemovedInStateless(tt.method),
			task:        IsTaskMethod(tt.method),
		}
		if got != tt.want {
			t.Errorf("%q: got %+v, want %+v", tt.method, got, tt.want)
		}
	}
}
