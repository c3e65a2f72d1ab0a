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

package main

import (
	"bytes"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr/testr"

	"github.com/nettune/nettune/internal/httpauth"
)

// TestRunRefusesLokiURLWithCredentials: `run` with a --loki-url carrying
// user:password@ stops before touching the host, with an error naming the
// flag and --loki-credentials-dir, and without repeating the password.
func TestRunRefusesLokiURLWithCredentials(t *testing.T) {
	t.Parallel()
	const secret = "pw-Zq81x"
	for _, u := range []string{
		"http://vehicle-av-001:" + secret + "@loki.monitoring:3100",
		"https://vehicle-av-001@loki.monitoring",
		"https://:" + secret + "@loki.monitoring/",
	} {
		var out bytes.Buffer
		state := t.TempDir()
		_, err := run([]string{"run", "--node", "av-001-xavier-a", "--state-dir", state, "--netns", "nettune-no-such-netns", "--loki-url", u}, &out)
		if err == nil {
			t.Fatalf("--loki-url with credentials accepted")
		}
		msg := err.Error() + out.String()
		if !strings.Contains(err.Error(), "--loki-url") || !strings.Contains(err.Error(), "--loki-credentials-dir") {
			t.Errorf("error %q does not name --loki-url and --loki-credentials-dir", err)
		}
		if strings.Contains(msg, secret) {
			t.Errorf("the refusal repeats the password: %q", msg)
		}
		// Refused before anything was opened: no state was written.
		if des, _ := os.ReadDir(state); len(des) != 0 {
			t.Errorf("the state directory was written: %v", des)
		}
	}
	// A malformed URL with a password is refused without repeating it.
	_, err := run([]string{"run", "--node", "n", "--loki-url", "http://u:" + secret + "@loki:port/"}, &bytes.Buffer{})
	if err == nil || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "--loki-url") {
		t.Errorf("malformed --loki-url: %v", err)
	}
	for _, ok := range []string{"", "http://loki.monitoring:3100", "https://loki.example.com/", "http://127.0.0.1:3100"} {
		if err := checkLokiURL(ok); err != nil {
			t.Errorf("checkLokiURL(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"loki:3100", "ftp://loki", "http://"} {
		if err := checkLokiURL(bad); err == nil {
			t.Errorf("checkLokiURL(%q) accepted", bad)
		}
	}
}

// TestLokiClient: with --loki-credentials-dir the client sends the
// directory's credentials and trusts its CA, read again at each request;
// without it, a server certificate nobody vouches for is refused unless
// --loki-insecure-skip-verify.
func TestLokiClient(t *testing.T) {
	t.Parallel()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "av-001" || p != "pw-2" || r.Header.Get(httpauth.TenantHeader) != "fleet" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	get := func(c *http.Client) (int, error) {
		resp, err := c.Get(srv.URL)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	log := testr.New(t)

	c, _, err := lokiClient(&runOptions{}, log)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := get(c); err == nil {
		t.Error("the default client trusted an unknown certificate")
	}
	c, _, err = lokiClient(&runOptions{lokiInsecure: true}, log)
	if err != nil {
		t.Fatal(err)
	}
	if code, err := get(c); err != nil || code != http.StatusUnauthorized {
		t.Errorf("--loki-insecure-skip-verify: %d, %v; want an answer (401)", code, err)
	}

	dir := t.TempDir()
	write := func(k, v string) {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("username", "av-001")
	write("password", "pw-1")
	write("tenant", "fleet")
	write("ca.crt", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})))
	c, redact, err := lokiClient(&runOptions{lokiCredsDir: dir}, log)
	if err != nil {
		t.Fatal(err)
	}
	if code, err := get(c); err != nil || code != http.StatusUnauthorized {
		t.Errorf("old password: %d, %v; want 401", code, err)
	}
	write("password", "pw-2") // rotated
	if code, err := get(c); err != nil || code != http.StatusNoContent {
		t.Errorf("rotated password: %d, %v; want 204", code, err)
	}
	if got := redact("echo pw-2"); strings.Contains(got, "pw-2") {
		t.Errorf("redact left the password: %q", got)
	}
}
