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

package analysis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/internal/httpauth"
)

// QuerierFactory returns the query client for an analysis provider at
// address, sending creds (nil: none).
type QuerierFactory func(provider v1alpha1.AnalysisProvider, address string, creds *httpauth.Credentials) (Querier, error)

// HTTPQueriers builds Loki and Prometheus clients with the given timeout,
// one transport per TLS setting shared by all of them.
func HTTPQueriers(timeout time.Duration) QuerierFactory {
	transports := httpauth.NewTransports()
	return func(p v1alpha1.AnalysisProvider, address string, creds *httpauth.Credentials) (Querier, error) {
		c, err := transports.Client(creds, timeout)
		if err != nil {
			return nil, Unavailable(err)
		}
		switch p {
		case v1alpha1.ProviderLoki:
			return NewLoki(address, c), nil
		case v1alpha1.ProviderPrometheus:
			return NewPrometheus(address, c), nil
		}
		return nil, fmt.Errorf("unknown analysis provider %q", p)
	}
}

// SecretReader reads the data of the Secret name in the controller's
// namespace.
type SecretReader func(ctx context.Context, name string) (map[string][]byte, error)

// Backends is where analyses query and with which credentials: the
// controller's defaults, and the Secrets analyses name.
type Backends struct {
	// Queriers makes the clients (HTTPQueriers with a 30 s timeout when nil).
	Queriers QuerierFactory
	// LokiAddress and PrometheusAddress serve analyses without an address.
	LokiAddress       string
	PrometheusAddress string
	// LokiSecret and PrometheusSecret name the Secrets (in Namespace) whose
	// credentials go with the default addresses; empty sends none.
	LokiSecret       string
	PrometheusSecret string
	// Secrets reads the Secrets; nil makes every secretRef an error.
	Secrets SecretReader
	// Namespace is the controller's namespace, where the Secrets are.
	Namespace string
}

// WithDefaults is b with a 30 s HTTP client factory when it has none.
func (b Backends) WithDefaults() Backends {
	if b.Queriers == nil {
		b.Queriers = HTTPQueriers(30 * time.Second)
	}
	return b
}

// QuerierFor is the client of spec's provider: at spec.address, else at the
// controller's default for the provider; with the credentials of
// spec.secretRef, else, at the default address only, the controller's
// default credentials (an analysis naming its own address never receives
// the controller's credentials). field names where an analysis sets its
// address, for the error when there is none. A Secret that is missing or
// unusable is an Unavailable error naming the analysis, the Secret and the
// key.
func (b Backends) QuerierFor(ctx context.Context, spec *v1alpha1.AnalysisSpec, field string) (Querier, error) {
	b = b.WithDefaults()
	address, secret := b.LokiAddress, b.LokiSecret
	if spec.Provider == v1alpha1.ProviderPrometheus {
		address, secret = b.PrometheusAddress, b.PrometheusSecret
	}
	if spec.Address != nil && *spec.Address != "" {
		address, secret = *spec.Address, ""
	}
	if spec.SecretRef != nil && spec.SecretRef.Name != "" {
		secret = spec.SecretRef.Name
	}
	if address == "" {
		return nil, fmt.Errorf("analysis %s: no %s address (set %s or the controller's default)", spec.Name, spec.Provider, field)
	}
	var creds *httpauth.Credentials
	if secret != "" {
		c, err := b.credentials(ctx, secret)
		if err != nil {
			return nil, Unavailable(fmt.Errorf("analysis %s: %w", spec.Name, err))
		}
		creds = c
	}
	if spec.InsecureSkipTLSVerify {
		if creds == nil {
			creds = &httpauth.Credentials{}
		}
		creds.InsecureSkipVerify = true
	}
	q, err := b.Queriers(spec.Provider, address, creds)
	if err != nil {
		return nil, fmt.Errorf("analysis %s: %w", spec.Name, err)
	}
	return q, nil
}

func (b Backends) credentials(ctx context.Context, name string) (*httpauth.Credentials, error) {
	source := fmt.Sprintf("Secret %s/%s", b.Namespace, name)
	if b.Secrets == nil {
		return nil, fmt.Errorf("%s: this controller reads no Secrets", source)
	}
	data, err := b.Secrets(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return httpauth.Parse(source, data)
}

// UnavailableError is a measurement the backend did not let happen: a
// credentials Secret missing or unusable, an answer 401, 403, 407, 429 or
// 5xx, a TLS failure, no answer at all. It says nothing about the
// canaries: a rollout waits on it (the analysis turns Unavailable) and
// goes on by itself once the backend answers, instead of counting it
// toward a verdict.
type UnavailableError struct{ Err error }

func (e *UnavailableError) Error() string { return e.Err.Error() }
func (e *UnavailableError) Unwrap() error { return e.Err }

// Unavailable marks err as an UnavailableError (nil stays nil).
func Unavailable(err error) error {
	if err == nil {
		return nil
	}
	var u *UnavailableError
	if errors.As(err, &u) {
		return err
	}
	return &UnavailableError{Err: err}
}

// IsUnavailable reports whether err is (or wraps) an UnavailableError.
func IsUnavailable(err error) bool {
	var u *UnavailableError
	return errors.As(err, &u)
}

// unavailableStatus reports whether an HTTP status is the backend's, not
// the query's: authentication, authorization, a proxy, rate limits and
// server errors.
func unavailableStatus(code int) bool {
	switch {
	case code == 401, code == 403, code == 407, code == 429:
		return true
	case code >= 500:
		return true
	}
	return false
}

// transportError classifies an error of the HTTP client: every error of
// the transport (refused, reset, timed out, TLS) is Unavailable; a context
// canceled by the caller is not.
func transportError(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return err
	}
	var ue *url.Error
	var ne net.Error
	if errors.As(err, &ue) || errors.As(err, &ne) {
		return Unavailable(err)
	}
	return err
}
