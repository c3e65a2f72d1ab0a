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
	"fmt"
	"net/http"
	"sync"
	"time"
)

// maxTransports bounds the transports a Transports keeps: one per TLS
// setting in use; an older one is closed when a rotation makes room.
const maxTransports = 16

// Transports keeps one http.Transport per TLS setting (CA, client
// certificate, verification), so measurements and pushes with the same
// settings reuse their connections, and a rotated CA or certificate gets a
// new transport at the next request.
type Transports struct {
	mu    sync.Mutex
	order []string
	byFP  map[string]*http.Transport
}

// NewTransports returns an empty set of transports.
func NewTransports() *Transports {
	return &Transports{byFP: map[string]*http.Transport{}}
}

func (t *Transports) transport(c *Credentials) (*http.Transport, error) {
	fp := c.TLSFingerprint()
	t.mu.Lock()
	defer t.mu.Unlock()
	if tr, ok := t.byFP[fp]; ok {
		return tr, nil
	}
	cfg, err := c.TLSConfig()
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg
	tr.MaxIdleConnsPerHost = 4
	if len(t.order) >= maxTransports {
		old := t.order[0]
		t.order = t.order[1:]
		t.byFP[old].CloseIdleConnections()
		delete(t.byFP, old)
	}
	t.byFP[fp] = tr
	t.order = append(t.order, fp)
	return tr, nil
}

// Client is an http.Client that sends c's tenant, authorization and
// headers and trusts c's CA, with the given timeout. Errors it returns
// never carry c's secret values.
func (t *Transports) Client(c *Credentials, timeout time.Duration) (*http.Client, error) {
	tr, err := t.transport(c)
	if err != nil {
		return nil, err
	}
	return &http.Client{Timeout: timeout, Transport: &roundTripper{base: tr, creds: c}, CheckRedirect: SameOrigin}, nil
}

// maxRedirects is http.Client's own bound.
const maxRedirects = 10

// SameOrigin, an http.Client's CheckRedirect, follows a redirect only to
// the scheme and host of the first request. The round trippers set the credentials on every request they
// send, redirected ones included (http.Client strips only the headers its
// caller set), so a redirect elsewhere, or from https to http, would hand
// them to another server or send them in clear: it fails the request
// instead.
func SameOrigin(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	first := via[0].URL
	if req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
		return fmt.Errorf("refusing a redirect from %s://%s to %s://%s: credentials are sent to the configured server only",
			first.Scheme, first.Host, req.URL.Scheme, req.URL.Host)
	}
	return nil
}

type roundTripper struct {
	base  http.RoundTripper
	creds *Credentials
}

func (r *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	r.creds.Apply(req.Header)
	resp, err := r.base.RoundTrip(req)
	return resp, r.creds.RedactError(err)
}

// CredentialsError is a request that was not sent because its credentials
// could not be read or used.
type CredentialsError struct{ Err error }

func (e *CredentialsError) Error() string { return "credentials: " + e.Err.Error() }
func (e *CredentialsError) Unwrap() error { return e.Err }

// DirClient is an http.Client whose every request reads the credentials in
// dir (a mounted Secret, see ReadDir) and sends them: a rotated Secret is
// used from the next request on, without a restart. A directory that cannot
// be read or used fails the request with a *CredentialsError (nothing is
// sent). insecureSkipVerify turns off verification of the server's
// certificate.
func DirClient(dir string, insecureSkipVerify bool, timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &dirRoundTripper{dir: dir, insecure: insecureSkipVerify, transports: NewTransports()}, CheckRedirect: SameOrigin}
}

type dirRoundTripper struct {
	dir        string
	insecure   bool
	transports *Transports
}

func (d *dirRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	c, err := ReadDir(d.dir)
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, &CredentialsError{Err: err}
	}
	c.InsecureSkipVerify = d.insecure
	tr, err := d.transports.transport(c)
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, &CredentialsError{Err: fmt.Errorf("%s: %w", c.Source, err)}
	}
	return (&roundTripper{base: tr, creds: c}).RoundTrip(req)
}
