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

package httpauth

import (
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nettune/nettune/internal/pki"
)

func TestParseNamesTheKey(t *testing.T) {
	cert, key := selfSigned(t)
	cases := []struct {
		name    string
		data    map[string]string
		key     string // the key the error must name
		mention string
	}{
		{"empty", map[string]string{}, "tenant", "holds no keys"},
		{"username without password", map[string]string{"username": "u"}, "password", "is missing"},
		{"password without username", map[string]string{"password": "p4ss"}, "username", "is missing"},
		{"token beside basic auth", map[string]string{"username": "u", "password": "p4ss", "token": "t0ken"}, "token", "keep one"},
		{"misspelled key", map[string]string{"passwd": "p4ss"}, "passwd", "not a credentials key"},
		{"bad tenant", map[string]string{"tenant": "a b"}, "tenant", "not a tenant"},
		{"cert without key", map[string]string{"tls.crt": string(cert)}, "tls.key", "is missing"},
		{"key without cert", map[string]string{"tls.key": string(key)}, "tls.crt", "is missing"},
		{"ca not PEM", map[string]string{"ca.crt": "not a certificate"}, "ca.crt", "no PEM"},
		{"authorization as a header", map[string]string{"header.Authorization": "Bearer x"}, "header.Authorization", "use those"},
		{"header with a line break", map[string]string{"header.X-A": "a\r\nb: c"}, "header.X-A", "line break"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := map[string][]byte{}
			for k, v := range c.data {
				data[k] = []byte(v)
			}
			_, err := Parse("Secret ns/creds", data)
			var ke *KeyError
			if !errors.As(err, &ke) {
				t.Fatalf("Parse = %v, want a KeyError", err)
			}
			if ke.Key != c.key || !strings.Contains(err.Error(), c.mention) || !strings.HasPrefix(err.Error(), "Secret ns/creds: key ") {
				t.Fatalf("error %q names key %q, want %q and %q", err, ke.Key, c.key, c.mention)
			}
			for _, v := range []string{"p4ss", "t0ken"} {
				if strings.Contains(err.Error(), v) {
					t.Fatalf("error %q shows a secret value", err)
				}
			}
		})
	}
}

func TestApplyAndRedact(t *testing.T) {
	c, err := Parse("s", map[string][]byte{"tenant": []byte("fleet-a|fleet-b\n"), "username": []byte("grafana\n"), "password": []byte("s3cret-pw"),
		"header.X-Extra": []byte("extra-value")})
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	c.Apply(h)
	if got := h.Get("X-Scope-OrgID"); got != "fleet-a|fleet-b" {
		t.Errorf("X-Scope-OrgID = %q", got)
	}
	if user, pass, ok := (&http.Request{Header: h}).BasicAuth(); !ok || user != "grafana" || pass != "s3cret-pw" {
		t.Errorf("basic auth = %q %q %v", user, pass, ok)
	}
	if h.Get("X-Extra") != "extra-value" {
		t.Errorf("X-Extra = %q", h.Get("X-Extra"))
	}
	msg := c.Redact("sent " + h.Get("Authorization") + " with s3cret-pw and extra-value")
	for _, v := range []string{"s3cret-pw", "extra-value", strings.TrimPrefix(h.Get("Authorization"), "Basic ")} {
		if strings.Contains(msg, v) {
			t.Errorf("Redact left %q in %q", v, msg)
		}
	}
	if d := c.Describe(); strings.Contains(d, "s3cret") || !strings.Contains(d, "tenant fleet-a|fleet-b") || !strings.Contains(d, "basic auth as grafana") {
		t.Errorf("Describe = %q", d)
	}
	tok, err := Parse("s", map[string][]byte{"token": []byte("tok-123\n")})
	if err != nil {
		t.Fatal(err)
	}
	h = http.Header{}
	tok.Apply(h)
	if h.Get("Authorization") != "Bearer tok-123" || h.Get("X-Scope-OrgID") != "" {
		t.Errorf("token headers %v", h)
	}
}

// TestDirClientRotation: a client over a directory sends what the
// directory holds at each request, trusts only its ca.crt, and fails with
// a CredentialsError (sending nothing) while the directory is unusable.
func TestDirClientRotation(t *testing.T) {
	var hits int
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		if u, p, ok := r.BasicAuth(); !ok || u != "agent" || p != "new-password" || r.Header.Get("X-Scope-OrgID") != "fleet" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	dir := t.TempDir()
	write := func(k, v string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c := DirClient(dir, false, 5*time.Second)
	get := func() (int, error) {
		resp, err := c.Get(srv.URL)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}

	write("username", "agent")
	_, err := get()
	var ce *CredentialsError
	if err == nil || !strings.Contains(err.Error(), `key "password" is missing`) || !errors.As(err, &ce) {
		t.Fatalf("half a Secret: %v, want a CredentialsError naming the missing key", err)
	}
	if hits != 0 {
		t.Fatalf("%d requests reached the server with unusable credentials", hits)
	}
	write("password", "old-password")
	write("tenant", "fleet")
	if _, err := get(); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("without ca.crt: %v, want a certificate verification error", err)
	}
	write("ca.crt", string(ca))
	if code, err := get(); err != nil || code != http.StatusUnauthorized {
		t.Fatalf("old password: %d %v, want 401", code, err)
	}
	write("password", "new-password") // rotated, same client
	if code, err := get(); err != nil || code != http.StatusNoContent {
		t.Fatalf("rotated password: %d %v, want 204", code, err)
	}
}

func selfSigned(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	ca, err := pki.NewCA("httpauth-test", big.NewInt(1), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err = ca.Issue(pki.Cert{Serial: big.NewInt(2), CommonName: "client", Validity: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM
}
