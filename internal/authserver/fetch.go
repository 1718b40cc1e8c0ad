package authserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"syscall"
	"time"
)

// docFetcher fetches client ID metadata documents. The URL is whatever an
// unauthenticated caller of /oauth/authorize wrote, so the fetch is an
// SSRF vector (draft-ietf-oauth-client-id-metadata-document 6.6) and is
// fenced in on every side:
//
//   - addresses: only public unicast ones. The check runs on the
//     addresses DNS gave, and again in the dialer's Control on the very
//     address connected to, so a name that resolves to a public address
//     when checked and to 169.254.169.254 when dialled (DNS rebinding)
//     still cannot reach it. No proxy from the environment: a proxy
//     would do its own resolution, out of our sight.
//   - no redirects (the draft's section 5 forbids following them; a
//     redirect is also the classic way around an address check);
//   - a timeout on the whole exchange, a cap on the body and headers;
//   - at most maxFetches at once, further ones refused at once rather
//     than queued, since a flood of document URLs must not hold
//     /authorize handlers.
//
// allowDial lets chosen addresses through the fence: set only by tests,
// whose servers listen on loopback (so a test can let its document
// server through and still see every other loopback address refused).
// Fields are static after construction (tests set theirs before the
// first fetch).
type docFetcher struct {
	client    *http.Client
	transport *http.Transport
	lookup    func(ctx context.Context, host string) ([]netip.Addr, error)
	allowDial func(netip.AddrPort) bool
	timeout   time.Duration
	maxBody   int64
	slots     chan struct{} // a token per fetch in progress
}

// Bounds of a document fetch.
const (
	docTimeout    = 5 * time.Second
	maxDocument   = 5 << 10 // the draft suggests 5 KB; documents are a few hundred bytes
	maxDocHeaders = 16 << 10
	maxFetches    = 8
)

// Errors of a fetch.
var (
	errBlockedAddress = errors.New("its host is not at a public address")
	errFetchBusy      = errors.New("too many client metadata documents being fetched")
	// errBadAnswer: the host answered, but not with a document (a status
	// other than 200, a body over the cap). Its text is the client's to
	// see, unlike a connection error's, which names our network.
	errBadAnswer = errors.New("not a document")
)

func newDocFetcher() *docFetcher {
	f := &docFetcher{
		lookup: func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		},
		timeout: docTimeout,
		maxBody: maxDocument,
		slots:   make(chan struct{}, maxFetches),
	}
	f.transport = &http.Transport{
		Proxy:                  nil,
		DialContext:            f.dial,
		TLSHandshakeTimeout:    docTimeout,
		ResponseHeaderTimeout:  docTimeout,
		MaxResponseHeaderBytes: maxDocHeaders,
		DisableKeepAlives:      true, // a document is fetched now and then; no idle connections to own
	}
	f.client = &http.Client{
		Transport:     f.transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return f
}

// fetch GETs url and returns its body and Cache-Control header. Only a
// 200 is a document (the draft's section 5: every other status is an
// error, redirects included).
func (f *docFetcher) fetch(ctx context.Context, url string) (body []byte, cacheControl string, err error) {
	select {
	case f.slots <- struct{}{}:
		defer func() { <-f.slots }()
	default:
		return nil, "", errFetchBusy
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "mcpgate")
	resp, err := f.client.Do(req)
	if err != nil {
		if errors.Is(err, errBlockedAddress) {
			return nil, "", errBlockedAddress // not the address itself: that is for our log, not the client
		}
		return nil, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("%w: status %d, not 200", errBadAnswer, resp.StatusCode)
	}
	body, err = io.ReadAll(io.LimitReader(resp.Body, f.maxBody+1))
	if err != nil {
		return nil, "", err
	}
	if int64(len(body)) > f.maxBody {
		return nil, "", fmt.Errorf("%w: larger than %d bytes", errBadAnswer, f.maxBody)
	}
	return body, resp.Header.Get("Cache-Control"), nil
}

// dial resolves host, refuses it if any of its addresses is not public
// (a name with one private address is someone's internal name), then
// dials the addresses in turn with control checking each again.
func (f *docFetcher) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("bad port %q", portStr)
	}
	addrs, err := f.lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%s has no address", host)
	}
	for _, a := range addrs {
		if !f.allowed(netip.AddrPortFrom(a, uint16(port))) {
			return nil, fmt.Errorf("%s resolves to %s: %w", host, a, errBlockedAddress)
		}
	}
	d := net.Dialer{Control: f.control}
	var first error
	for _, a := range addrs {
		c, err := d.DialContext(ctx, "tcp", netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return c, nil
		}
		if first == nil {
			first = err
		}
	}
	return nil, first
}

// control runs on the socket about to connect, with the numeric address:
// the check no resolver can change after the fact.
func (f *docFetcher) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil || !f.allowed(ap) {
		return fmt.Errorf("connect to %s: %w", address, errBlockedAddress)
	}
	return nil
}

func (f *docFetcher) allowed(ap netip.AddrPort) bool {
	return publicAddr(ap.Addr()) || f.allowDial != nil && f.allowDial(ap)
}

// nonPublic are the special-use blocks (RFC 6890 and its updates) a
// document host must not be in: this host, private networks, carrier
// NAT, link-local (169.254.169.254 is the cloud metadata service),
// documentation, benchmarking, multicast and reserved ranges, and the
// IPv6 translation prefixes that embed an IPv4 address of any of those.
var nonPublic = func() []netip.Prefix {
	var ps []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
		"172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16",
		"198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
		"::/128", "::1/128", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64", "2001::/23",
		"2001:db8::/32", "2002::/16", "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8",
	} {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	return ps
}()

// publicAddr reports whether a is a public unicast address. An
// IPv4-mapped IPv6 address is judged as the IPv4 address it carries.
func publicAddr(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() || a.Zone() != "" {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(a) {
			return false
		}
	}
	return true
}
