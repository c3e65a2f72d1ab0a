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

package fleetmodel

import (
	"time"

	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nettune/nettune/api/v1alpha1"
)

func TestCommands(t *testing.T) {
	p := &v1alpha1.NetTuningProfile{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		v1alpha1.PromoteAnnotation: PromoteValue("p-abc", 2, time.Time{}),
		v1alpha1.AbortAnnotation:   " p-abc ",
		v1alpha1.ExcludeAnnotation: "av-2, av-1,,av-2",
	}}}
	c := Commands(p)
	if c.PromoteRevision != "p-abc" || c.PromoteStep == nil || *c.PromoteStep != 2 || c.AbortRevision != "p-abc" || !reflect.DeepEqual(c.Excluded, []string{"av-1", "av-2"}) {
		t.Errorf("commands %+v", c)
	}
	// A promote names the rollout it was written for.
	began := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	v := PromoteValue("p-abc", 1, began)
	if rev, step, started, ok := ParsePromote(v); !ok || rev != "p-abc" || step != 1 || !started.Equal(began) || v != "p-abc@1@1795867200" {
		t.Errorf("ParsePromote(%q) = %s %d %v %v", v, rev, step, started, ok)
	}
	for _, bad := range []string{"", "p-abc", "@1", "p-abc@-1", "p-abc@x", "p-abc@1@", "p-abc@1@x", "p-abc@1@0", "p-abc@1@2@3"} {
		if _, _, _, ok := ParsePromote(bad); ok {
			t.Errorf("ParsePromote(%q) accepted", bad)
		}
	}
}
