package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"time"
)

// This file holds the HTTP plumbing both transports share: the default
// client, requests with their headers, the header timeout, bounded reads
// and reconnection delays.

// defaultHTTPClient returns the client used when Config.HTTPClient is nil.
// TLS certificates are verified (the zero tls.Config); no Timeout, since
// streams last as long as the server keeps them open.
func defaultHTTPClient(connect time.Duration) *http.Client {
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   connect,
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   32,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{Transport: tr, CheckRedirect: sameOriginRedirects}
}

// sameOriginRedirects follows at most 10 redirects, none to another origin:
// Config.Headers carry credentials meant for the configured server only.
func sameOriginRedirects(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if !sameOrigin(req.URL, via[0].URL) {
		return fmt.Errorf("redirect to another origin (%s) refused", req.URL.Host)
	}
	return nil
}

// sameOrigin reports whether a and b have the same scheme and host:port.
func sameOrigin(a, b *url.URL) bool {
	return a.Scheme == b.Scheme && hostPort(a) == hostPort(b)
}

func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// errHeaderTimeout is the error of a request whose headers took longer than
// RequestTimeout.
var errHeaderTimeout = errors.New("no response headers within the request timeout")

// newRequest builds a request to u carrying Config.Headers and, when known,
// the session id and protocol version.
func (c *Client) newRequest(ctx context.Context, method string, u *url.URL, body []byte, sess session) *http.Request {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), r)
	if err != nil {
		panic(err) // unreachable: the method is ours and u was parsed
	}
	for k, v := range c.cfg.Headers {
		req.Header.Set(k, v)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if sess.id != "" {
		req.Header.Set("Mcp-Session-Id", sess.id)
	}
	if sess.version != "" {
		req.Header.Set("Mcp-Protocol-Version", sess.version)
	}
	return req
}

// do sends req, giving up if its response headers take longer than
// RequestTimeout. onWritten, if not nil, runs once the request was written
// (or failed to be). The body of the response is bound to req's context.
func (c *Client) do(req *http.Request, onWritten func()) (*http.Response, error) {
	return roundTrip(c.hc, c.cfg.RequestTimeout, req, onWritten)
}

// roundTrip is do with its client and header timeout given; a headerTimeout
// of zero or less sets none (req's context still bounds the exchange).
func roundTrip(hc *http.Client, headerTimeout time.Duration, req *http.Request, onWritten func()) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	if onWritten != nil {
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			WroteRequest: func(httptrace.WroteRequestInfo) { onWritten() },
		})
	}
	var timer *time.Timer
	if headerTimeout > 0 {
		timer = time.AfterFunc(headerTimeout, cancel)
	}
	resp, err := hc.Do(req.WithContext(ctx))
	if timer != nil && !timer.Stop() {
		if err == nil {
			resp.Body.Close()
		}
		cancel()
		if req.Context().Err() != nil {
			return nil, req.Context().Err()
		}
		return nil, errHeaderTimeout
	}
	if err != nil {
		cancel()
		// The URL may carry credentials in its query: name it redacted.
		var ue *url.Error
		var oe *net.OpError
		switch {
		case errors.As(err, &oe) && oe.Op == "dial":
			err = &unreachableError{url: redact(req.URL), err: dialCause(oe)}
		case errors.As(err, &ue):
			err = fmt.Errorf("%s %s: %w", ue.Op, redact(req.URL), ue.Err)
		}
		return nil, err
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// unreachableError is the error of a request that could not connect.
type unreachableError struct {
	url string // redacted
	err error
}

func (e *unreachableError) Error() string {
	return "remote " + e.url + " unreachable: " + e.err.Error()
}
func (e *unreachableError) Unwrap() error { return e.err }
func (e *unreachableError) Is(target error) bool {
	return target == ErrUnreachable
}

// dialCause returns the reason a dial failed without the addresses and
// system call names around it ("connection refused", "i/o timeout", the
// resolver's error), which the message names already.
func dialCause(oe *net.OpError) error {
	var se *os.SyscallError
	if errors.As(oe.Err, &se) {
		return se.Err
	}
	return oe.Err
}

// requestFailed is the text of the error reply for a request whose HTTP
// exchange failed with err.
func requestFailed(err error) string {
	if errors.Is(err, ErrUnreachable) {
		return "mcpgate: " + err.Error()
	}
	return "mcpgate: upstream request failed: " + err.Error()
}

// cancelBody releases the request's context when the body is closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// readLimited reads r up to limit bytes. If r holds more, over is true,
// data is the first limit+1 bytes and size their count: the rest is not
// read (a peer may send gigabytes), so the caller must close the body
// rather than reuse its connection.
func readLimited(r io.Reader, limit int) (data []byte, size int, over bool, err error) {
	data, err = io.ReadAll(io.LimitReader(r, int64(limit)+1))
	size = len(data)
	if size <= limit || err != nil {
		return data, size, false, err
	}
	return data, size, true, nil
}

// drain reads and discards a little of a response body we do not use, so
// that its connection may be reused, then closes it.
func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}

// mediaType returns the media type of a response, lower case, without
// parameters.
func mediaType(resp *http.Response) string {
	t, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil {
		return ""
	}
	return t
}

// Reconnection delays.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 30 * time.Second
	// maxResumes is how many GETs in a row may fail to carry a stream any
	// further before a request's stream is given up.
	maxResumes = 5
)

// backoff returns the delay before the n-th consecutive retry (n from 0):
// a random value in [d/2, d] with d = min(minBackoff*2^n, maxBackoff).
func backoff(n int) time.Duration {
	d := maxBackoff
	if n < 20 {
		d = min(minBackoff<<n, maxBackoff)
	}
	return d/2 + rand.N(d/2+1)
}

// retryDelay is the server's retry hint if it gave one (the specification
// says the client MUST respect it), else backoff(n).
func retryDelay(hint time.Duration, n int) time.Duration {
	if hint > 0 {
		return min(hint, maxBackoff)
	}
	return backoff(n)
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
