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

package controllers_test

import (
	"os"
	"testing"

	"github.com/nettune/nettune/test/framework/envtest"
)

// TestMain runs the tests of the manager's wiring as a whole (Setup with
// leader election: restart_test.go) against one control plane for the
// package (test/framework/envtest), started by the first test and
// emptied after each. The reconcilers' own tests are beside them, each
// package with its suite_test.go.
func TestMain(m *testing.M) { os.Exit(envtest.Run(m)) }
