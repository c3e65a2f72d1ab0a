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

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nettune/nettune/internal/httpauth"
)

// Reasons of PushHealth: the outcome of the latest push, in the CamelCase
// of a Kubernetes condition's reason (the agent reports them as such).
const (
	// ReasonShipped: Loki accepted the push (2xx).
	ReasonShipped = "Shipped"
	// ReasonUnauthorized: 401 (or a proxy's 407): the credentials were
	// refused. Kept on disk and retried: a rotated password is picked up
	// at the next push.
	ReasonUnauthorized = "Unauthorized"
	// ReasonForbidden: 403: authenticated, but not allowed (the tenant).
	// Kept and retried.
	ReasonForbidden = "Forbidden"
	// ReasonRateLimited: 429. Kept and retried.
	ReasonRateLimited = "RateLimited"
	// ReasonServerError: 5xx or 408. Kept and retried.
	ReasonServerError = "ServerError"
	// ReasonUnreachable: no answer (connection refused, timeout, DNS).
	// Kept and retried.
	ReasonUnreachable = "Unreachable"
	// ReasonTLSError: the TLS handshake failed (a server certificate not
	// trusted, a client certificate refused). Kept and retried; counted
	// with the code "network" (there was no HTTP answer).
	ReasonTLSError = "TLSError"
	// ReasonCredentialsInvalid: the client could not read or use its
	// credentials (a missing or malformed key in the credentials
	// directory); nothing was sent. Kept and retried.
	ReasonCredentialsInvalid = "CredentialsInvalid"
	// ReasonRejected: Loki refused the content (400 or another 4xx not
	// listed above); the batch was dropped.
	ReasonRejected = "Rejected"
)

// Codes of nettune_loki_push_errors_total besides HTTP status codes.
const (
	// CodeNetwork: no HTTP answer (a TLS failure included).
	CodeNetwork = "network"
	// CodeCredentials: the credentials could not be read; nothing was sent.
	CodeCredentials = "credentials"
)

// maxBodyInMessage bounds the part of an answer's body a message quotes.
const maxBodyInMessage = 200

// PushHealth is the outcome of the latest push to Loki. Its Message never
// holds a credential: it has the status line of an answer refusing the
// credentials (401, 403, 407) and no body, the status line and the start
// of the body otherwise (passed through Options.Redact), the client's
// error when there was no answer (httpauth's clients redact theirs).
type PushHealth struct {
	// OK is true when Loki accepted the latest push.
	OK bool
	// Code is the latest push's HTTP status code ("204"), or "network"
	// (no answer) or "credentials" (not sent); empty before the first push.
	Code string
	// Reason is one of the Reason* constants; empty before the first push.
	Reason string
	// Message says what happened, e.g. "HTTP 401 Unauthorized".
	Message string
	// Since is when pushes began to end with Reason (the latest push may
	// be later: At).
	Since time.Time
	// At is when the latest push ended.
	At time.Time
	// Buffered is the number of lines waiting on disk for Loki.
	Buffered int
}

// Health returns the outcome of the latest push and the lines waiting on
// disk. It may be called from any goroutine.
func (s *Shipper) Health() PushHealth {
	s.healthMu.Lock()
	defer s.healthMu.Unlock()
	return s.health
}

// outcome is a classified push.
type outcome struct {
	ok, retry bool
	code      string // the metric's label
	reason    string
	message   string
}

// classify sorts a push's answer (status code and the start of the body)
// or error into success, retry (the batch stays on disk) or rejection (the
// batch is dropped).
func classify(code int, body string, err error) outcome {
	if err != nil {
		var cerr *httpauth.CredentialsError
		if errors.As(err, &cerr) {
			return outcome{retry: true, code: CodeCredentials, reason: ReasonCredentialsInvalid, message: cerr.Error()}
		}
		if isTLSError(err) {
			return outcome{retry: true, code: CodeNetwork, reason: ReasonTLSError, message: err.Error()}
		}
		return outcome{retry: true, code: CodeNetwork, reason: ReasonUnreachable, message: err.Error()}
	}
	o := outcome{code: strconv.Itoa(code), message: statusLine(code)}
	switch {
	case code/100 == 2:
		o.ok, o.reason = true, ReasonShipped
		return o
	case code == http.StatusUnauthorized || code == http.StatusProxyAuthRequired:
		o.retry, o.reason = true, ReasonUnauthorized
		return o // no body: a gateway's page about a login may echo it
	case code == http.StatusForbidden:
		o.retry, o.reason = true, ReasonForbidden
		return o
	case code == http.StatusTooManyRequests:
		o.retry, o.reason = true, ReasonRateLimited
	case code/100 == 5 || code == http.StatusRequestTimeout:
		o.retry, o.reason = true, ReasonServerError
	default:
		o.reason = ReasonRejected
	}
	if b := shortBody(body); b != "" {
		o.message += ": " + b
	}
	return o
}

// statusLine is "HTTP 401 Unauthorized".
func statusLine(code int) string {
	if t := http.StatusText(code); t != "" {
		return fmt.Sprintf("HTTP %d %s", code, t)
	}
	return fmt.Sprintf("HTTP %d", code)
}

// shortBody is the first line of body, at most maxBodyInMessage bytes.
func shortBody(body string) string {
	body = strings.TrimSpace(body)
	if i := strings.IndexAny(body, "\r\n"); i >= 0 {
		body = body[:i]
	}
	if len(body) > maxBodyInMessage {
		body = strings.ToValidUTF8(body[:maxBodyInMessage], "") + "..."
	}
	return body
}

// isTLSError reports whether err is a failed TLS handshake: a server
// certificate not trusted or not matching, or an alert from the server
// (e.g. a client certificate it refused or wanted).
func isTLSError(err error) bool {
	var (
		verify    *tls.CertificateVerificationError
		unknown   x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		alert     tls.AlertError
		recordHdr tls.RecordHeaderError
	)
	return errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &hostname) ||
		errors.As(err, &invalid) || errors.As(err, &alert) || errors.As(err, &recordHdr)
}

// setHealth records the outcome of a push (suffix is appended to its
// message) and logs a change of reason: the first failure and the
// recovery, not every retry.
func (s *Shipper) setHealth(o outcome, suffix string) {
	msg := o.message
	if s.opts.Redact != nil {
		msg = s.opts.Redact(msg)
	}
	msg += suffix
	now := time.Now()
	s.healthMu.Lock()
	prev := s.health
	h := PushHealth{OK: o.ok, Code: o.code, Reason: o.reason, Message: msg, Since: prev.Since, At: now, Buffered: prev.Buffered}
	if prev.Reason != o.reason {
		h.Since = now
	}
	s.health = h
	s.healthMu.Unlock()
	switch {
	case prev.Reason == o.reason:
	case o.ok && prev.Reason != "":
		s.opts.Log.Info("Loki accepts pushes again", "after", prev.Reason, "since", prev.Since)
	case o.retry:
		s.opts.Log.Info("Loki push failing; lines are kept on disk and retried", "reason", o.reason, "code", o.code, "message", msg)
	}
}
