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

package benchutil

import (
	"os"
	"reflect"
	"testing"
)

func TestParseSamples(t *testing.T) {
	body := []byte(`# HELP apiserver_request_total Counter
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",resource="manifestworks",verb="POST"} 3
apiserver_request_total{code="200",resource="manifestworks",subresource="status",verb="PATCH"} 5 1700000000
apiserver_request_total{code="409",resource="manifestworks",subresource="status",verb="PATCH"} 2
apiserver_request_total{code="200",verb="GET",path="/a,b\"c"} 7
other_total 1
malformed{code="200" 1
`)
	got := ParseSamples(body, func(n string) bool { return n == "apiserver_request_total" })
	if len(got) != 4 {
		t.Fatalf("%d samples, want 4: %+v", len(got), got)
	}
	if l := got[3].Labels; l["path"] != `/a,b"c` || l["verb"] != "GET" || got[3].Value != 7 {
		t.Errorf("labels %q value %v", l, got[3].Value)
	}
	if all := ParseSamples(body, nil); len(all) != 5 {
		t.Errorf("%d samples without a filter, want 5", len(all))
	}
}

func TestRequestCounts(t *testing.T) {
	before := RequestCounts{
		{Verb: "POST", Resource: "manifestworks", Code: "201"}: 1,
	}
	after := RequestCounts{
		{Verb: "POST", Resource: "manifestworks", Code: "201"}:         4,
		{Verb: "PATCH", Resource: "manifestworks/status", Code: "200"}: 5,
		{Verb: "PATCH", Resource: "manifestworks/status", Code: "409"}: 2,
		{Verb: "GET", Resource: "manifestworks", Code: "200"}:          9,
	}
	d := after.Minus(before)
	if got := d.Writes(""); got != 8 {
		t.Errorf("Writes(\"\") = %v, want 8", got)
	}
	if got := d.Writes("manifestworks"); got != 3 {
		t.Errorf("Writes(manifestworks) = %v, want 3", got)
	}
	if got := d.Total(IsConflict); got != 2 {
		t.Errorf("conflicts %v, want 2", got)
	}
	want := []KindCount{{"PATCH manifestworks/status", 5}, {"POST manifestworks", 3}, {"PATCH manifestworks/status (409)", 2}}
	if got := d.WritesByKind(); !reflect.DeepEqual(got, want) {
		t.Errorf("WritesByKind = %v, want %v", got, want)
	}
	want = []KindCount{{"GET manifestworks", 9}, {"PATCH manifestworks/status", 7}, {"POST manifestworks", 3}}
	if got := d.ByKind(nil); !reflect.DeepEqual(got, want) {
		t.Errorf("ByKind(nil) = %v, want %v", got, want)
	}
}

func TestReadProc(t *testing.T) {
	u, err := ReadProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u.RSS <= 0 || u.HWM < u.RSS {
		t.Errorf("RSS %d, peak %d", u.RSS, u.HWM)
	}
}

func TestShellJoin(t *testing.T) {
	got := ShellJoin([]string{"-sizes", "20", "-state-dir", "/tmp/a b", "-out", "", "it's"})
	want := `-sizes 20 -state-dir '/tmp/a b' -out '' 'it'\''s'`
	if got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestParseLogLine(t *testing.T) {
	e, ok := ParseLogLine([]byte(`{"level":"error","msg":"Reconciler error","controller":"hubprofile","error":"boom"}`))
	if !ok || !e.IsError() || e.Controller != "hubprofile" || e.Error != "boom" {
		t.Errorf("%+v %t", e, ok)
	}
	if _, ok := ParseLogLine([]byte("I0101 klog line")); ok {
		t.Error("a non-JSON line parsed")
	}
}
