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

package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// profiler takes CPU profiles of the controller and the kube-apiserver at
// the start of each scenario (-profile), for `go tool pprof`.
type profiler struct {
	dir        string
	length     time.Duration
	api        *http.Client // authenticated to the kube-apiserver
	apiHost    string
	controller string // the controller's /debug/pprof base
	say        func(string, ...any)
	wg         sync.WaitGroup
}

// start begins both profiles of the scenario named name; a nil profiler
// takes none.
func (p *profiler) start(ctx context.Context, name string) {
	if p == nil {
		return
	}
	slug := strings.ReplaceAll(name, " ", "-")
	q := fmt.Sprintf("/profile?seconds=%d", int(p.length.Seconds()))
	for _, t := range []struct {
		who string
		c   *http.Client
		url string
	}{{"controller", http.DefaultClient, p.controller + q}, {"kube-apiserver", p.api, strings.TrimSuffix(p.apiHost, "/") + "/debug/pprof" + q}} {
		path := filepath.Join(p.dir, slug+"-"+t.who+".pprof")
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			// The profile is answered after p.length: allow a minute more.
			body, err := fetchWithin(ctx, t.c, t.url, p.length+time.Minute)
			if err == nil {
				err = os.WriteFile(path, body, 0o644)
			}
			if err != nil {
				p.say("profile of %s: %v", t.who, err)
				return
			}
			p.say("CPU profile of %s during %q: %s", t.who, name, path)
		}()
	}
}

// wait returns once every profile is written.
func (p *profiler) wait() {
	if p != nil {
		p.wg.Wait()
	}
}
