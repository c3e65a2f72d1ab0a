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
	"context"
	"net/http"
	"sort"
	"strings"
)

// RequestKey is one kind of API request: verb, resource (with its
// subresource) and response code.
type RequestKey struct {
	Verb, Resource, Code string
}

// RequestCounts are apiserver_request_total by RequestKey.
type RequestCounts map[RequestKey]float64

// APIServerRequests scrapes apiserver_request_total from the kube-apiserver.
func APIServerRequests(ctx context.Context, hc *http.Client, host string) (RequestCounts, error) {
	body, err := Fetch(ctx, hc, strings.TrimSuffix(host, "/")+"/metrics")
	if err != nil {
		return nil, err
	}
	out := RequestCounts{}
	for _, s := range ParseSamples(body, func(n string) bool { return n == "apiserver_request_total" }) {
		res := s.Labels["resource"]
		if res == "" {
			res = "(non-resource)"
		}
		if sub := s.Labels["subresource"]; sub != "" {
			res += "/" + sub
		}
		out[RequestKey{Verb: s.Labels["verb"], Resource: res, Code: s.Labels["code"]}] += s.Value
	}
	return out, nil
}

// Minus is c - before, per key (counters only grow; a key missing before
// counts from zero).
func (c RequestCounts) Minus(before RequestCounts) RequestCounts {
	out := RequestCounts{}
	for k, v := range c {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// Total sums the requests keep accepts (every one when nil).
func (c RequestCounts) Total(keep func(RequestKey) bool) float64 {
	t := 0.0
	for k, v := range c {
		if keep == nil || keep(k) {
			t += v
		}
	}
	return t
}

// Writes sums the write requests (POST, PUT, PATCH, DELETE) answered with
// success of the resource ("" = every resource).
func (c RequestCounts) Writes(resource string) float64 {
	return c.Total(func(k RequestKey) bool { return IsWrite(k) && OK(k) && (resource == "" || k.Resource == resource) })
}

// IsWrite says whether a request's verb changes state.
func IsWrite(k RequestKey) bool {
	switch k.Verb {
	case "POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY":
		return true
	}
	return false
}

// IsConflict says whether a request was answered 409 Conflict.
func IsConflict(k RequestKey) bool { return k.Code == "409" }

// OK says whether a request succeeded (2xx).
func OK(k RequestKey) bool { return strings.HasPrefix(k.Code, "2") }

// KindCount is how many of one kind (of request, of error...).
type KindCount struct {
	Kind  string
	Count float64
}

// SortKindCounts sorts kc largest first, then by kind.
func SortKindCounts(kc []KindCount) {
	sort.Slice(kc, func(i, j int) bool {
		if kc[i].Count != kc[j].Count {
			return kc[i].Count > kc[j].Count
		}
		return kc[i].Kind < kc[j].Kind
	})
}

// ByKind sums c by verb and resource ("VERB resource"), keep-filtered,
// largest first.
func (c RequestCounts) ByKind(keep func(RequestKey) bool) []KindCount {
	return c.sum(keep, func(k RequestKey) string { return k.Verb + " " + k.Resource })
}

// WritesByKind sums the writes by verb, resource and code class ("VERB
// resource", the code appended when not 2xx), largest first.
func (c RequestCounts) WritesByKind() []KindCount {
	return c.sum(IsWrite, func(k RequestKey) string {
		name := k.Verb + " " + k.Resource
		if !OK(k) {
			name += " (" + k.Code + ")"
		}
		return name
	})
}

// sum sums the requests keep accepts (every one when nil) by kind.
func (c RequestCounts) sum(keep func(RequestKey) bool, kind func(RequestKey) string) []KindCount {
	sums := map[string]float64{}
	for k, v := range c {
		if keep == nil || keep(k) {
			sums[kind(k)] += v
		}
	}
	out := make([]KindCount, 0, len(sums))
	for k, v := range sums {
		out = append(out, KindCount{k, v})
	}
	SortKindCounts(out)
	return out
}
