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

package v1alpha1_test

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/nettune/nettune/api/v1alpha1"
)

func i32p(v int32) *int32 { return &v }
func boolp(v bool) *bool  { return &v }
func durp(d time.Duration) *metav1.Duration {
	return &metav1.Duration{Duration: d}
}
func ccp(c v1.CongestionControl) *v1.CongestionControl { return &c }

// fullParams sets every parameter, each to a value of its own.
func fullParams() v1.TCPParameters {
	return v1.TCPParameters{
		Cwnd: &v1.Cwnd{Value: 30, Lock: boolp(false)}, Initcwnd: i32p(25), Initrwnd: i32p(26), Ssthresh: i32p(27),
		RTOMin: durp(10 * time.Millisecond), Quickack: boolp(true), CongestionControl: ccp("bbr"), AdvMSS: i32p(1400), MTU: i32p(1500),
	}
}

func TestCwndIsLocked(t *testing.T) {
	for _, tc := range []struct {
		name string
		lock *bool
		want bool
	}{
		{"unset is the default", nil, v1.DefaultCwndLock},
		{"unset is locked", nil, true},
		{"true", boolp(true), true},
		{"false", boolp(false), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := (&v1.Cwnd{Value: 30, Lock: tc.lock}).IsLocked(); got != tc.want {
				t.Errorf("IsLocked() = %t, want %t", got, tc.want)
			}
		})
	}
}

func TestTCPParametersOverlay(t *testing.T) {
	for _, tc := range []struct {
		name       string
		base, over v1.TCPParameters
		nilOver    bool
		want       v1.TCPParameters
	}{
		{name: "nil over changes nothing", base: fullParams(), nilOver: true, want: fullParams()},
		{name: "empty over changes nothing", base: fullParams(), want: fullParams()},
		{name: "over onto empty is over", over: fullParams(), want: fullParams()},
		{name: "cwnd is replaced as a whole, lock too",
			base: v1.TCPParameters{Cwnd: &v1.Cwnd{Value: 30, Lock: boolp(false)}},
			over: v1.TCPParameters{Cwnd: &v1.Cwnd{Value: 20}},
			want: v1.TCPParameters{Cwnd: &v1.Cwnd{Value: 20}}},
		{name: "unset fields of over keep base's",
			base: v1.TCPParameters{Cwnd: &v1.Cwnd{Value: 30}, Initcwnd: i32p(25), Quickack: boolp(true)},
			over: v1.TCPParameters{Initcwnd: i32p(10), RTOMin: durp(5 * time.Millisecond)},
			want: v1.TCPParameters{Cwnd: &v1.Cwnd{Value: 30}, Initcwnd: i32p(10), Quickack: boolp(true), RTOMin: durp(5 * time.Millisecond)}},
		{name: "false and zero-valued settings are settings",
			base: v1.TCPParameters{Quickack: boolp(true), Cwnd: &v1.Cwnd{Value: 30, Lock: boolp(true)}},
			over: v1.TCPParameters{Quickack: boolp(false), Cwnd: &v1.Cwnd{Value: 30, Lock: boolp(false)}},
			want: v1.TCPParameters{Quickack: boolp(false), Cwnd: &v1.Cwnd{Value: 30, Lock: boolp(false)}}},
		{name: "every field",
			base: v1.TCPParameters{Cwnd: &v1.Cwnd{Value: 1}, Initcwnd: i32p(1), Initrwnd: i32p(1), Ssthresh: i32p(1),
				RTOMin: durp(time.Millisecond), Quickack: boolp(false), CongestionControl: ccp("reno"), AdvMSS: i32p(88), MTU: i32p(576)},
			over: fullParams(), want: fullParams()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := *tc.base.DeepCopy()
			over := tc.over.DeepCopy()
			if tc.nilOver {
				over = nil
			}
			got.Overlay(over)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Overlay:\n got %s\nwant %s", jsonOf(t, got), jsonOf(t, tc.want))
			}
			if over == nil {
				return
			}
			// The result shares nothing with over: changing what over
			// points to after the overlay does not change it.
			bump(over)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("the result changed with over: %s", jsonOf(t, got))
			}
		})
	}
}

// bump changes, in place, every value p's pointers point to.
func bump(p *v1.TCPParameters) {
	for _, v := range []*int32{p.Initcwnd, p.Initrwnd, p.Ssthresh, p.AdvMSS, p.MTU} {
		if v != nil {
			*v++
		}
	}
	if p.Cwnd != nil {
		p.Cwnd.Value++
		if p.Cwnd.Lock != nil {
			*p.Cwnd.Lock = !*p.Cwnd.Lock
		}
	}
	if p.RTOMin != nil {
		p.RTOMin.Duration++
	}
	if p.Quickack != nil {
		*p.Quickack = !*p.Quickack
	}
	if p.CongestionControl != nil {
		*p.CongestionControl = "changed"
	}
}

func TestTCPParametersSetDefaults(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in, out v1.TCPParameters
	}{
		{"nothing set", v1.TCPParameters{}, v1.TCPParameters{}},
		{"no cwnd: nothing to default", v1.TCPParameters{Initcwnd: i32p(10), Quickack: boolp(false)}, v1.TCPParameters{Initcwnd: i32p(10), Quickack: boolp(false)}},
		{"unset lock becomes the default", v1.TCPParameters{Cwnd: &v1.Cwnd{Value: 30}}, v1.TCPParameters{Cwnd: &v1.Cwnd{Value: 30, Lock: boolp(v1.DefaultCwndLock)}}},
		{"lock false stays", v1.TCPParameters{Cwnd: &v1.Cwnd{Value: 30, Lock: boolp(false)}}, v1.TCPParameters{Cwnd: &v1.Cwnd{Value: 30, Lock: boolp(false)}}},
		{"lock true stays", v1.TCPParameters{Cwnd: &v1.Cwnd{Value: 30, Lock: boolp(true)}}, v1.TCPParameters{Cwnd: &v1.Cwnd{Value: 30, Lock: boolp(true)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := *tc.in.DeepCopy()
			got.SetDefaults()
			if !reflect.DeepEqual(got, tc.out) {
				t.Errorf("SetDefaults: got %s, want %s", jsonOf(t, got), jsonOf(t, tc.out))
			}
		})
	}
}

func TestTCPParametersIsEmpty(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    v1.TCPParameters
		want bool
	}{
		{"nothing set", v1.TCPParameters{}, true},
		{"quickack false is a setting", v1.TCPParameters{Quickack: boolp(false)}, false},
		{"mtu only", v1.TCPParameters{MTU: i32p(1500)}, false},
		{"everything", fullParams(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.IsEmpty(); got != tc.want {
				t.Errorf("IsEmpty() = %t, want %t", got, tc.want)
			}
		})
	}
}

// validateCases are parameters with what Validate says of them ("" valid).
var validateCases = []struct {
	name string
	p    v1.TCPParameters
	err  string
}{
	{"nothing set", v1.TCPParameters{}, ""},
	{"cwnd alone", v1.TCPParameters{Cwnd: &v1.Cwnd{Value: 30}}, ""},
	{"initcwnd and ssthresh equal to cwnd", v1.TCPParameters{Cwnd: &v1.Cwnd{Value: 30}, Initcwnd: i32p(30), Ssthresh: i32p(30)}, ""},
	{"initcwnd above cwnd", v1.TCPParameters{Cwnd: &v1.Cwnd{Value: 30}, Initcwnd: i32p(31)}, "initcwnd 31 exceeds cwnd 30"},
	{"ssthresh above cwnd", v1.TCPParameters{Cwnd: &v1.Cwnd{Value: 24}, Ssthresh: i32p(30)}, "ssthresh 30 exceeds cwnd 24"},
	{"ssthresh above an unlocked cwnd", v1.TCPParameters{Cwnd: &v1.Cwnd{Value: 24, Lock: boolp(false)}, Ssthresh: i32p(25)}, "ssthresh 25 exceeds cwnd 24"},
	{"both above cwnd: initcwnd is named", v1.TCPParameters{Cwnd: &v1.Cwnd{Value: 10}, Initcwnd: i32p(20), Ssthresh: i32p(20)}, "initcwnd 20 exceeds cwnd 10"},
	{"without cwnd nothing bounds them", v1.TCPParameters{Initcwnd: i32p(65535), Ssthresh: i32p(65535)}, ""},
	{"every parameter, valid", fullParams(), ""},
}

func TestTCPParametersValidate(t *testing.T) {
	for _, tc := range validateCases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tc.err != "" && (err == nil || err.Error() != tc.err):
				t.Errorf("Validate() = %v, want %q", err, tc.err)
			}
		})
	}
}

// TestTCPParametersAgreeWithTheAPIServer submits each of validateCases as
// a NodeNetTuning's route to the real kube-apiserver: it refuses exactly
// what Validate refuses, naming the same parameter, and stores what it
// accepts as SetDefaults completes it.
func TestTCPParametersAgreeWithTheAPIServer(t *testing.T) {
	ctx := context.Background()
	for i, tc := range validateCases {
		t.Run(tc.name, func(t *testing.T) {
			nnt := &v1.NodeNetTuning{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("tcp-params-%d", i)},
				Spec: v1.NodeNetTuningSpec{Revision: "r1",
					Routes: []v1.NodeRoute{{Destination: "192.168.10.3/32", Parameters: *tc.p.DeepCopy()}}}}
			err := cp.Client.Create(ctx, nnt)
			if err == nil {
				t.Cleanup(func() { _ = cp.Client.Delete(ctx, nnt) })
			}
			verr := tc.p.Validate()
			if verr != nil {
				if err == nil {
					t.Fatalf("stored, but Validate refuses it: %v", verr)
				}
				if !apierrors.IsInvalid(err) {
					t.Fatalf("want an Invalid error, got %v", err)
				}
				field, _, _ := strings.Cut(verr.Error(), " ")
				assertNamesField(t, err, "spec.routes[0].parameters."+field, field+" must not exceed cwnd.value")
				return
			}
			if err != nil {
				t.Fatalf("refused, but Validate accepts it: %v", err)
			}
			got := &v1.NodeNetTuning{}
			if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(nnt), got); err != nil {
				t.Fatal(err)
			}
			want := *tc.p.DeepCopy()
			want.SetDefaults()
			if stored := got.Spec.Routes[0].Parameters; !reflect.DeepEqual(stored, want) {
				t.Errorf("the API server stored %s, SetDefaults gives %s", jsonOf(t, stored), jsonOf(t, want))
			}
		})
	}
}

// TestCwndLockDefaultMatchesTheCRD: every cwnd.lock of the generated CRDs
// defaults to DefaultCwndLock.
func TestCwndLockDefaultMatchesTheCRD(t *testing.T) {
	for _, tc := range []struct {
		crd  string
		path []string // to a TCPParameters, "[]" for the items of a list
	}{
		{"nettune.io_nettuningprofiles.yaml", []string{"spec", "defaults"}},
		{"nettune.io_nettuningprofiles.yaml", []string{"spec", "hostPairs", "[]", "parameters"}},
		{"nettune.io_nettuningprofiles.yaml", []string{"spec", "routes", "[]", "parameters"}},
		{"nettune.io_nodenettunings.yaml", []string{"spec", "routes", "[]", "parameters"}},
		{"nettune.io_nettuningexperiments.yaml", []string{"spec", "variants", "[]", "parameters"}},
	} {
		where := tc.crd + " " + strings.Join(tc.path, ".")
		t.Run(where, func(t *testing.T) {
			raw, err := os.ReadFile("../../config/crd/bases/" + tc.crd)
			if err != nil {
				t.Fatal(err)
			}
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := yaml.Unmarshal(raw, crd); err != nil {
				t.Fatal(err)
			}
			s := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
			for _, p := range append(tc.path, "cwnd", "lock") {
				if p == "[]" {
					if s.Items == nil || s.Items.Schema == nil {
						t.Fatalf("%s: not a list", where)
					}
					s = s.Items.Schema
					continue
				}
				next, ok := s.Properties[p]
				if !ok {
					t.Fatalf("%s: no property %s", where, p)
				}
				s = &next
			}
			if s.Default == nil {
				t.Fatalf("%s.cwnd.lock has no default", where)
			}
			var def bool
			if err := json.Unmarshal(s.Default.Raw, &def); err != nil {
				t.Fatal(err)
			}
			if def != v1.DefaultCwndLock {
				t.Errorf("%s.cwnd.lock defaults to %t in the CRD, DefaultCwndLock is %t", where, def, v1.DefaultCwndLock)
			}
		})
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
