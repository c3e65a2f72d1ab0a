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

package revision

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/nettune/nettune/api/v1alpha1"
)

// Content is the part of a profile that is rolled out: everything but
// the rollout itself and where it is placed (clusterSelector, placement,
// hubAssignment).
// A revision is the content-addressed, immutable copy of it.
func Content(p *v1alpha1.NetTuningProfile) *v1alpha1.NetTuningProfileSpec {
	c := p.Spec.DeepCopy()
	c.Rollout = nil
	// Where it goes is not what it is: a hub's profile and the copies it
	// places in clusters hold one revision under one name.
	c.ClusterSelector, c.Placement, c.HubAssignment = nil, nil, nil
	return c
}

// Name is "<profile>-<hash of the content>".
func Name(p *v1alpha1.NetTuningProfile) string {
	return p.Name + "-" + Hash(Content(p))
}

// Hash is a short stable hash of v: the first 10 lowercase hex
// characters of the SHA-256 of its JSON encoding (struct fields in declaration
// order, map keys sorted). It panics if v cannot be encoded as JSON, which no
// API type does.
func Hash(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("revision: Hash: %v", err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:10]
}
