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

package stack

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nettune/nettune/internal/localcp"
	"github.com/nettune/nettune/internal/pki"
)

// requireTools skips the test when one of bins is missing, unless
// NETTUNE_REQUIRE_TOOLS is set (then it fails).
func requireTools(t *testing.T, bins ...string) {
	t.Helper()
	var missing []string
	for _, bin := range bins {
		if bin == "loki" {
			root, err := localcp.RepoRoot()
			if err != nil {
				t.Fatalf("finding the repository: %v", err)
			}
			bin = filepath.Join(root, "bin", "loki")
		}
		if _, err := os.Stat(bin); err != nil {
			missing = append(missing, bin)
		}
	}
	if len(missing) == 0 {
		return
	}
	if os.Getenv("NETTUNE_REQUIRE_TOOLS") != "" {
		t.Fatalf("missing %s (NETTUNE_REQUIRE_TOOLS is set): run 'make tools' and hack/deps.sh", strings.Join(missing, ", "))
	}
	t.Skipf("missing %s: run 'make tools' and hack/deps.sh (NETTUNE_REQUIRE_TOOLS=1 makes this a failure)", strings.Join(missing, ", "))
}

// call is one request of a test: credentials, tenant and an optional body.
type call struct {
	method, path   string
	user, password string // basic auth when user != ""
	token          string // bearer when != ""
	tenant         string // X-Scope-OrgID when != ""
	body           string
}

// do sends c to base with client and returns the status and body.
func do(t *testing.T, client *http.Client, base string, c call) (int, string, error) {
	t.Helper()
	method := c.method
	if method == "" {
		method = http.MethodGet
	}
	req, err := http.NewRequest(method, base+c.path, strings.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	if c.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.user != "" {
		req.SetBasicAuth(c.user, c.password)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.tenant != "" {
		req.Header.Set("X-Scope-OrgID", c.tenant)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64*1024))
	return resp.StatusCode, string(b), nil
}

// expect sends c and fails the test unless the answer is want.
func expect(t *testing.T, client *http.Client, base string, c call, want int) string {
	t.Helper()
	code, body, err := do(t, client, base, c)
	if err != nil {
		t.Fatalf("%s %s (user %q, tenant %q): %v, want HTTP %d", c.method, c.path, c.user, c.tenant, err, want)
	}
	if code != want {
		t.Fatalf("%s %s (user %q, tenant %q): HTTP %d %q, want %d", c.method, c.path, c.user, c.tenant, code, truncate([]byte(body)), want)
	}
	return body
}

// pushBody is a Loki push of lines as one stream {job=job}, a second apart
// ending now.
func pushBody(t *testing.T, job string, lines ...string) string {
	t.Helper()
	now := time.Now()
	stream := lokiStream{Stream: map[string]string{"job": job}}
	for i, line := range lines {
		ts := now.Add(time.Duration(i-len(lines)) * time.Second)
		stream.Values = append(stream.Values, [2]string{strconv.FormatInt(ts.UnixNano(), 10), line})
	}
	b, err := json.Marshal(map[string][]lokiStream{"streams": {stream}})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// countPath is a Loki instant query of the number of lines of job in the last hour.
func countPath(job string) string {
	return "/loki/api/v1/query?" + url.Values{"query": {fmt.Sprintf(`sum(count_over_time({job=%q}[1h]))`, job)}}.Encode()
}

// waitCount polls countPath(job) through client until it answers want, and
// fails the test after a minute.
func waitCount(t *testing.T, client *http.Client, base string, c call, job string, want float64) {
	t.Helper()
	c.path = countPath(job)
	deadline := time.Now().Add(time.Minute)
	var last string
	for {
		code, body, err := do(t, client, base, c)
		switch {
		case err != nil:
			last = err.Error()
		case code != http.StatusOK:
			last = fmt.Sprintf("HTTP %d %s", code, truncate([]byte(body)))
		default:
			values, err := sampleValues([]byte(body))
			var sum float64
			for _, v := range values {
				sum += v
			}
			if err == nil && sum == want {
				return
			}
			last = fmt.Sprintf("values %v (%v)", values, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("count of {job=%q} as tenant %q did not reach %v within a minute; last: %s", job, c.tenant, want, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestLokiAuthTenants(t *testing.T) {
	t.Parallel()
	requireTools(t, "loki")
	l := startLoki(t, LokiOptions{Auth: true})
	if l.Tenant != DefaultLokiTenant {
		t.Fatalf("Tenant = %q, want %q", l.Tenant, DefaultLokiTenant)
	}

	// Without X-Scope-OrgID, Loki refuses pushes and queries.
	body := expect(t, httpClient, l.URL, call{method: http.MethodPost, path: "/loki/api/v1/push", body: pushBody(t, "x", "no tenant")}, http.StatusUnauthorized)
	if !strings.Contains(body, "no org id") {
		t.Errorf("push without X-Scope-OrgID answered %q, want \"no org id\"", body)
	}
	expect(t, httpClient, l.URL, call{path: countPath("x")}, http.StatusUnauthorized)

	// The helpers send the Loki's Tenant.
	must(t, l.Push(map[string]string{"job": "x"}, []LokiEntry{{Time: time.Now(), Line: "default tenant"}}))
	must(t, l.WaitForCount(`{job="x"}`, 1, time.Minute))

	// Each tenant sees its own lines; "a|b" sees both.
	a, b := l.WithTenant("a"), l.WithTenant("b")
	must(t, a.Push(map[string]string{"job": "x"}, []LokiEntry{{Time: time.Now(), Line: "a 1"}, {Time: time.Now().Add(time.Millisecond), Line: "a 2"}}))
	must(t, b.Push(map[string]string{"job": "x"}, []LokiEntry{{Time: time.Now(), Line: "b 1"}, {Time: time.Now().Add(time.Millisecond), Line: "b 2"}, {Time: time.Now().Add(2 * time.Millisecond), Line: "b 3"}}))
	must(t, l.WithTenant("a|b").WaitForCount(`{job="x"}`, 5, time.Minute))
	for tenant, want := range map[string]float64{"a": 2, "b": 3, "a|b": 5, DefaultLokiTenant: 1} {
		waitCount(t, httpClient, l.URL, call{tenant: tenant}, "x", want)
	}
	// A push names one tenant only.
	expect(t, httpClient, l.URL, call{method: http.MethodPost, path: "/loki/api/v1/push", tenant: "a|b", body: pushBody(t, "x", "two tenants")}, http.StatusBadRequest)
}

// echoUpstream answers every request 200 with the X-Scope-OrgID and
// Authorization it received, as JSON.
func echoUpstream(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{
			"path":          r.URL.RequestURI(),
			"tenant":        r.Header.Values("X-Scope-OrgID"),
			"authorization": r.Header.Get("Authorization"),
		})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// otherCAClient trusts a CA other than the gateway's.
func otherCAClient(t *testing.T) *http.Client {
	t.Helper()
	other, err := pki.NewCA("other-ca", big.NewInt(1), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientTLSConfig(other.CertPEM, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return newTLSClient(cfg)
}

// expectUntrusted fails the test unless the request fails TLS verification.
func expectUntrusted(t *testing.T, client *http.Client, base string, c call) {
	t.Helper()
	code, _, err := do(t, client, base, c)
	var unknown x509.UnknownAuthorityError
	var verify *tls.CertificateVerificationError
	if err == nil || !errors.As(err, &verify) || !errors.As(err, &unknown) {
		t.Fatalf("request trusting another CA: HTTP %d, error %v; want an unknown-authority verification error", code, err)
	}
}

func TestGatewayTenantsAndHeaders(t *testing.T) {
	t.Parallel()
	requireTools(t, nginxBin, htpasswdBin)
	gw := startGateway(t, GatewayOptions{
		Upstream: echoUpstream(t),
		Users: []GatewayUser{
			{Name: "alice", Password: "alice-pw", Tenants: []string{"a", "b"}},
			{Name: "bob", Password: "bob-pw", Tenants: []string{"b.x"}},
			{Name: "carol", Token: "tok-C.1+/=", Tenants: []string{"*"}},
		},
	})
	if !strings.HasPrefix(gw.URL, "https://127.0.0.1:") {
		t.Fatalf("URL = %q", gw.URL)
	}
	c := client(t, gw)

	// Authentication comes first: 401 whatever the tenant.
	expect(t, c, gw.URL, call{path: "/x", tenant: "a"}, http.StatusUnauthorized)
	expect(t, c, gw.URL, call{path: "/x", user: "alice", password: "wrong", tenant: "a"}, http.StatusUnauthorized)
	expect(t, c, gw.URL, call{path: "/x", user: "alice", password: "wrong", tenant: "zz"}, http.StatusUnauthorized)
	expect(t, c, gw.URL, call{path: "/x", user: "nobody", password: "alice-pw", tenant: "a"}, http.StatusUnauthorized)
	expect(t, c, gw.URL, call{path: "/x", user: "carol", password: "tok-C.1+/=", tenant: "a"}, http.StatusUnauthorized)
	expect(t, c, gw.URL, call{path: "/x", token: "tok-c.1+/=", tenant: "a"}, http.StatusUnauthorized)
	expect(t, c, gw.URL, call{path: "/x", token: "tok-C.1+/", tenant: "a"}, http.StatusUnauthorized)

	// Then the tenants: each one named must be allowed.
	for _, tc := range []struct {
		user, password, token, tenant string
		want                          int
	}{
		{"alice", "alice-pw", "", "a", http.StatusOK},
		{"alice", "alice-pw", "", "b", http.StatusOK},
		{"alice", "alice-pw", "", "a|b", http.StatusOK},
		{"alice", "alice-pw", "", "b|a|b", http.StatusOK},
		{"alice", "alice-pw", "", "c", http.StatusForbidden},
		{"alice", "alice-pw", "", "a|c", http.StatusForbidden},
		{"alice", "alice-pw", "", "A", http.StatusForbidden},
		{"alice", "alice-pw", "", "a|", http.StatusForbidden},
		{"alice", "alice-pw", "", "ab", http.StatusForbidden},
		{"bob", "bob-pw", "", "b.x", http.StatusOK},
		{"bob", "bob-pw", "", "bax", http.StatusForbidden},
		{"bob", "bob-pw", "", "b", http.StatusForbidden},
		{"bob", "bob-pw", "", "a", http.StatusForbidden},
		{"", "", "tok-C.1+/=", "anything|else", http.StatusOK},
	} {
		code, body, err := do(t, c, gw.URL, call{path: "/loki/api/v1/query?query=x", user: tc.user, password: tc.password, token: tc.token, tenant: tc.tenant})
		if err != nil || code != tc.want {
			t.Errorf("user %q token %q tenant %q: HTTP %d %q (%v), want %d", tc.user, tc.token, tc.tenant, code, truncate([]byte(body)), err, tc.want)
			continue
		}
		if code != http.StatusOK {
			continue
		}
		var got struct {
			Path          string   `json:"path"`
			Tenant        []string `json:"tenant"`
			Authorization string   `json:"authorization"`
		}
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			t.Fatalf("upstream answer %q: %v", body, err)
		}
		if got.Path != "/loki/api/v1/query?query=x" || len(got.Tenant) != 1 || got.Tenant[0] != tc.tenant || got.Authorization != "" {
			t.Errorf("user %q tenant %q: the upstream got %+v, want the path and X-Scope-OrgID unchanged and no Authorization", tc.user, tc.tenant, got)
		}
	}

	// Only the test CA is trusted.
	expectUntrusted(t, otherCAClient(t), gw.URL, call{path: "/x", user: "alice", password: "alice-pw", tenant: "a"})
	expectUntrusted(t, &http.Client{Timeout: time.Minute}, gw.URL, call{path: "/x", user: "alice", password: "alice-pw", tenant: "a"})
}

func TestGatewayClientCert(t *testing.T) {
	t.Parallel()
	requireTools(t, nginxBin, htpasswdBin)
	gw := startGateway(t, GatewayOptions{
		Upstream:          echoUpstream(t),
		Users:             []GatewayUser{{Name: "alice", Password: "pw", Tenants: []string{"a"}}},
		RequireClientCert: true,
	})
	ok := call{path: "/x", user: "alice", password: "pw", tenant: "a"}
	expect(t, client(t, gw), gw.URL, ok, http.StatusOK)

	// Without a certificate, or with one of another CA, nginx answers 400.
	noCert, err := clientTLSConfig(gw.CAPEM, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, newTLSClient(noCert), gw.URL, ok, http.StatusBadRequest)
	other, err := pki.NewCA("other-ca", big.NewInt(1), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := issueClientCert(other, "mallory")
	if err != nil {
		t.Fatal(err)
	}
	otherCert, err := clientTLSConfig(gw.CAPEM, certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, newTLSClient(otherCert), gw.URL, ok, http.StatusBadRequest)

	// A certificate of the gateway's CA passes.
	if certPEM, keyPEM, err = gw.ClientCert("vehicle-0001"); err != nil {
		t.Fatal(err)
	}
	mine, err := clientTLSConfig(gw.CAPEM, certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, newTLSClient(mine), gw.URL, ok, http.StatusOK)
}

func TestGatewayLoki(t *testing.T) {
	t.Parallel()
	requireTools(t, "loki", nginxBin, htpasswdBin)
	l := startLoki(t, LokiOptions{Auth: true})
	gw := startGateway(t, GatewayOptions{
		Upstream: l.URL,
		Users: []GatewayUser{
			{Name: "fleet", Password: "fleet-pw", Tenants: []string{"fleet-a", "fleet-b"}},
			{Name: "grafana", Token: "grafana-token", Tenants: []string{"fleet-b"}},
		},
	})
	c := client(t, gw)
	push := func(user, password, tenant, line string) call {
		return call{method: http.MethodPost, path: "/loki/api/v1/push", user: user, password: password, tenant: tenant, body: pushBody(t, "gw", line)}
	}

	expect(t, c, gw.URL, push("fleet", "wrong", "fleet-a", "x"), http.StatusUnauthorized)
	expect(t, c, gw.URL, push("fleet", "fleet-pw", "other", "x"), http.StatusForbidden)
	expect(t, c, gw.URL, push("fleet", "fleet-pw", "fleet-a|other", "x"), http.StatusForbidden)
	// Without a tenant the gateway passes the request on and Loki refuses it.
	expect(t, c, gw.URL, push("fleet", "fleet-pw", "", "x"), http.StatusUnauthorized)

	expect(t, c, gw.URL, push("fleet", "fleet-pw", "fleet-a", "a 1"), http.StatusNoContent)
	expect(t, c, gw.URL, push("fleet", "fleet-pw", "fleet-b", "b 1"), http.StatusNoContent)
	waitCount(t, c, gw.URL, call{user: "fleet", password: "fleet-pw", tenant: "fleet-a"}, "gw", 1)
	waitCount(t, c, gw.URL, call{user: "fleet", password: "fleet-pw", tenant: "fleet-a|fleet-b"}, "gw", 2)
	waitCount(t, c, gw.URL, call{token: "grafana-token", tenant: "fleet-b"}, "gw", 1)
	expect(t, c, gw.URL, call{path: countPath("gw"), token: "grafana-token", tenant: "fleet-a|fleet-b"}, http.StatusForbidden)
	// What went through the gateway is in Loki under the tenant named.
	must(t, l.WithTenant("fleet-a").WaitForCount(`{job="gw"}`, 1, time.Minute))

	ok := call{path: countPath("gw"), user: "fleet", password: "fleet-pw", tenant: "fleet-a"}
	expectUntrusted(t, otherCAClient(t), gw.URL, ok)

	// 429 on every request, then back.
	must(t, gw.SetMode("429"))
	expect(t, c, gw.URL, ok, http.StatusTooManyRequests)
	expect(t, c, gw.URL, push("fleet", "fleet-pw", "fleet-a", "throttled"), http.StatusTooManyRequests)
	expect(t, c, gw.URL, call{path: "/x"}, http.StatusTooManyRequests)
	must(t, gw.SetMode(""))
	expect(t, c, gw.URL, ok, http.StatusOK)

	// Password rotation: the old one is refused at once, the new one works.
	must(t, gw.SetPassword("fleet", "fleet-pw-2"))
	expect(t, c, gw.URL, ok, http.StatusUnauthorized)
	ok.password = "fleet-pw-2"
	expect(t, c, gw.URL, ok, http.StatusOK)

	// Down: connection refused; up again on the same port.
	must(t, gw.Stop())
	if code, _, err := do(t, c, gw.URL, ok); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("request to the stopped gateway: HTTP %d, error %v; want connection refused", code, err)
	}
	// A mode set while down applies at Start.
	must(t, gw.SetMode("503"))
	must(t, gw.Start())
	expect(t, c, gw.URL, ok, http.StatusServiceUnavailable)
	must(t, gw.SetMode(""))
	body := expect(t, c, gw.URL, ok, http.StatusOK)
	if values, err := sampleValues([]byte(body)); err != nil || len(values) != 1 || values[0] != 1 {
		t.Fatalf("count after the restart: %v (%v), want [1]", values, err)
	}
}

func TestPrometheusTLSBasicAuth(t *testing.T) {
	t.Parallel()
	requireTools(t, prometheusBin, htpasswdBin)
	target := gaugeTarget(t, "# TYPE nettune_test_gauge gauge\nnettune_test_gauge 7\n")
	p := startPrometheus(t, PrometheusOptions{
		Targets: []string{target},
		TLS:     true,
		Users:   map[string]string{"analyst": "analyst-pw", "zed": "zed-pw"},
	})
	if !strings.HasPrefix(p.URL, "https://127.0.0.1:") || p.Username != "analyst" {
		t.Fatalf("URL %q, Username %q", p.URL, p.Username)
	}
	// The helper uses the CA and the credentials.
	if got := waitForQuery(t, p, `nettune_test_gauge`, time.Minute); got != 7 {
		t.Fatalf("nettune_test_gauge = %v, want 7", got)
	}

	cfg, err := clientTLSConfig(p.CAPEM, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := newTLSClient(cfg)
	query := "/api/v1/query?" + url.Values{"query": {"nettune_test_gauge"}}.Encode()
	expect(t, c, p.URL, call{path: query}, http.StatusUnauthorized)
	expect(t, c, p.URL, call{path: query, user: "analyst", password: "zed-pw"}, http.StatusUnauthorized)
	expectUntrusted(t, otherCAClient(t), p.URL, call{path: query, user: "analyst", password: "analyst-pw"})
	body := expect(t, c, p.URL, call{path: query, user: "zed", password: "zed-pw"}, http.StatusOK)
	if values, err := sampleValues([]byte(body)); err != nil || len(values) != 1 || values[0] != 7 {
		t.Fatalf("query answered %v (%v), want [7]", values, err)
	}
	// Plain HTTP is refused.
	if code, _, err := do(t, httpClient, strings.Replace(p.URL, "https://", "http://", 1), call{path: query, user: "zed", password: "zed-pw"}); err == nil && code == http.StatusOK {
		t.Fatalf("plain HTTP answered 200")
	}
}

func TestPrometheusClientCert(t *testing.T) {
	t.Parallel()
	requireTools(t, prometheusBin)
	p := startPrometheus(t, PrometheusOptions{TLS: true, RequireClientCert: true})
	if got := waitForQuery(t, p, `vector(3)`, time.Minute); got != 3 {
		t.Fatalf("vector(3) = %v", got)
	}
	noCert, err := clientTLSConfig(p.CAPEM, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if code, _, err := do(t, newTLSClient(noCert), p.URL, call{path: "/-/ready"}); err == nil {
		t.Fatalf("request without a client certificate: HTTP %d, want a TLS error", code)
	}
	certPEM, keyPEM, err := p.ClientCert("grafana")
	if err != nil {
		t.Fatal(err)
	}
	mine, err := clientTLSConfig(p.CAPEM, certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, newTLSClient(mine), p.URL, call{path: "/-/ready"}, http.StatusOK)
}

// TestGatewayLifecycle checks the runtime controls against a plain upstream
// (TestGatewayLoki does again in front of Loki).
func TestGatewayLifecycle(t *testing.T) {
	t.Parallel()
	requireTools(t, nginxBin, htpasswdBin)
	gw := startGateway(t, GatewayOptions{
		Upstream: echoUpstream(t) + "/",
		Users:    []GatewayUser{{Name: "alice", Password: "old-pw", Tenants: []string{"a"}}},
	})
	c := client(t, gw)
	ok := call{path: "/x", user: "alice", password: "old-pw", tenant: "a"}
	expect(t, c, gw.URL, ok, http.StatusOK)

	must(t, gw.SetMode("429"))
	expect(t, c, gw.URL, ok, http.StatusTooManyRequests)
	expect(t, c, gw.URL, call{path: "/x"}, http.StatusTooManyRequests)
	must(t, gw.SetMode(""))
	expect(t, c, gw.URL, ok, http.StatusOK)

	must(t, gw.SetPassword("alice", "new-pw"))
	expect(t, c, gw.URL, ok, http.StatusUnauthorized)
	ok.password = "new-pw"
	expect(t, c, gw.URL, ok, http.StatusOK)

	port := gw.URL[strings.LastIndex(gw.URL, ":"):]
	must(t, gw.Stop())
	if code, _, err := do(t, c, gw.URL, ok); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("request to the stopped gateway: HTTP %d, error %v; want connection refused", code, err)
	}
	must(t, gw.SetPassword("alice", "newer-pw")) // applies at Start
	must(t, gw.Start())
	if !strings.HasSuffix(gw.URL, port) {
		t.Fatalf("URL after Start = %s, want port %s", gw.URL, port)
	}
	expect(t, c, gw.URL, ok, http.StatusUnauthorized)
	ok.password = "newer-pw"
	expect(t, c, gw.URL, ok, http.StatusOK)
}
