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
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/nettune/nettune/internal/httpauth"
	"github.com/nettune/nettune/internal/pki"
)

// certValidity is how long the certificates of a service are valid.
const certValidity = 24 * time.Hour

// serverPKI is the TLS material a service serves with, in its directory:
// ca.crt (the CA), server.crt and server.key (for 127.0.0.1 and localhost).
type serverPKI struct {
	ca       *pki.CA
	caFile   string
	certFile string
	keyFile  string
}

// newServerPKI makes a CA named name (unless ca is given) and a server
// certificate for IP 127.0.0.1 and DNS localhost, and writes them into dir.
func newServerPKI(dir, name string, ca *pki.CA) (*serverPKI, error) {
	if ca == nil {
		var err error
		if ca, err = pki.NewCA(name, randomSerial(), certValidity); err != nil {
			return nil, err
		}
	}
	certPEM, keyPEM, err := ca.Issue(pki.Cert{
		Serial:      randomSerial(),
		CommonName:  "127.0.0.1",
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		Validity:    certValidity,
	})
	if err != nil {
		return nil, err
	}
	p := &serverPKI{
		ca:       ca,
		caFile:   filepath.Join(dir, "ca.crt"),
		certFile: filepath.Join(dir, "server.crt"),
		keyFile:  filepath.Join(dir, "server.key"),
	}
	for path, b := range map[string][]byte{p.caFile: ca.CertPEM, p.certFile: certPEM, p.keyFile: keyPEM} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// randomSerial is a random 62-bit certificate serial number, so that the
// certificates of a CA given by the caller do not collide with its own.
func randomSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		// crypto/rand does not fail on Linux; a constant is still a valid serial.
		return big.NewInt(time.Now().UnixNano())
	}
	return n.Add(n, big.NewInt(1))
}

// issueClientCert signs a client certificate for commonName with ca.
func issueClientCert(ca *pki.CA, commonName string) (certPEM, keyPEM []byte, err error) {
	return ca.Issue(pki.Cert{Serial: randomSerial(), CommonName: commonName, Validity: certValidity})
}

// clientTLSConfig trusts only caPEM and presents the client certificate
// certPEM/keyPEM when given.
func clientTLSConfig(caPEM, certPEM, keyPEM []byte) (*tls.Config, error) {
	if len(caPEM) == 0 {
		return nil, fmt.Errorf("no CA certificate")
	}
	return (&httpauth.Credentials{Source: "the fixture's client", CA: caPEM, Cert: certPEM, Key: keyPEM}).TLSConfig()
}

// newTLSClient is an HTTP client for tlsConfig with a one-minute timeout; it
// keeps no idle connection, so every request sees the server's current
// configuration.
func newTLSClient(tlsConfig *tls.Config) *http.Client {
	return &http.Client{
		Timeout:   time.Minute,
		Transport: &http.Transport{TLSClientConfig: tlsConfig, DisableKeepAlives: true, ForceAttemptHTTP2: false},
	}
}
