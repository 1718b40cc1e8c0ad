package authserver

import (
	"net/http"
	"net/url"
	"strings"
	"time"
)

// The consent page: what a signed-in person allows or denies. It names
// everything the person needs to judge the request by: the client (its
// name is its own claim, so also the host of its home page or metadata
// document), where the answer goes (the redirect host: the code goes
// there), what it wants to use (the server or endpoint, by name and
// URL) and the scopes.

// consentView is the consent page's content.
type consentView struct {
	User         string
	Client       string // the client's name, or its id
	ClientHost   string // the host of its client_uri (or of its metadata document's URL)
	RedirectHost string
	ResourceName string
	Resource     string
	Scopes       []string
	SwitchURL    string // sign in as someone else
	PasskeysURL  string // "" without passkeys
}

// consentPage shows the consent page to a signed-in browser, or sends
// it to the sign-in page first.
func (l *loginPages) consentPage(w http.ResponseWriter, r *http.Request) {
	req := l.request(w, r)
	if req == nil {
		return
	}
	user, _, ok := l.signedInFor(w, r, req)
	if !ok {
		return
	}
	l.showConsent(w, r, req, user, "")
}

func (l *loginPages) showConsent(w http.ResponseWriter, r *http.Request, req *AuthRequest, user, notice string) {
	cv := &consentView{
		User:         user,
		Client:       req.ClientID,
		RedirectHost: displayHost(req.RedirectURI),
		ResourceName: resourceLabel(req.Resource),
		Resource:     req.Resource,
		Scopes:       req.Scopes,
		SwitchURL:    l.url("/oauth/login", req.ID) + "&switch=1",
	}
	if c, err := l.s.clients.client(r.Context(), req.ClientID); err == nil {
		if c.Name != "" {
			cv.Client = c.Name
		}
		cv.ClientHost = displayHost(c.URI)
		if cv.ClientHost == "" && c.Document {
			cv.ClientHost = displayHost(c.ID)
		}
	} else {
		// The client went away (deleted by the admin, its document gone)
		// since /authorize: nothing to consent to.
		l.s.deps.Logger.Warn("authserver: consent: client", "client", req.ClientID, "error", err)
		l.errorPage(w, http.StatusBadRequest, "This application is not known",
			"The application that sent you here is no longer registered.",
			"Go back to the application and connect again.")
		return
	}
	if l.passkeys != nil {
		cv.PasskeysURL = l.url("/oauth/passkeys", req.ID)
	}
	l.render(w, http.StatusOK, "consent", &pageData{
		Title:   "Allow access?",
		Notice:  notice,
		Action:  l.url("/oauth/consent", req.ID),
		CSRF:    req.CSRF,
		Consent: cv,
	}, cspSource(req.RedirectURI))
}

// consentPost takes the decision: Allow stores who consented and hands
// the request to the provider's finish (the code, the redirect); Deny
// hands it to refuse (access_denied).
func (l *loginPages) consentPost(w http.ResponseWriter, r *http.Request) {
	req := l.request(w, r)
	if req == nil || l.forged(w, r, req) {
		return
	}
	user, at, ok := l.signedInFor(w, r, req)
	if !ok {
		return
	}
	switch r.PostForm.Get("decision") {
	case "allow":
		req.User, req.AuthTime, req.Consented = user, at, true
		ttl := req.CreatedAt.Add(loginRequestLife).Sub(l.s.deps.Now())
		if ttl <= 0 {
			ttl = loginRequestLife // a clock moved back: the store's own expiry still bounds it
		}
		if err := l.s.store.PutAuthRequest(r.Context(), req, ttl); err != nil {
			l.s.deps.Logger.Error("authserver: consent: store", "error", err)
			l.errorPage(w, http.StatusServiceUnavailable, "Something went wrong",
				"The gateway could not save your answer.", "Try again in a moment.")
			return
		}
		l.s.deps.Logger.Info("authserver: consented", "user", user, "client", req.ClientID, "resource", req.Resource, "scopes", strings.Join(req.Scopes, " "))
		l.finishing()(w, r, req)
	case "deny":
		l.s.deps.Logger.Info("authserver: denied", "user", user, "client", req.ClientID, "resource", req.Resource)
		l.refusing()(w, r, req, "access_denied", "the user denied the request")
	default:
		l.errorPage(w, http.StatusBadRequest, "No answer", "Choose Allow or Deny.", "")
	}
}

// loginRequestLife is how long an authorization request lives from
// /authorize: the consent keeps it no longer than the provider stored it
// for.
const loginRequestLife = 10 * time.Minute

func (l *loginPages) finishing() func(http.ResponseWriter, *http.Request, *AuthRequest) {
	if l.finish != nil {
		return l.finish
	}
	return l.s.provider.finish
}

func (l *loginPages) refusing() func(http.ResponseWriter, *http.Request, *AuthRequest, string, string) {
	if l.refuse != nil {
		return l.refuse
	}
	return l.s.provider.refuse
}

// asking says on the sign-in page who asks for what, when the client
// is known.
func (l *loginPages) asking(r *http.Request, req *AuthRequest) *asking {
	c, err := l.s.clients.client(r.Context(), req.ClientID)
	if err != nil {
		return nil
	}
	name := c.Name
	if name == "" {
		name = c.ID
	}
	return &asking{Client: name, Resource: resourceLabel(req.Resource)}
}

// displayHost is what a person is shown of a URL: its host (port
// included), or for a private-use scheme (com.example.app:/cb) the
// scheme.
func displayHost(uri string) string {
	u, err := url.Parse(uri)
	if err != nil || uri == "" {
		return ""
	}
	if u.Host != "" {
		return u.Host
	}
	if u.Scheme != "" {
		return u.Scheme + ":"
	}
	return ""
}

// resourceLabel names a protected resource by its URL, as the gateway
// lays them out: /servers/NAME/mcp is "the NAME server",
// /endpoints/NAME/mcp "the NAME endpoint". Others (/mcp: the default endpoint, or with host
// routing NAME.domain/mcp) are named by their host and path, which a
// person recognizes from where they added the connector.
func resourceLabel(resource string) string {
	u, err := url.Parse(resource)
	if err != nil || u.Host == "" {
		return resource
	}
	segs := strings.Split(strings.Trim(u.Path, "/"), "/")
	for i := len(segs) - 2; i >= 1; i-- {
		if name := segs[i]; name != "" && (segs[i-1] == "servers" || segs[i-1] == "endpoints") {
			return "the " + name + " " + strings.TrimSuffix(segs[i-1], "s")
		}
	}
	return u.Host + u.Path
}
