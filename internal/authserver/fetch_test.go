package authserver

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
)

// TestDocumentFetchRefusesNonPublicAddresses: a document URL whose host
// resolves to this machine, a private network, the cloud metadata
// service or any other special-use address is refused before a
// connection is made, and the refusal does not tell the client the
// address.
func TestDocumentFetchRefusesNonPublicAddresses(t *testing.T) {
	for _, addrs := range [][]string{
		{"127.0.0.1"}, // rewritten below to the document server's own address
		{"10.0.0.5"},
		{"172.16.3.4"},
		{"192.168.1.1"},
		{"169.254.169.254"},
		{"100.64.0.1"},
		{"0.0.0.0"},
		{"::1"},
		{"::"},
		{"fd00::1"},
		{"fe80::1"},
		{"::ffff:169.254.169.254"},
		{"64:ff9b::a9fe:a9fe"}, // NAT64 of 169.254.169.254
		{"2002:a9fe:a9fe::1"},  // 6to4 of it
		{"93.184.215.14", "10.0.0.1"},
	} {
		t.Run(addrs[0], func(t *testing.T) {
			s := newClientsServer(t, newClientsClock(), nil)
			h := newDocHost(t)
			trustDocHosts(s, h)
			h.serveDocument(testDocument, "")
			f := s.clients.docs.fetch
			f.allowDial = nil // the test option off: the fence as in production
			var answer []netip.Addr
			for _, a := range addrs {
				answer = append(answer, netip.MustParseAddr(a))
			}
			if addrs[0] == "127.0.0.1" {
				answer[0] = h.addrPort().Addr()
			}
			f.lookup = func(context.Context, string) ([]netip.Addr, error) { return answer, nil }
			_, err := s.clients.client(context.Background(), h.url+"/c.json")
			if !errors.Is(err, ErrClientDocument) || !strings.Contains(err.Error(), errBlockedAddress.Error()) {
				t.Fatalf("host at %v: %v, want a refusal", addrs, err)
			}
			if strings.Contains(err.Error(), addrs[0]) {
				t.Errorf("the refusal %q names the address", err)
			}
			if h.hits.Load() != 0 {
				t.Error("the document server was reached")
			}
		})
	}
}

// TestDocumentFetchRefusesLoopbackURLs: the same with the system
// resolver, for URLs that name loopback or a private address outright.
func TestDocumentFetchRefusesLoopbackURLs(t *testing.T) {
	s := newClientsServer(t, newClientsClock(), nil)
	h := newDocHost(t)
	h.serveDocument(testDocument, "")
	port := h.url[strings.LastIndexByte(h.url, ':'):]
	for _, host := range []string{"127.0.0.1", "localhost", "[::1]", "169.254.169.254", "10.1.2.3", "[::ffff:127.0.0.1]"} {
		_, err := s.clients.client(context.Background(), "https://"+host+port+"/c.json")
		if !errors.Is(err, ErrClientDocument) {
			t.Errorf("%s: %v, want a refusal", host, err)
		}
	}
	if h.hits.Load() != 0 {
		t.Errorf("the loopback document server was reached %d times", h.hits.Load())
	}
}

// TestDocumentFetchChecksAtDial: the address is checked again on the
// socket about to connect, so an answer that passed the first check
// (DNS rebinding: the name resolves elsewhere by the time it is dialled)
// is still refused, before any connection.
func TestDocumentFetchChecksAtDial(t *testing.T) {
	s := newClientsServer(t, newClientsClock(), nil)
	h := newDocHost(t)
	trustDocHosts(s, h)
	h.serveDocument(testDocument, "")
	var checks atomic.Int32
	s.clients.docs.fetch.allowDial = func(ap netip.AddrPort) bool {
		return checks.Add(1) == 1 // the check of the DNS answer passes; the one at dial time does not
	}
	_, err := s.clients.client(context.Background(), h.url+"/c.json")
	if !errors.Is(err, ErrClientDocument) || !strings.Contains(err.Error(), errBlockedAddress.Error()) {
		t.Fatalf("%v, want a refusal at dial time", err)
	}
	if checks.Load() != 2 || h.hits.Load() != 0 {
		t.Errorf("%d checks, %d requests served; want 2 checks and none served", checks.Load(), h.hits.Load())
	}
}

func TestDocumentFetchControl(t *testing.T) {
	f := newDocFetcher()
	for addr, ok := range map[string]bool{
		"127.0.0.1:443":            false,
		"[::1]:443":                false,
		"169.254.169.254:80":       false,
		"10.0.0.1:443":             false,
		"[::ffff:10.0.0.1]:443":    false,
		"[fe80::1%eth0]:443":       false,
		"8.8.8.8:443":              true,
		"[2606:4700:4700::1]:443":  true,
		"not an address":           false,
		"[64:ff9b::808:808]:443":   false, // NAT64 is refused whatever it embeds: its gateway is ours
		"224.0.0.1:443":            false,
		"255.255.255.255:443":      false,
		"[ff02::1]:443":            false,
		"[2001:db8::1]:443":        false,
		"198.18.0.1:443":           false,
		"[2001:4860:4860::8888]:1": true,
	} {
		if err := f.control("tcp", addr, nil); (err == nil) != ok {
			t.Errorf("control(%q) = %v, want ok %v", addr, err, ok)
		}
	}
}
