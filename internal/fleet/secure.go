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

package fleet

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nettune/nettune/internal/httpauth"
	"github.com/nettune/nettune/internal/pki"
	"github.com/nettune/nettune/internal/stack"
)

// The Secrets a secure fleet (Options.Secure) makes in Namespace for the
// controller: --loki-secret and --prometheus-secret.
const (
	LokiSecret       = "nettune-loki"
	PrometheusSecret = "nettune-prometheus"
)

// DefaultTenant is a secure fleet's Loki tenant when Options.Tenant is "".
const DefaultTenant = "fleet"

// PrometheusUser is the basic-auth user of a secure fleet's Prometheus
// (the controller's analyses and the tests' queries).
const PrometheusUser = "nettune-controller"

// LokiUsers are a fleet's users on the Loki gateway, each allowed the
// fleet's tenant only: the agents' push and the controller's queries and
// push of its rollout events.
type LokiUsers struct {
	Agents, Controller stack.GatewayUser
}

// NewLokiUsers makes the gateway users of a fleet whose tenant is tenant,
// named prefix+"agents" and prefix+"controller", with random passwords.
func NewLokiUsers(tenant, prefix string) (LokiUsers, error) {
	var u LokiUsers
	var err error
	u.Agents = stack.GatewayUser{Name: prefix + "agents", Tenants: []string{tenant}}
	if u.Agents.Password, err = NewPassword(); err != nil {
		return u, err
	}
	u.Controller = stack.GatewayUser{Name: prefix + "controller", Tenants: []string{tenant}}
	if u.Controller.Password, err = NewPassword(); err != nil {
		return u, err
	}
	return u, nil
}

// NewPassword is a random password of 32 hexadecimal digits (128 bits):
// a value that cannot appear anywhere by chance, so a test can grep for it.
func NewPassword() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// BasicAuth is the value of an Authorization: Basic header's credentials,
// base64(user:password): a credential too.
func BasicAuth(user, password string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
}

// secureState is what a secure fleet made: its tenant, users, CA and
// credentials directories.
type secureState struct {
	tenant     string
	users      LokiUsers
	promPass   string
	lokiCA     []byte // the gateway's CA certificate, PEM
	promCA     []byte // Prometheus' CA certificate, PEM (nil without Prometheus)
	agentsDir  string // --loki-credentials-dir of every agent
	pushDir    string // the controller's --loki-push-credentials-dir
	secretVals []string
}

// checkSecureOptions refuses options that cannot make a secure fleet.
func checkSecureOptions(o Options) error {
	switch {
	case !o.Secure && (o.Gateway != nil || o.LokiUsers != nil || o.Tenant != ""):
		return errors.New("fleet: Options.Gateway, LokiUsers and Tenant need Options.Secure")
	case o.Secure && o.Loki != nil && (o.Gateway == nil || o.LokiUsers == nil):
		return errors.New("fleet: a secure fleet on a shared Loki needs the gateway in front of it (Options.Gateway) and its users there (Options.LokiUsers)")
	case o.Secure && o.Loki == nil && o.Gateway != nil:
		return errors.New("fleet: Options.Gateway is the gateway of a shared Loki (Options.Loki); a fleet with its own Loki starts its own gateway")
	case o.Secure && o.Loki != nil && o.Loki.Tenant == "":
		return errors.New("fleet: a secure fleet needs a multi-tenant Loki (stack.LokiOptions{Auth: true})")
	}
	return nil
}

// newFleetCA is the CA of a secure fleet's own gateway and Prometheus.
func newFleetCA() (*pki.CA, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	return pki.NewCA("nettune-fleet-ca", serial.Add(serial, big.NewInt(1)), 24*time.Hour)
}

// startSecureLoki starts, for a secure fleet, Loki with auth and the
// gateway in front of it, or takes the shared ones of the options; it
// makes the users and the credentials directories.
func (f *Fleet) startSecureLoki() error {
	o := f.opts
	s := &secureState{tenant: o.Tenant}
	if s.tenant == "" {
		s.tenant = DefaultTenant
	}
	f.secure = s
	if o.LokiUsers != nil {
		s.users = *o.LokiUsers
	} else {
		var err error
		if s.users, err = NewLokiUsers(s.tenant, "nettune-"); err != nil {
			return err
		}
	}
	if o.Loki != nil {
		f.Loki, f.sharedLoki = o.Loki.WithTenant(s.tenant), true
		f.Gateway, f.sharedGateway = o.Gateway, true
	} else {
		var err error
		if f.Loki, err = stack.RunLokiOpts(filepath.Join(o.Dir, "loki"), stack.LokiOptions{Auth: true, Tenant: s.tenant}); err != nil {
			return err
		}
		if err := o.Ledger.Children(); err != nil {
			return err
		}
		if f.ca, err = newFleetCA(); err != nil {
			return err
		}
		f.Gateway, err = stack.RunGateway(filepath.Join(o.Dir, "gateway"), stack.GatewayOptions{
			Upstream: f.Loki.URL, CA: f.ca, Users: []stack.GatewayUser{s.users.Agents, s.users.Controller}})
		if err != nil {
			return err
		}
		if err := o.Ledger.Children(); err != nil {
			return err
		}
	}
	s.lokiCA = f.Gateway.CAPEM
	for _, u := range []stack.GatewayUser{s.users.Agents, s.users.Controller} {
		s.secretVals = append(s.secretVals, u.Password, BasicAuth(u.Name, u.Password))
	}
	s.agentsDir = filepath.Join(f.Dir, "credentials", "agents")
	s.pushDir = filepath.Join(f.Dir, "credentials", "controller-push")
	if err := writeCredentialsDir(s.agentsDir, s.lokiKeys(s.users.Agents)); err != nil {
		return err
	}
	return writeCredentialsDir(s.pushDir, s.lokiKeys(s.users.Controller))
}

// securePrometheusOptions are the TLS and basic auth of a secure fleet's
// Prometheus; the password is made here.
func (f *Fleet) securePrometheusOptions(targets []string) (stack.PrometheusOptions, error) {
	pass, err := NewPassword()
	if err != nil {
		return stack.PrometheusOptions{}, err
	}
	f.secure.promPass = pass
	f.secure.secretVals = append(f.secure.secretVals, pass, BasicAuth(PrometheusUser, pass))
	if f.ca == nil {
		if f.ca, err = newFleetCA(); err != nil {
			return stack.PrometheusOptions{}, err
		}
	}
	return stack.PrometheusOptions{Targets: targets, TLS: true, CA: f.ca, Users: map[string]string{PrometheusUser: pass}}, nil
}

// lokiKeys are the credentials keys of a gateway user of the fleet.
func (s *secureState) lokiKeys(u stack.GatewayUser) map[string][]byte {
	return map[string][]byte{
		httpauth.KeyTenant:   []byte(s.tenant),
		httpauth.KeyUsername: []byte(u.Name),
		httpauth.KeyPassword: []byte(u.Password),
		httpauth.KeyCA:       s.lokiCA,
	}
}

// writeCredentialsDir writes one file per key (0600) into dir (0700), as
// a mounted Secret or Ansible's per-vehicle files would be.
func writeCredentialsDir(dir string, keys map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	for k, v := range keys {
		if err := os.WriteFile(filepath.Join(dir, k), v, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// createSecrets makes the controller's credentials Secrets in Namespace
// (replacing any left by an earlier run against the same cluster).
func (f *Fleet) createSecrets(ctx context.Context) error {
	s := f.secure
	secrets := map[string]map[string][]byte{LokiSecret: s.lokiKeys(s.users.Controller)}
	if f.Prometheus != nil {
		s.promCA = f.Prometheus.CAPEM
		secrets[PrometheusSecret] = map[string][]byte{
			httpauth.KeyUsername: []byte(PrometheusUser),
			httpauth.KeyPassword: []byte(s.promPass),
			httpauth.KeyCA:       s.promCA,
		}
	}
	for name, data := range secrets {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace}, Data: data}
		err := f.CP.Client.Create(ctx, sec)
		if apierrors.IsAlreadyExists(err) {
			cur := &corev1.Secret{}
			if err = f.CP.Client.Get(ctx, client.ObjectKeyFromObject(sec), cur); err == nil {
				cur.Data, cur.StringData = data, nil
				err = f.CP.Client.Update(ctx, cur)
			}
		}
		if err != nil {
			return fmt.Errorf("writing the Secret %s/%s: %w", Namespace, name, err)
		}
	}
	return nil
}

// Secure reports whether the fleet runs behind the gateway and TLS
// (Options.Secure).
func (f *Fleet) Secure() bool { return f.secure != nil }

// Tenant is a secure fleet's Loki tenant ("" otherwise).
func (f *Fleet) Tenant() string {
	if f.secure == nil {
		return ""
	}
	return f.secure.tenant
}

// LokiAddress is where the controller queries Loki and the agents and the
// controller push to it: the gateway's URL on a secure fleet, Loki's own
// otherwise. Tests that read Loki directly use f.Loki (its Tenant set).
func (f *Fleet) LokiAddress() string {
	if f.Gateway != nil {
		return f.Gateway.URL
	}
	return f.Loki.URL
}

// Secrets are every credential value a secure fleet made or was given —
// the passwords of its gateway users and of Prometheus, and each one's
// basic-auth form base64(user:password) — for a test to grep the product's
// statuses, events, logs and metrics for them. None without Secure.
func (f *Fleet) Secrets() []string {
	if f.secure == nil {
		return nil
	}
	return append([]string(nil), f.secure.secretVals...)
}

// QueryClient is an HTTP client for the fleet's observability stack as a
// user's Grafana would query it: to the gateway (LokiAddress) it sends the
// controller's tenant and basic auth, to Prometheus its basic auth, and it
// trusts only the fleet's CAs. On a fleet without Secure it is a plain
// client. Its timeout is a minute.
func (f *Fleet) QueryClient() *http.Client {
	if f.secure == nil {
		return &http.Client{Timeout: time.Minute}
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(f.secure.lokiCA)
	if f.secure.promCA != nil {
		roots.AppendCertsFromPEM(f.secure.promCA)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	creds := map[string]*httpauth.Credentials{}
	if u, err := url.Parse(f.Gateway.URL); err == nil {
		creds[u.Host] = &httpauth.Credentials{Tenant: f.secure.tenant, Username: f.secure.users.Controller.Name, Password: f.secure.users.Controller.Password}
	}
	if f.Prometheus != nil {
		if u, err := url.Parse(f.Prometheus.URL); err == nil {
			creds[u.Host] = &httpauth.Credentials{Username: PrometheusUser, Password: f.secure.promPass}
		}
	}
	// Credentials go to the hosts they are for only.
	return &http.Client{Timeout: time.Minute, Transport: &credsTransport{base: tr, byHost: creds}, CheckRedirect: httpauth.SameOrigin}
}

// credsTransport sends each host's credentials; other hosts get none.
type credsTransport struct {
	base   http.RoundTripper
	byHost map[string]*httpauth.Credentials
}

func (c *credsTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	creds := c.byHost[req.URL.Host]
	if creds == nil || req.URL.Scheme != "https" {
		return c.base.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	creds.Apply(req.Header)
	resp, err := c.base.RoundTrip(req)
	return resp, creds.RedactError(err)
}

// ControllerPID is the process id of the running controller (0 when none
// runs): a test tells a restart from it.
func (f *Fleet) ControllerPID() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.controller == nil || !f.controller.running() {
		return 0
	}
	return f.controller.cmd.Process.Pid
}

// AgentCredentialsDir is the agents' --loki-credentials-dir on a secure
// fleet ("" otherwise): what a program on a vehicle that ships to the same
// Loki would be given.
func (f *Fleet) AgentCredentialsDir() string {
	if f.secure == nil {
		return ""
	}
	return f.secure.agentsDir
}
