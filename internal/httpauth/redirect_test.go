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
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestClientsKeepCredentialsOnTheirServer: a redirect to another server is
// refused (the credentials are set on every request the round tripper
// sends, so following it would hand them over); one on the same server is
// followed with them.
func TestClientsKeepCredentialsOnTheirServer(t *testing.T) {
	t.Parallel()
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		if r.Header.Get("Authorization") != "" {
			t.Errorf("credentials reached another server: %q", r.Header.Get("Authorization"))
		}
	}))
	t.Cleanup(other.Close)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, other.URL+"/x", http.StatusTemporaryRedirect)
		case "/here":
			http.Redirect(w, r, "/target", http.StatusTemporaryRedirect)
		case "/target":
			if u, p, ok := r.BasicAuth(); !ok || u != "u" || p != "pw-secret" {
				w.WriteHeader(http.StatusUnauthorized)
			}
		}
	}))
	t.Cleanup(srv.Close)

	dir := t.TempDir()
	for k, v := range map[string]string{KeyUsername: "u", KeyPassword: "pw-secret"} {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	fixed, err := NewTransports().Client(&Credentials{Username: "u", Password: "pw-secret"}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*http.Client{"DirClient": DirClient(dir, false, 5*time.Second), "Transports.Client": fixed} {
		resp, err := c.Get(srv.URL + "/away")
		if err == nil {
			resp.Body.Close()
			t.Errorf("%s followed a redirect to another server (%d)", name, resp.StatusCode)
		} else if !strings.Contains(err.Error(), "refusing a redirect") || strings.Contains(err.Error(), "pw-secret") {
			t.Errorf("%s: %v", name, err)
		}
		resp, err = c.Get(srv.URL + "/here")
		if err != nil {
			t.Fatalf("%s, same server: %v", name, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: a redirect on the same server ended in %d, want 200 with the credentials", name, resp.StatusCode)
		}
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the other server got %d requests", n)
	}
}

// TestReadDirSecretVolume: a Secret volume's layout (keys as symlinks into
// ..data, a symlink to a timestamped directory) is read through ..data,
// and a swap of ..data, as kubelet does at an update, is seen at the next
// read.
func TestReadDirSecretVolume(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	snapshot := func(name, password string) {
		d := filepath.Join(dir, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for k, v := range map[string]string{KeyUsername: "u", KeyPassword: password, KeyTenant: "fleet"} {
			if err := os.WriteFile(filepath.Join(d, k), []byte(v), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		tmp := filepath.Join(dir, "..data_tmp")
		if err := os.Symlink(name, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	snapshot("..2026_01_01_00_00_00.1", "pw-1")
	for _, k := range []string{KeyUsername, KeyPassword, KeyTenant} {
		if err := os.Symlink(filepath.Join("..data", k), filepath.Join(dir, k)); err != nil {
			t.Fatal(err)
		}
	}
	c, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.Username != "u" || c.Password != "pw-1" || c.Tenant != "fleet" {
		t.Errorf("read %+v", c)
	}
	snapshot("..2026_01_02_00_00_00.2", "pw-2")
	if c, err := ReadDir(dir); err != nil || c.Password != "pw-2" {
		t.Errorf("after the swap: %v, %v", c, err)
	}
}
