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

package pki

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestCASignsClientAndServerCerts checks that the certificates the CA issues
// verify against it for their use, and that the PEM pairs load.
func TestCASignsClientAndServerCerts(t *testing.T) {
	ca, err := NewCA("pki-ca", big.NewInt(1), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !ca.Cert.IsCA || ca.Cert.Subject.CommonName != "pki-ca" {
		t.Fatalf("CA certificate: IsCA %t, CN %q", ca.Cert.IsCA, ca.Cert.Subject.CommonName)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca.CertPEM) {
		t.Fatal("the CA's PEM does not parse")
	}
	for _, tc := range []struct {
		name    string
		c       Cert
		usage   x509.ExtKeyUsage
		dnsName string // checked against the certificate ("" = none)
	}{
		{"client", Cert{Serial: big.NewInt(2), CommonName: "alice", Organization: []string{"admins"}, Validity: time.Hour}, x509.ExtKeyUsageClientAuth, ""},
		{"server", Cert{Serial: big.NewInt(3), CommonName: "server", DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, Validity: time.Hour}, x509.ExtKeyUsageServerAuth, "localhost"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			certPEM, keyPEM, err := ca.Issue(tc.c)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
				t.Fatalf("the key pair does not load: %v", err)
			}
			block, _ := pem.Decode(certPEM)
			if block == nil {
				t.Fatal("no PEM block")
			}
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{tc.usage}, DNSName: tc.dnsName}); err != nil {
				t.Fatalf("does not verify for %v: %v", tc.usage, err)
			}
			if cert.Subject.CommonName != tc.c.CommonName || cert.SerialNumber.Cmp(tc.c.Serial) != 0 {
				t.Fatalf("CN %q serial %v, want %q %v", cert.Subject.CommonName, cert.SerialNumber, tc.c.CommonName, tc.c.Serial)
			}
		})
	}
}

// TestWriteKey checks the key file's mode and that it decodes.
func TestWriteKey(t *testing.T) {
	ca, err := NewCA("pki-ca", big.NewInt(1), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ca.key")
	if err := WriteKey(path, ca.Key); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	b, _ := os.ReadFile(path)
	if _, err := tls.X509KeyPair(ca.CertPEM, b); err != nil {
		t.Errorf("the CA's certificate and written key do not pair: %v", err)
	}
}
