package protocol

// MetaPrefix is the prefix the specification reserves for its own _meta
// keys ("Reserved keys" in basic/index.mdx).
const MetaPrefix = "io.modelcontextprotocol/"

// Keys of params._meta and result._meta.
const (
	// MetaProgressToken is the token a client puts in a request's _meta
	// to get notifications/progress about it.
	MetaProgressToken = "progressToken"
	// MetaRelatedTask ties a message to the task it belongs to (the
	// session eras' tasks).
	MetaRelatedTask = MetaPrefix + "related-task"

	// MetaProtocolVersion is required in every stateless request's
	// params._meta.
	MetaProtocolVersion = MetaPrefix + "protocolVersion"
	// MetaClientCapabilities is required in every stateless request's
	// params._meta: an object, {} for none.
	MetaClientCapabilities = MetaPrefix + "clientCapabilities"
	// MetaClientInfo is optional (SHOULD); servers must not require it.
	MetaClientInfo = MetaPrefix + "clientInfo"
	// MetaLogLevel asks for notifications/message at or above the level
	// on this request's response stream; absent means none may be sent.
	MetaLogLevel = MetaPrefix + "logLevel"
	// MetaServerInfo identifies the server in a result's _meta (SHOULD).
	MetaServerInfo = MetaPrefix + "serverInfo"
	// MetaSubscriptionID tags every notification of a subscriptions/listen
	// stream, and the listen's final result, with the listen request's id.
	MetaSubscriptionID = MetaPrefix + "subscriptionId"
)
