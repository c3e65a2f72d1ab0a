/*
Copyright 2026 The nettune Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package lokipush

// These tests push through what a user's stack puts in front of Loki: a TLS
// gateway (httptest.NewTLSServer) requiring basic auth and a tenant
// (X-Scope-OrgID), with the shipper's client an httpauth.DirClient reading a
// credentials directory as the agent's --loki-credentials-dir does. A
// refused push keeps its lines on disk; fixing the directory (or the
// gateway) lets every line through, in order, without a restart.

import (
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/nettune/nettune/internal/httpauth"
)

const (
	gwUser   = "vehicle-av-001"
	gwPass   = "s3cret-rotated-pass"
	gwTenant = "fleet-a"
	gwWait   = 60 * time.Second // bound of every wait (a busy 2-core machine)
)

// lpGateway is a TLS gateway in front of a fake Loki: basic auth gwUser /
// gwPass and tenant gwTenant, else 401 (its body echoing the Authorization
// header it got, as a careless gateway might) or 403; force, when set, is
// answered to every push instead.
type lpGateway struct {
	srv      *httptest.Server
	force    atomic.Int64
	requests atomic.Int64

	mu       sync.Mutex
	lines    []string // the lines accepted, in arrival order
	accepted []http.Header
}

func lpNewGateway(t *testing.T) *lpGateway {
	g := &lpGateway{}
	g.srv = httptest.NewTLSServer(http.HandlerFunc(g.serve))
	t.Cleanup(g.srv.Close)
	return g
}

func (g *lpGateway) serve(w http.ResponseWriter, r *http.Request) {
	g.requests.Add(1)
	if code := g.force.Load(); code != 0 {
		http.Error(w, "slow down, try later", int(code))
		return
	}
	if u, p, ok := r.BasicAuth(); !ok || u != gwUser || p != gwPass {
		w.Header().Set("WWW-Authenticate", `Basic realm="loki"`)
		http.Error(w, "401 Authorization Required (got "+r.Header.Get("Authorization")+")", http.StatusUnauthorized)
		return
	}
	if got := r.Header.Get(httpauth.TenantHeader); got != gwTenant {
		http.Error(w, "tenant "+got+" is not allowed", http.StatusForbidden)
		return
	}
	if r.URL.Path != pushPath || r.Header.Get("Content-Encoding") != "gzip" {
		http.Error(w, "bad request shape", http.StatusBadRequest)
		return
	}
	zr, err := gzipReader(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req pushRequest
	if err := json.NewDecoder(zr).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, st := range req.Streams {
		for _, v := range st.Values {
			g.lines = append(g.lines, v[1])
		}
	}
	g.accepted = append(g.accepted, r.Header.Clone())
	w.WriteHeader(http.StatusNoContent)
}

func (g *lpGateway) received() ([]string, []http.Header) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.lines...), append([]http.Header(nil), g.accepted...)
}

// caPEM is the gateway's certificate, the CA an agent is given.
func (g *lpGateway) caPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: g.srv.Certificate().Raw})
}

// lpWriteKey writes (or rewrites, as a rotation does) one key of a
// credentials directory.
func lpWriteKey(t *testing.T, dir, key string, value []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, key), value, 0o600); err != nil {
		t.Fatal(err)
	}
}

// lpCredsDir is a credentials directory holding the right keys, but for
// those in override (nil: the key is left out).
func lpCredsDir(t *testing.T, g *lpGateway, override map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	keys := map[string][]byte{
		httpauth.KeyUsername: []byte(gwUser),
		httpauth.KeyPassword: []byte(gwPass + "\n"), // as `echo` writes it
		httpauth.KeyTenant:   []byte(gwTenant),
		httpauth.KeyCA:       g.caPEM(),
	}
	for k, v := range override {
		keys[k] = v
	}
	for k, v := range keys {
		if v != nil {
			lpWriteKey(t, dir, k, v)
		}
	}
	return dir
}

// lpLogs is a logger to t that also keeps every line, to look for secrets.
type lpLogs struct {
	mu    sync.Mutex
	lines []string
}

func (l *lpLogs) logger(t *testing.T) logr.Logger {
	var done atomic.Bool
	t.Cleanup(func() { done.Store(true) })
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		l.lines = append(l.lines, prefix+" "+args)
		l.mu.Unlock()
		if !done.Load() {
			t.Log(prefix, args)
		}
	}, funcr.Options{Verbosity: 1})
}

func (l *lpLogs) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// lpAssertNoSecret fails when text holds a password or a basic-auth string.
func lpAssertNoSecret(t *testing.T, what, text string, passwords ...string) {
	t.Helper()
	for _, p := range passwords {
		for _, s := range []string{p, base64.StdEncoding.EncodeToString([]byte(gwUser + ":" + p))} {
			if strings.Contains(text, s) {
				t.Errorf("%s holds a credential (%q):\n%s", what, s, text)
			}
		}
	}
}

// lpAddBatches adds groups lines "seq NNN" (increasing timestamps) in
// groups, each in a batch of its own: every batch is refused, so each
// waits to be on disk before the next is added, and several segments
// queue up.
func lpAddBatches(t *testing.T, s *lpRunning, groups, per int) []string {
	t.Helper()
	var want []string
	base := time.Now().Add(-time.Minute)
	for g := range groups {
		for i := range per {
			n := g*per + i
			line := fmt.Sprintf("seq %03d", n)
			s.Add(map[string]string{"job": "auth-test", "vehicle": "av-001"}, base.Add(time.Duration(n)*time.Millisecond), line)
			want = append(want, line)
		}
		lpWait(t, fmt.Sprintf("the %d lines added so far on disk", len(want)), gwWait, func() error {
			if h := s.Health(); h.Buffered != len(want) {
				return fmt.Errorf("health %+v", h)
			}
			return nil
		})
	}
	return want
}

// TestShipperKeepsRefusedPushesUntilFixed: for each way a push is refused
// but not for its content (401, 403, 429, 503, an untrusted server
// certificate, an unusable credentials directory), the lines stay on disk,
// none is dropped, Health and the error metric say why; once the
// credentials directory is rotated (or the gateway recovers), the same
// shipper, not restarted, delivers every line in order with the right
// headers.
func TestShipperKeepsRefusedPushesUntilFixed(t *testing.T) {
	t.Parallel()
	const wrongPass = "wrong-password-0"
	cases := []struct {
		name     string
		override map[string][]byte // of the credentials directory at start
		force    int               // the gateway's answer at start
		code     string            // nettune_loki_push_errors_total{code}
		reason   string
		message  string // in Health's message
		fix      func(t *testing.T, g *lpGateway, dir string)
	}{
		{
			name: "401 wrong password, then rotated", override: map[string][]byte{httpauth.KeyPassword: []byte(wrongPass)},
			code: "401", reason: ReasonUnauthorized, message: "HTTP 401 Unauthorized",
			fix: func(t *testing.T, _ *lpGateway, dir string) { lpWriteKey(t, dir, httpauth.KeyPassword, []byte(gwPass)) },
		},
		{
			name: "403 wrong tenant, then rotated", override: map[string][]byte{httpauth.KeyTenant: []byte("fleet-b")},
			code: "403", reason: ReasonForbidden, message: "HTTP 403 Forbidden",
			fix: func(t *testing.T, _ *lpGateway, dir string) { lpWriteKey(t, dir, httpauth.KeyTenant, []byte(gwTenant)) },
		},
		{
			name: "429", force: http.StatusTooManyRequests,
			code: "429", reason: ReasonRateLimited, message: "HTTP 429 Too Many Requests: slow down, try later",
			fix: func(_ *testing.T, g *lpGateway, _ string) { g.force.Store(0) },
		},
		{
			name: "503", force: http.StatusServiceUnavailable,
			code: "503", reason: ReasonServerError, message: "HTTP 503 Service Unavailable: slow down, try later",
			fix: func(_ *testing.T, g *lpGateway, _ string) { g.force.Store(0) },
		},
		{
			name: "untrusted CA, then ca.crt provisioned", override: map[string][]byte{httpauth.KeyCA: nil},
			code: CodeNetwork, reason: ReasonTLSError, message: "certificate signed by unknown authority",
			fix: func(t *testing.T, g *lpGateway, dir string) { lpWriteKey(t, dir, httpauth.KeyCA, g.caPEM()) },
		},
		{
			name: "password key missing, then provisioned", override: map[string][]byte{httpauth.KeyPassword: nil},
			code: CodeCredentials, reason: ReasonCredentialsInvalid, message: `key "password" is missing`,
			fix: func(t *testing.T, _ *lpGateway, dir string) { lpWriteKey(t, dir, httpauth.KeyPassword, []byte(gwPass)) },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := lpNewGateway(t)
			g.force.Store(int64(tc.force))
			dir := lpCredsDir(t, g, tc.override)
			buf := t.TempDir()
			var logs lpLogs
			s := lpStart(t, Options{URL: g.srv.URL, Dir: buf, BatchWait: 20 * time.Millisecond, BatchEntries: 1000,
				MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
				Client: httpauth.DirClient(dir, false, 10*time.Second), Log: logs.logger(t)})

			want := lpAddBatches(t, s, 3, 7)
			h := s.Health()
			if h.OK || h.Reason != tc.reason || h.Code != tc.code || !strings.Contains(h.Message, tc.message) {
				t.Errorf("health %+v, want reason %s, code %s, a message with %q", h, tc.reason, tc.code, tc.message)
			}
			if h.Since.IsZero() || h.At.Before(h.Since) {
				t.Errorf("health since %v, at %v", h.Since, h.At)
			}
			if got, _ := g.received(); len(got) != 0 {
				t.Errorf("the gateway accepted %d lines before the fix", len(got))
			}
			if tc.code == CodeCredentials && g.requests.Load() != 0 {
				t.Errorf("%d requests sent without usable credentials, want none", g.requests.Load())
			}
			if v := metricValue(s.metrics.errors.WithLabelValues(tc.code)); v < 1 {
				t.Errorf("nettune_loki_push_errors_total{code=%q} = %v, want at least 1", tc.code, v)
			}
			if v := metricValue(s.metrics.dropped); v != 0 {
				t.Errorf("%v lines dropped, want none", v)
			}
			if names, _ := lpSegments(t, buf); len(names) < 3 {
				t.Errorf("segments on disk %v, want one per batch (3)", names)
			}

			tc.fix(t, g, dir) // no restart: the next retry reads the directory again
			lpWait(t, "every buffered line delivered", gwWait, func() error {
				if got, _ := g.received(); len(got) != len(want) {
					return fmt.Errorf("%d of %d lines delivered", len(got), len(want))
				}
				return nil
			})
			got, headers := g.received()
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("lines delivered in the order\n%v\nwant\n%v", got, want)
			}
			for i, hd := range headers {
				if hd.Get(httpauth.TenantHeader) != gwTenant || hd.Get("Authorization") != "Basic "+base64.StdEncoding.EncodeToString([]byte(gwUser+":"+gwPass)) {
					t.Errorf("accepted push %d: tenant %q, authorization %q", i, hd.Get(httpauth.TenantHeader), hd.Get("Authorization"))
				}
			}
			lpWait(t, "a healthy shipper with an empty buffer", gwWait, func() error {
				h := s.Health()
				if !h.OK || h.Reason != ReasonShipped || h.Code != "204" || h.Buffered != 0 {
					return fmt.Errorf("health %+v", h)
				}
				if names, _ := lpSegments(t, buf); len(names) != 0 {
					return fmt.Errorf("segments left %v", names)
				}
				return nil
			})
			if v := metricValue(s.metrics.pushed); v != float64(len(want)) {
				t.Errorf("nettune_loki_pushed_entries_total = %v, want %d", v, len(want))
			}
			if v := metricValue(s.metrics.dropped); v != 0 {
				t.Errorf("%v lines dropped, want none", v)
			}
			lpAssertNoSecret(t, "the health message", h.Message, wrongPass, gwPass)
			lpAssertNoSecret(t, "the logs", logs.text(), wrongPass, gwPass)
		})
	}
}

// TestShipperDropsContentRejections: a 400 (bad content) still drops its
// batch and is reported as Rejected; the next push clears it.
func TestShipperDropsContentRejections(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			http.Error(w, "entry for stream has timestamp too new\nsecond line", http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	s := lpStart(t, Options{URL: srv.URL, Dir: t.TempDir(), BatchWait: 20 * time.Millisecond, MinBackoff: 20 * time.Millisecond})
	for i := range 4 {
		s.Add(map[string]string{"job": "j"}, time.Now(), fmt.Sprintf("bad %d", i))
	}
	lpWait(t, "the batch rejected", gwWait, func() error {
		if v := metricValue(s.metrics.dropped.WithLabelValues(DropRejected)); v != 4 {
			return fmt.Errorf("rejected %v", v)
		}
		return nil
	})
	h := s.Health()
	if h.OK || h.Reason != ReasonRejected || h.Code != "400" || h.Message != "HTTP 400 Bad Request: entry for stream has timestamp too new; a batch of 4 line(s) was dropped" {
		t.Errorf("health %+v", h)
	}
	s.Add(map[string]string{"job": "j"}, time.Now(), "good")
	lpWait(t, "a healthy shipper", gwWait, func() error {
		if h := s.Health(); !h.OK || h.Reason != ReasonShipped {
			return fmt.Errorf("health %+v", h)
		}
		return nil
	})
}

// TestClassify covers the answers the gateway tests do not.
func TestClassify(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code         int
		retry, ok    bool
		reason, text string
	}{
		{200, false, true, ReasonShipped, "HTTP 200 OK"},
		{204, false, true, ReasonShipped, "HTTP 204 No Content"},
		{400, false, false, ReasonRejected, "HTTP 400 Bad Request: body"},
		{404, false, false, ReasonRejected, "HTTP 404 Not Found: body"},
		{407, true, false, ReasonUnauthorized, "HTTP 407 Proxy Authentication Required"},
		{408, true, false, ReasonServerError, "HTTP 408 Request Timeout: body"},
		{413, false, false, ReasonRejected, "HTTP 413 Request Entity Too Large: body"},
		{500, true, false, ReasonServerError, "HTTP 500 Internal Server Error: body"},
		{599, true, false, ReasonServerError, "HTTP 599: body"},
	} {
		o := classify(tc.code, "body\nmore", nil)
		if o.retry != tc.retry || o.ok != tc.ok || o.reason != tc.reason || o.message != tc.text || o.code != fmt.Sprint(tc.code) {
			t.Errorf("classify(%d) = %+v, want retry %t ok %t reason %s message %q", tc.code, o, tc.retry, tc.ok, tc.reason, tc.text)
		}
	}
	long := strings.Repeat("x", 1000)
	if o := classify(500, long, nil); len(o.message) > 300 {
		t.Errorf("message of %d bytes for a long body", len(o.message))
	}
}
