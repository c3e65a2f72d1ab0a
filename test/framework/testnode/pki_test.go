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

package testnode

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// TestPKI checks the node's CA files: the API server's serving certificate
// and a client certificate verify against ca.crt for their use, and a
// kubeconfig of the client certificate loads.
func TestPKI(t *testing.T) {
	p, err := newNodePKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.issue("apiserver", "kube-apiserver", nil, []string{"kubernetes"}, []net.IP{net.ParseIP("127.0.0.1")}); err != nil {
		t.Fatal(err)
	}
	if err := p.issue("admin", "nettune-admin", []string{"system:masters"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(p.path("ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("ca.crt does not parse")
	}
	serials := map[string]bool{}
	for _, c := range []struct {
		name    string
		usage   x509.ExtKeyUsage
		dnsName string
	}{{"apiserver", x509.ExtKeyUsageServerAuth, "kubernetes"}, {"admin", x509.ExtKeyUsageClientAuth, ""}} {
		pair, err := tls.LoadX509KeyPair(p.path(c.name+".crt"), p.path(c.name+".key"))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if _, err := pair.Leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{c.usage}, DNSName: c.dnsName}); err != nil {
			t.Errorf("%s does not verify: %v", c.name, err)
		}
		serials[pair.Leaf.SerialNumber.String()] = true
		if fi, err := os.Stat(p.path(c.name + ".key")); err != nil {
			t.Error(err)
		} else if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s.key: mode %v, want 0600", c.name, fi.Mode().Perm())
		}
	}
	if len(serials) != 2 || serials["1"] {
		t.Errorf("serials %v: want two, neither the CA's", serials)
	}
	kc := p.path("admin.kubeconfig")
	if err := p.kubeconfig(kc, "https://127.0.0.1:6443", "admin"); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CAFile != p.path("ca.crt") || cfg.CertFile != p.path("admin.crt") {
		t.Errorf("kubeconfig: CA %s, cert %s", cfg.CAFile, cfg.CertFile)
	}
	for _, f := range []string{"sa.key", "sa.pub"} {
		if _, err := os.Stat(p.path(f)); err != nil {
			t.Error(err)
		}
	}
}
