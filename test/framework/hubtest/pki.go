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

package hubtest

import (
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"github.com/nettune/nettune/internal/pki"
)

// signer is the CA that kube-controller-manager's csrsigning controller signs
// the agents' client certificates with. The hub's API server trusts it for
// client authentication: its certificate is appended to the API server's
// client CA bundle, which kube-apiserver reloads when the file changes.
type signer struct {
	ca *pki.CA
	// CertFile and KeyFile hold the PEM files kube-controller-manager reads.
	CertFile, KeyFile string
}

func newSigner(dir string) (*signer, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca, err := pki.NewCA("nettune-hubtest-csr-signer", big.NewInt(time.Now().UnixNano()), 10*365*24*time.Hour)
	if err != nil {
		return nil, err
	}
	s := &signer{
		ca:       ca,
		CertFile: filepath.Join(dir, "csr-signer.crt"),
		KeyFile:  filepath.Join(dir, "csr-signer.key"),
	}
	if err := os.WriteFile(s.CertFile, ca.CertPEM, 0o644); err != nil {
		return nil, err
	}
	if err := pki.WriteKey(s.KeyFile, ca.Key); err != nil {
		return nil, err
	}
	return s, nil
}

// clientCert issues a client certificate for user (CN) in groups (O).
func (s *signer) clientCert(user string, groups []string) (certPEM, keyPEM []byte, err error) {
	return s.ca.Issue(pki.Cert{Serial: big.NewInt(time.Now().UnixNano()), CommonName: user, Organization: groups, Validity: 24 * time.Hour})
}

// trustIn appends the signer's certificate to a CA bundle file.
func (s *signer) trustIn(bundle string) error {
	f, err := os.OpenFile(bundle, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("opening the API server's client CA bundle: %w", err)
	}
	if _, err := f.Write(append([]byte("\n"), s.ca.CertPEM...)); err != nil {
		_ = f.Close()
		return fmt.Errorf("appending to the API server's client CA bundle: %w", err)
	}
	return f.Close()
}
