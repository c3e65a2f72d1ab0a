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
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/nettune/nettune/internal/pki"
)

// nodePKI is the node's certificate authority: one CA signs the API server's
// serving certificate and every client certificate (admin, kubelet,
// controller manager, scheduler, the API server's kubelet client).
type nodePKI struct {
	dir    string
	ca     *pki.CA
	serial int64
}

// validity is how long the CA and its certificates are valid.
const validity = 7 * 24 * time.Hour

func newNodePKI(dir string) (*nodePKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	ca, err := pki.NewCA("nettune-node-ca", big.NewInt(1), validity)
	if err != nil {
		return nil, err
	}
	p := &nodePKI{dir: dir, ca: ca, serial: 1}
	if err := os.WriteFile(p.path("ca.crt"), ca.CertPEM, 0o644); err != nil {
		return nil, fmt.Errorf("writing the CA: %w", err)
	}
	// The service-account signing key (RS256 or ES256: the API server takes both).
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the service-account key: %w", err)
	}
	if err := pki.WriteKey(p.path("sa.key"), saKey); err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("encoding the service-account public key: %w", err)
	}
	if err := os.WriteFile(p.path("sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600); err != nil {
		return nil, fmt.Errorf("writing the service-account public key: %w", err)
	}
	return p, nil
}

func (p *nodePKI) path(name string) string { return filepath.Join(p.dir, name) }

// issue writes <name>.crt and <name>.key, signed by the CA: a server
// certificate when hosts or ips are given, else a client certificate of
// user cn in groups orgs.
func (p *nodePKI) issue(name, cn string, orgs []string, hosts []string, ips []net.IP) error {
	p.serial++
	certPEM, keyPEM, err := p.ca.Issue(pki.Cert{Serial: big.NewInt(p.serial), CommonName: cn, Organization: orgs,
		DNSNames: hosts, IPAddresses: ips, Validity: validity})
	if err != nil {
		return fmt.Errorf("issuing %s: %w", name, err)
	}
	if err := os.WriteFile(p.path(name+".crt"), certPEM, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	if err := os.WriteFile(p.path(name+".key"), keyPEM, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", p.path(name+".key"), err)
	}
	return nil
}

// kubeconfig writes a kubeconfig for the client certificate <name>.
func (p *nodePKI) kubeconfig(path, server, name string) error {
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: nettune-node
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: %s
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: nettune-node
  context:
    cluster: nettune-node
    user: %s
current-context: nettune-node
`, server, p.path("ca.crt"), name, p.path(name+".crt"), p.path(name+".key"), name)
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
