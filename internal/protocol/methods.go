package protocol

import (
	"slices"
	"strings"
)

// Requests a client sends.
const (
	MethodInitialize            = "initialize"
	MethodPing                  = "ping"
	MethodToolsList             = "tools/list"
	MethodToolsCall             = "tools/call"
	MethodPromptsList           = "prompts/list"
	MethodPromptsGet            = "prompts/get"
	MethodResourcesList         = "resources/list"
	MethodResourcesTemplateList = "resources/templates/list"
	MethodResourcesRead         = "resources/read"
	MethodResourcesSubscribe    = "resources/subscribe"
	MethodResourcesUnsubscribe  = "resources/unsubscribe"
	MethodLoggingSetLevel       = "logging/setLevel"
	MethodCompletionComplete    = "completion/complete"
	MethodTasksGet              = "tasks/get"
	MethodTasksList             = "tasks/list"
	MethodTasksResult           = "tasks/result"
	MethodTasksCancel           = "tasks/cancel"
	// MethodServerDiscover and MethodSubscriptionsListen are 2026-07-28's.
	MethodServerDiscover      = "server/discover"
	MethodSubscriptionsListen = "subscriptions/listen"
)

// Requests a server sends its client.
const (
	MethodSamplingCreateMessage = "sampling/createMessage"
	MethodElicitationCreate     = "elicitation/create"
	MethodRootsList             = "roots/list"
)

// Notifications.
const (
	NotificationInitialized               = "notifications/initialized"
	NotificationCancelled                 = "notifications/cancelled"
	NotificationProgress                  = "notifications/progress"
	NotificationMessage                   = "notifications/message"
	NotificationToolsListChanged          = "notifications/tools/list_changed"
	NotificationPromptsListChanged        = "notifications/prompts/list_changed"
	NotificationResourcesListChanged      = "notifications/resources/list_changed"
	NotificationResourcesUpdated          = "notifications/resources/updated"
	NotificationRootsListChanged          = "notifications/roots/list_changed"
	NotificationElicitationComplete       = "notifications/elicitation/complete"
	NotificationTasksStatus               = "notifications/tasks/status"
	NotificationSubscriptionsAcknowledged = "notifications/subscriptions/acknowledged"
)

// tasksPrefix starts every method of the session eras' tasks.
const tasksPrefix = "tasks/"

// ClientRequests are the requests a client may send in any version the
// gateway serves.
var ClientRequests = []string{
	MethodInitialize, MethodPing, MethodServerDiscover, MethodSubscriptionsListen,
	MethodToolsList, MethodToolsCall,
	MethodPromptsList, MethodPromptsGet,
	MethodResourcesList, MethodResourcesTemplateList, MethodResourcesRead,
	MethodResourcesSubscribe, MethodResourcesUnsubscribe,
	MethodLoggingSetLevel, MethodCompletionComplete,
	MethodTasksGet, MethodTasksList, MethodTasksResult, MethodTasksCancel,
}

// IsClientRequest reports whether method is one of [ClientRequests]. It is
// asked for every request the metrics count, so it is a set lookup.
func IsClientRequest(method string) bool { _, ok := clientRequests[method]; return ok }

// clientRequests is ClientRequests as a set.
var clientRequests = func() map[string]struct{} {
	m := make(map[string]struct{}, len(ClientRequests))
	for _, name := range ClientRequests {
		m[name] = struct{}{}
	}
	return m
}()

// ServerRequests are the requests a server may send its client: as
// JSON-RPC requests in the session eras, inside an input_required result's
// inputRequests in 2026-07-28.
var ServerRequests = []string{MethodSamplingCreateMessage, MethodElicitationCreate, MethodRootsList}

// IsServerRequest reports whether method is one of [ServerRequests].
func IsServerRequest(method string) bool { return slices.Contains(ServerRequests, method) }

// ListMethods are the paginated list requests.
var ListMethods = []string{MethodToolsList, MethodPromptsList, MethodResourcesList, MethodResourcesTemplateList}

// IsListMethod reports whether method is one of [ListMethods].
func IsListMethod(method string) bool { return slices.Contains(ListMethods, method) }

// ListChangedNotifications are the notifications that concern every
// client of a server alike: the only ones the gateway sends to all of them.
var ListChangedNotifications = []string{
	NotificationToolsListChanged, NotificationPromptsListChanged, NotificationResourcesListChanged,
}

// IsListChanged reports whether method is one of [ListChangedNotifications].
func IsListChanged(method string) bool { return slices.Contains(ListChangedNotifications, method) }

// InputRequiredMethods are the requests 2026-07-28 lets a server answer
// with an input_required result.
var InputRequiredMethods = []string{MethodToolsCall, MethodPromptsGet, MethodResourcesRead}

// AllowsInputRequired reports whether method is one of
// [InputRequiredMethods].
func AllowsInputRequired(method string) bool { return slices.Contains(InputRequiredMethods, method) }

// RemovedRequests are the session-era client requests 2026-07-28 removed
// (besides the tasks, see [RemovedInStateless]): session setup, ping, and
// the level and subscriptions that per-request _meta and
// subscriptions/listen replace.
var RemovedRequests = []string{
	MethodInitialize, MethodPing, MethodLoggingSetLevel, MethodResourcesSubscribe, MethodResourcesUnsubscribe,
}

// RemovedNotifications are the session-era client notifications 2026-07-28
// removed.
var RemovedNotifications = []string{
	NotificationInitialized, NotificationRootsListChanged, NotificationElicitationComplete,
}

// RemovedInStateless reports whether a client's method is gone from
// 2026-07-28: one of [RemovedRequests] or [RemovedNotifications], or a
// tasks/* method (the core tasks moved to an extension the gateway does not
// serve).
func RemovedInStateless(method string) bool {
	return slices.Contains(RemovedRequests, method) || slices.Contains(RemovedNotifications, method) ||
		strings.HasPrefix(method, tasksPrefix)
}

// IsTaskMethod reports whether method is one of the tasks/* requests.
func IsTaskMethod(method string) bool { return strings.HasPrefix(method, tasksPrefix) }

// CacheableMethods are the requests whose results 2026-07-28 requires to
// carry ttlMs and cacheScope (caching.mdx; CacheableResult in the schema).
var CacheableMethods = []string{
	MethodToolsList, MethodPromptsList, MethodResourcesList, MethodResourcesTemplateList, MethodResourcesRead,
}

// IsCacheable reports whether method is one of [CacheableMethods].
func IsCacheable(method string) bool { return slices.Contains(CacheableMethods, method) }
