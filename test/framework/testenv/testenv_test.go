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

package testenv

import (
	"net/http"
	"os"
	"testing"
)

func TestCleanupStopsProcessAndRemovesDir(t *testing.T) {
	t.Parallel()
	var p *Prometheus
	t.Run("start", func(t *testing.T) {
		p = StartPrometheus(t)
	})
	if p == nil {
		t.Fatal("StartPrometheus did not return")
	}
	if p.Running() {
		t.Errorf("prometheus still running after cleanup")
	}
	if _, err := os.Stat(p.Dir()); !os.IsNotExist(err) {
		t.Errorf("%s still exists after cleanup (stat: %v)", p.Dir(), err)
	}
	if _, err := http.Get(p.URL + "/-/ready"); err == nil {
		t.Errorf("%s still answers after cleanup", p.URL)
	}
}
