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
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nettune/nettune/internal/pki"
)

const (
	// prometheusBin is Debian's package `prometheus` (2.42 on bookworm).
	prometheusBin          = "/usr/bin/prometheus"
	prometheusReadyTimeout = 60 * time.Second
)

// PrometheusJob is the job label of every target RunPrometheus scrapes.
const PrometheusJob = "nettune-test"

// Prometheus is /usr/bin/prometheus (Debian) with a temp TSDB, on a free port,
// scraping the given targets every 1s as job "nettune-test".
//
// RunPrometheusOpts can put it behind its own --web.config.file: TLS with
// a certificate of its own CA and basic auth with bcrypt-hashed passwords,
// as a user's Prometheus is served. Its helpers use the CA and credentials.
type Prometheus struct {
	// URL is the base address, e.g. http://127.0.0.1:34567, or
	// https://127.0.0.1:34567 with TLS.
	URL string
	// CA signed the server certificate (nil without TLS); CAPEM is its
	// certificate, PEM-encoded, for clients to trust.
	CA    *pki.CA
	CAPEM []byte
	// Username and Password are the credentials the helpers (WaitForQuery)
	// send; RunPrometheusOpts sets them to the first of Users by name.
	Username, Password string

	server
	clientCert []byte // a client certificate the helpers present (RequireClientCert)
	clientKey  []byte
	httpc      *http.Client // the helpers' client: trusts CA, presents clientCert
}

// PrometheusOptions configures RunPrometheusOpts.
type PrometheusOptions struct {
	// Targets are scraped (host:port, plain HTTP, path /metrics) every second.
	Targets []string
	// TLS serves HTTPS (tls_server_config) with a certificate for 127.0.0.1
	// and localhost signed by CA.
	TLS bool
	// CA signs the server certificate; nil: a new CA made for this Prometheus.
	CA *pki.CA
	// RequireClientCert (with TLS) requires a client certificate signed by CA
	// (client_auth_type: RequireAndVerifyClientCert).
	RequireClientCert bool
	// Users maps user names to passwords for basic_auth_users (stored as
	// bcrypt hashes); empty: no authentication.
	Users map[string]string
}

// RunPrometheus starts Prometheus with its TSDB in dir (emptied first),
// scraping targets (host:port, plain HTTP, path /metrics) every second, and
// waits until /-/ready answers 200. It fails if Prometheus is not installed
// (Debian package `prometheus`). Close stops it.
func RunPrometheus(dir string, targets []string) (*Prometheus, error) {
	return RunPrometheusOpts(dir, PrometheusOptions{Targets: targets})
}

// RunPrometheusOpts is RunPrometheus with options (TLS, basic auth, a client
// certificate requirement; see PrometheusOptions), e.g. for the fleet's
// secure stack (internal/fleet Options.Secure). Basic auth needs htpasswd
// (Debian's apache2-utils).
func RunPrometheusOpts(dir string, opts PrometheusOptions) (*Prometheus, error) {
	bin := prometheusBin
	if _, err := os.Stat(bin); err != nil {
		found, lookErr := exec.LookPath("prometheus")
		if lookErr != nil {
			return nil, fmt.Errorf("%s is missing: install the Debian package prometheus (make deps)", prometheusBin)
		}
		bin = found
	}
	if len(opts.Users) > 0 {
		if _, err := os.Stat(htpasswdBin); err != nil {
			return nil, fmt.Errorf("%s is missing (basic auth hashes passwords with it): install the Debian package apache2-utils (hack/deps.sh)", htpasswdBin)
		}
	}
	return runInDir("Prometheus", dir, func() (*Prometheus, error) {
		return launchPrometheus(bin, dir, opts)
	})
}

func launchPrometheus(bin, dir string, opts PrometheusOptions) (*Prometheus, error) {
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	configPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configPath, []byte(prometheusConfig(opts.Targets)), 0o644); err != nil {
		return nil, err
	}
	listen := fmt.Sprintf("127.0.0.1:%d", ports[0])
	args := []string{
		"--config.file=" + configPath,
		"--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + listen,
		"--log.level=info",
	}
	p := &Prometheus{URL: "http://" + listen, server: server{dir: dir}}
	if opts.TLS || len(opts.Users) > 0 {
		webConfig, err := p.writeWebConfig(opts)
		if err != nil {
			return nil, err
		}
		args = append(args, "--web.config.file="+webConfig)
	}
	proc, err := startProcess("prometheus", bin, args, dir, filepath.Join(dir, "prometheus.log"))
	if err != nil {
		return nil, err
	}
	p.proc = proc
	if p.httpc, err = p.client(); err != nil {
		proc.stop()
		return nil, err
	}
	if err := waitReadyWith(proc, p.httpc, p.URL+"/-/ready", p.authHeader(), prometheusReadyTimeout); err != nil {
		proc.stop()
		if errors.Is(err, errExited) && addrInUse(proc) {
			return nil, fmt.Errorf("%w (%v)", errRetry, err)
		}
		return nil, fmt.Errorf("%v\nlast %d lines of its log:\n%s", err, logTailLines, proc.logTail(logTailLines))
	}
	return p, nil
}

// prometheusConfig scrapes targets every second.
func prometheusConfig(targets []string) string {
	var b strings.Builder
	b.WriteString("# Written by internal/stack.\n")
	b.WriteString("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n")
	fmt.Fprintf(&b, "scrape_configs:\n  - job_name: %s\n    scrape_interval: 1s\n    scrape_timeout: 1s\n", PrometheusJob)
	b.WriteString("    static_configs:\n      - targets: [")
	for i, target := range targets {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(target))
	}
	b.WriteString("]\n")
	return b.String()
}

// WaitForQuery polls /api/v1/query (at the current time) until promql has at
// least one sample and returns the first one's value. It gives up with an
// error on a query Prometheus rejects (HTTP 400) and after timeout.
func (p *Prometheus) WaitForQuery(promql string, timeout time.Duration) (float64, error) {
	deadline := time.Now().Add(timeout)
	var last string
	for {
		values, err := p.instantQuery(promql)
		switch {
		case errors.Is(err, errBadQuery):
			return 0, fmt.Errorf("Prometheus query %s: %w", promql, err)
		case err != nil:
			last = err.Error()
		case len(values) > 0:
			return values[0], nil
		default:
			last = "empty result"
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("Prometheus query %s returned no sample within %v; last: %s", promql, timeout, last)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (p *Prometheus) instantQuery(promql string) ([]float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := p.httpc
	if client == nil {
		client = httpClient
	}
	code, body, err := httpGetWith(ctx, client, p.URL+"/api/v1/query?"+url.Values{"query": {promql}}.Encode(), p.authHeader())
	if err != nil {
		return nil, err
	}
	if code == http.StatusBadRequest {
		return nil, fmt.Errorf("%w: HTTP 400: %s", errBadQuery, strings.TrimSpace(truncate(body)))
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d: %s", code, strings.TrimSpace(truncate(body)))
	}
	return sampleValues(body)
}

// writeWebConfig writes the --web.config.file of opts (and the TLS material)
// into p.dir, sets p's CA, credentials and client certificate, and returns
// the file's path.
func (p *Prometheus) writeWebConfig(opts PrometheusOptions) (string, error) {
	var b strings.Builder
	b.WriteString("# Written by internal/stack.\n")
	if opts.TLS {
		srv, err := newServerPKI(p.dir, "nettune-testenv-prometheus-ca", opts.CA)
		if err != nil {
			return "", err
		}
		p.CA, p.CAPEM = srv.ca, srv.ca.CertPEM
		p.URL = strings.Replace(p.URL, "http://", "https://", 1)
		fmt.Fprintf(&b, "tls_server_config:\n  cert_file: %s\n  key_file: %s\n", strconv.Quote(srv.certFile), strconv.Quote(srv.keyFile))
		if opts.RequireClientCert {
			fmt.Fprintf(&b, "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: %s\n", strconv.Quote(srv.caFile))
			if p.clientCert, p.clientKey, err = issueClientCert(srv.ca, "nettune-testenv"); err != nil {
				return "", err
			}
		}
	} else if opts.RequireClientCert {
		return "", fmt.Errorf("PrometheusOptions.RequireClientCert needs TLS")
	}
	if len(opts.Users) > 0 {
		names := slices.Sorted(maps.Keys(opts.Users))
		b.WriteString("basic_auth_users:\n")
		for _, name := range names {
			hash, err := bcryptHash(name, opts.Users[name])
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&b, "  %s: %s\n", strconv.Quote(name), strconv.Quote(hash))
		}
		p.Username, p.Password = names[0], opts.Users[names[0]]
	}
	path := filepath.Join(p.dir, "web-config.yml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return "", err
	}
	return path, nil
}

// client is the HTTP client of p's helpers: trusting p's CA (and presenting
// a client certificate when one is required) with TLS.
func (p *Prometheus) client() (*http.Client, error) {
	if p.CAPEM == nil {
		return httpClient, nil
	}
	cfg, err := clientTLSConfig(p.CAPEM, p.clientCert, p.clientKey)
	if err != nil {
		return nil, err
	}
	return newTLSClient(cfg), nil
}

// authHeader is the basic-auth header of p's Username and Password, if any.
func (p *Prometheus) authHeader() http.Header {
	if p.Username == "" {
		return nil
	}
	req, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
	req.SetBasicAuth(p.Username, p.Password)
	return http.Header{"Authorization": req.Header["Authorization"]}
}

// ClientCert signs a client certificate for commonName with p's CA and
// returns it and its key, PEM-encoded. Without TLS there is no CA: an error.
func (p *Prometheus) ClientCert(commonName string) (certPEM, keyPEM []byte, err error) {
	if p.CA == nil {
		return nil, nil, fmt.Errorf("Prometheus.ClientCert: Prometheus at %s has no TLS", p.URL)
	}
	certPEM, keyPEM, err = issueClientCert(p.CA, commonName)
	if err != nil {
		return nil, nil, fmt.Errorf("Prometheus.ClientCert: %w", err)
	}
	return certPEM, keyPEM, nil
}
