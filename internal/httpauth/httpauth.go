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

// Package httpauth is how nettune's clients of Loki and Prometheus (the
// controller's analyses, the agent's push) carry what a user's
// observability stack asks for: a tenant (X-Scope-OrgID), basic auth or a
// bearer token, extra headers, a CA bundle and a client certificate.
//
// Credentials come from a Kubernetes Secret (the controller reads it through
// the API at each measurement) or from a mounted Secret's directory (the
// agent re-reads it at each push), so a rotated Secret is used without a
// restart. The keys are the same in both:
//
//	tenant      X-Scope-OrgID; several tenants joined by "|" for a query
//	            across tenants (Loki's multi-tenant queries)
//	username    basic auth, with password
//	password
//	token       a bearer token (instead of username and password)
//	ca.crt      PEM CA bundle trusted for the server's certificate
//	            (instead of the system's roots)
//	tls.crt     PEM client certificate (mTLS), with tls.key
//	tls.key
//	header.NAME an extra request header NAME (e.g. header.THANOS-TENANT)
//
// No value of a Secret ever appears in an error: errors name the Secret and
// the key, and Redact scrubs the values from any text a caller builds.
package httpauth

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Keys of a credentials Secret.
const (
	KeyTenant    = "tenant"
	KeyUsername  = "username"
	KeyPassword  = "password"
	KeyToken     = "token"
	KeyCA        = "ca.crt"
	KeyCert      = "tls.crt"
	KeyKey       = "tls.key"
	HeaderPrefix = "header."
	// TenantHeader is the header Loki, Mimir and Cortex read the tenant from.
	TenantHeader = "X-Scope-OrgID"
)

// Keys lists the keys a credentials Secret may hold (header.* aside).
var Keys = []string{KeyTenant, KeyUsername, KeyPassword, KeyToken, KeyCA, KeyCert, KeyKey}

// Credentials is what one client sends and trusts. The zero value sends
// nothing extra and trusts the system's roots.
type Credentials struct {
	// Source names where the credentials came from, for messages
	// ("Secret nettune-system/loki", "directory /etc/nettune/loki").
	Source string

	Tenant   string
	Username string
	Password string
	Token    string
	// Headers are extra request headers, by canonical name.
	Headers map[string]string
	// CA is a PEM bundle trusted instead of the system's roots.
	CA []byte
	// Cert and Key are a PEM client certificate and its key.
	Cert, Key []byte
	// InsecureSkipVerify turns off verification of the server's
	// certificate (set by the analysis or the agent's flag, never by the
	// Secret).
	InsecureSkipVerify bool
}

// KeyError is a credentials Secret that cannot be used: it names the key.
type KeyError struct {
	Source string
	Key    string
	Reason string
}

func (e *KeyError) Error() string {
	return fmt.Sprintf("%s: key %q %s", e.Source, e.Key, e.Reason)
}

// tenantRE is a Loki tenant ID (alphanumerics and !-_.*'()), or several
// joined by "|".
var tenantRE = regexp.MustCompile(`^[A-Za-z0-9!\-_.*'()]+(\|[A-Za-z0-9!\-_.*'()]+)*$`)

// headerNameRE is an HTTP header name token.
var headerNameRE = regexp.MustCompile("^[!#$%&'*+\\-.^_`|~0-9A-Za-z]+$")

// Parse reads the keys of a credentials Secret (data, by key) and checks
// them: every key known, username with password, token without them,
// tls.crt with tls.key forming a key pair, ca.crt holding a certificate.
// source names the Secret in errors.
func Parse(source string, data map[string][]byte) (*Credentials, error) {
	c := &Credentials{Source: source}
	if len(data) == 0 {
		return nil, &KeyError{Source: source, Key: KeyTenant, Reason: "is missing: the Secret holds no keys (it may hold " + strings.Join(Keys, ", ") + ", header.NAME)"}
	}
	names := make([]string, 0, len(data))
	for k := range data {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		v := data[k]
		switch {
		case k == KeyTenant:
			t := strings.TrimSpace(string(v))
			if !tenantRE.MatchString(t) {
				return nil, &KeyError{source, k, "is not a tenant ID or tenants joined by | (letters, digits and !-_.*'() only)"}
			}
			c.Tenant = t
		case k == KeyUsername:
			c.Username = strings.TrimRight(string(v), "\r\n")
		case k == KeyPassword:
			c.Password = strings.TrimRight(string(v), "\r\n")
		case k == KeyToken:
			c.Token = strings.TrimSpace(string(v))
		case k == KeyCA:
			c.CA = v
		case k == KeyCert:
			c.Cert = v
		case k == KeyKey:
			c.Key = v
		case strings.HasPrefix(k, HeaderPrefix):
			name := strings.TrimPrefix(k, HeaderPrefix)
			if !headerNameRE.MatchString(name) {
				return nil, &KeyError{source, k, "does not name an HTTP header after " + HeaderPrefix}
			}
			val := strings.TrimRight(string(v), "\r\n")
			if strings.ContainsAny(val, "\r\n\x00") {
				return nil, &KeyError{source, k, "holds a line break: a header value is one line"}
			}
			canon := textproto.CanonicalMIMEHeaderKey(name)
			if canon == "Authorization" || canon == TenantHeader || canon == "X-Scope-Orgid" {
				return nil, &KeyError{source, k, "sets a header the keys username, password, token and tenant set; use those"}
			}
			if c.Headers == nil {
				c.Headers = map[string]string{}
			}
			c.Headers[canon] = val
		default:
			return nil, &KeyError{source, k, "is not a credentials key (known: " + strings.Join(Keys, ", ") + ", header.NAME)"}
		}
	}
	if strings.ContainsAny(c.Username+c.Password+c.Token, "\r\n\x00") {
		return nil, &KeyError{source, KeyPassword, "holds a line break"}
	}
	switch {
	case c.Username != "" && c.Password == "":
		return nil, &KeyError{source, KeyPassword, "is missing: username is set, basic auth needs both"}
	case c.Password != "" && c.Username == "":
		return nil, &KeyError{source, KeyUsername, "is missing: password is set, basic auth needs both"}
	case c.Token != "" && c.Username != "":
		return nil, &KeyError{source, KeyToken, "is set beside username and password: keep one of basic auth and a bearer token"}
	case strings.Contains(c.Username, ":"):
		return nil, &KeyError{source, KeyUsername, "holds a colon, which basic auth cannot carry"}
	}
	switch {
	case len(c.Cert) > 0 && len(c.Key) == 0:
		return nil, &KeyError{source, KeyKey, "is missing: tls.crt is set, a client certificate needs its key"}
	case len(c.Key) > 0 && len(c.Cert) == 0:
		return nil, &KeyError{source, KeyCert, "is missing: tls.key is set, a client key needs its certificate"}
	case len(c.Cert) > 0:
		if _, err := tls.X509KeyPair(c.Cert, c.Key); err != nil {
			return nil, &KeyError{source, KeyCert, "and tls.key do not form a PEM certificate and key pair: " + c.Redact(err.Error())}
		}
	}
	if len(c.CA) > 0 && !x509.NewCertPool().AppendCertsFromPEM(c.CA) {
		return nil, &KeyError{source, KeyCA, "holds no PEM certificate"}
	}
	return c, nil
}

// ReadDir reads credentials from a mounted Secret's directory: one file per
// key (Kubernetes' ..data and dot files are skipped). A missing directory
// is an error naming it.
//
// In a Secret volume every key is a symlink into ..data, itself a symlink
// to a timestamped directory that kubelet swaps atomically at an update:
// the keys are read from one resolution of ..data, so a rotation never
// mixes an old username with a new password.
func ReadDir(dir string) (*Credentials, error) {
	source := "directory " + dir
	root := dir
	if snapshot, err := filepath.EvalSymlinks(filepath.Join(dir, "..data")); err == nil {
		root = snapshot
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	data := map[string][]byte{}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		path := filepath.Join(root, name)
		st, err := os.Stat(path) // follows the Secret volume's symlinks
		if err != nil {
			return nil, fmt.Errorf("%s: key %q: %w", source, name, err)
		}
		if st.IsDir() {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s: key %q: %w", source, name, err)
		}
		data[name] = b
	}
	return Parse(source, data)
}

// Apply sets the tenant, the authorization and the extra headers on h.
func (c *Credentials) Apply(h http.Header) {
	if c == nil {
		return
	}
	keys := make([]string, 0, len(c.Headers))
	for k := range c.Headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		h.Set(k, c.Headers[k])
	}
	if c.Tenant != "" {
		h.Set(TenantHeader, c.Tenant)
	}
	switch {
	case c.Token != "":
		h.Set("Authorization", "Bearer "+c.Token)
	case c.Username != "":
		h.Set("Authorization", "Basic "+basic(c.Username, c.Password))
	}
}

func basic(user, pass string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
}

// Describe says what c sends, without a value: "tenant a|b, basic auth,
// CA from the Secret" (for messages and logs).
func (c *Credentials) Describe() string {
	if c == nil {
		return "no credentials"
	}
	var parts []string
	if c.Tenant != "" {
		parts = append(parts, "tenant "+c.Tenant)
	}
	switch {
	case c.Token != "":
		parts = append(parts, "bearer token")
	case c.Username != "":
		parts = append(parts, "basic auth as "+c.Username)
	}
	if len(c.Headers) > 0 {
		parts = append(parts, fmt.Sprintf("%d extra header(s)", len(c.Headers)))
	}
	if len(c.CA) > 0 {
		parts = append(parts, "CA from "+KeyCA)
	}
	if len(c.Cert) > 0 {
		parts = append(parts, "client certificate")
	}
	if c.InsecureSkipVerify {
		parts = append(parts, "TLS verification off")
	}
	if len(parts) == 0 {
		return "no credentials"
	}
	return strings.Join(parts, ", ")
}

// TLSConfig is the client TLS configuration c asks for: nil when it asks
// for nothing beyond the defaults.
func (c *Credentials) TLSConfig() (*tls.Config, error) {
	if c == nil || (len(c.CA) == 0 && len(c.Cert) == 0 && !c.InsecureSkipVerify) {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: c.InsecureSkipVerify} //nolint:gosec // only when the analysis or the flag says so
	if len(c.CA) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(c.CA) {
			return nil, &KeyError{c.Source, KeyCA, "holds no PEM certificate"}
		}
		cfg.RootCAs = pool
	}
	if len(c.Cert) > 0 {
		pair, err := tls.X509KeyPair(c.Cert, c.Key)
		if err != nil {
			return nil, &KeyError{c.Source, KeyCert, "and tls.key do not form a key pair"}
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// TLSFingerprint identifies c's TLS settings: two credentials with the same
// fingerprint can share a transport (and its connections).
func (c *Credentials) TLSFingerprint() string {
	if c == nil {
		return ""
	}
	h := sha256.New()
	for _, b := range [][]byte{c.CA, c.Cert, c.Key} {
		fmt.Fprintf(h, "%d:", len(b))
		h.Write(b)
	}
	fmt.Fprintf(h, "insecure=%t", c.InsecureSkipVerify)
	return hex.EncodeToString(h.Sum(nil))
}

// secrets are the values c must never show.
func (c *Credentials) secrets() []string {
	if c == nil {
		return nil
	}
	var s []string
	for _, v := range []string{c.Password, c.Token, string(c.Key)} {
		if len(v) >= 3 {
			s = append(s, v)
		}
	}
	if c.Username != "" {
		s = append(s, basic(c.Username, c.Password))
	}
	for _, v := range c.Headers {
		if len(v) >= 3 {
			s = append(s, v)
		}
	}
	// The longest first, so a value inside another is not left in part.
	slices.SortFunc(s, func(a, b string) int { return len(b) - len(a) })
	return s
}

// Redacted replaces a secret value in text.
const Redacted = "[redacted]"

// Redact scrubs every secret value of c (password, token, key, extra
// header values, the basic-auth string) from s.
func (c *Credentials) Redact(s string) string {
	for _, v := range c.secrets() {
		s = strings.ReplaceAll(s, v, Redacted)
	}
	return s
}

// RedactError is err with c's secret values scrubbed from its message (nil
// stays nil). The result unwraps to err.
func (c *Credentials) RedactError(err error) error {
	if err == nil {
		return nil
	}
	msg := c.Redact(err.Error())
	if msg == err.Error() {
		return err
	}
	return &redacted{msg: msg, err: err}
}

type redacted struct {
	msg string
	err error
}

func (r *redacted) Error() string { return r.msg }
func (r *redacted) Unwrap() error { return r.err }

// IsKeyError reports whether err is (or wraps) a KeyError.
func IsKeyError(err error) bool {
	var k *KeyError
	return errors.As(err, &k)
}
