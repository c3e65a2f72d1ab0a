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

	"github.com/nettune/nettune/hack/bench/internal/benchutil"
)

// profiler takes CPU profiles of the controller and the kube-apiserver at
// the start of each scenario (-profile) and heap profiles of the controller
// during each scenario (-heap), for `go tool pprof`.
type profiler struct {
	dir        string
	length     time.Duration // CPU profiles' length (0 = none)
	heap       bool          // heap profiles
	pid        int           // the controller's
	api        *http.Client  // authenticated to the kube-apiserver
	apiHost    string
	controller string // the controller's /debug/pprof base
	say        func(string, ...any)
	wg         sync.WaitGroup
	// stopHeap ends the current scenario's heap sampler; heapDone is
	// closed once it returned.
	stopHeap context.CancelFunc
	heapDone chan struct{}
}

// start begins both profiles of the scenario named name; a nil profiler
// takes none.
func (p *profiler) start(ctx context.Context, name string) {
	if p == nil {
		return
	}
	slug := strings.ReplaceAll(name, " ", "-")
	if p.heap {
		hctx, cancel := context.WithCancel(ctx)
		p.stopHeap, p.heapDone = cancel, make(chan struct{})
		go func() {
			defer close(p.heapDone)
			p.sampleHeap(hctx, slug)
		}()
	}
	if p.length <= 0 {
		return
	}
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
			body, err := benchutil.FetchWithin(ctx, t.c, t.url, p.length+time.Minute)
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

// sampleHeap reads the controller's RSS every second until ctx ends and
// takes a heap profile whenever it is 5 % above the highest seen so far in
// the scenario (slug-controller-heap-peak.pprof, the RSS in its name's
// companion .txt).
func (p *profiler) sampleHeap(ctx context.Context, slug string) {
	var peak int64
	path := filepath.Join(p.dir, slug+"-controller-heap-peak.pprof")
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		if u, err := benchutil.ReadProc(p.pid); err == nil && u.RSS > peak+peak/20 {
			if err := p.heapProfile(ctx, path, fmt.Sprintf("RSS %d MiB (%d MiB of it mapped files)", u.RSS>>20, u.File>>20)); err == nil {
				peak = u.RSS
			}
		}
		select {
		case <-ctx.Done():
			if peak > 0 {
				p.say("heap profile of the controller at its highest RSS in %q (%d MiB): %s", slug, peak>>20, path)
			}
			return
		case <-t.C:
		}
	}
}

// memStats is the controller's runtime.MemStats as /debug/pprof/heap?debug=1
// prints them ("" when unreadable).
func (p *profiler) memStats(ctx context.Context) string {
	body, err := benchutil.FetchWithin(ctx, http.DefaultClient, p.controller+"/heap?debug=1", time.Minute)
	if err != nil {
		return ""
	}
	if i := strings.Index(string(body), "# runtime.MemStats"); i >= 0 {
		return string(body[i:])
	}
	return ""
}

// heapProfile writes the controller's heap profile into path and, beside
// it (.txt), rss, the time and the controller's runtime.MemStats.
func (p *profiler) heapProfile(ctx context.Context, path, rss string) error {
	body, err := benchutil.FetchWithin(ctx, http.DefaultClient, p.controller+"/heap", time.Minute)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, body, 0o644); err != nil {
		return err
	}
	_ = os.WriteFile(strings.TrimSuffix(path, ".pprof")+".txt", fmt.Appendf(nil, "%s when taken (%s)\n%s", rss, time.Now().UTC().Format(time.RFC3339), p.memStats(ctx)), 0o644)
	return nil
}

// end stops the scenario's heap sampler and takes a heap profile of the
// controller at the scenario's end (slug-controller-heap-end.pprof).
func (p *profiler) end(ctx context.Context, name string) {
	if p == nil || !p.heap {
		return
	}
	p.stopHeap()
	<-p.heapDone
	slug := strings.ReplaceAll(name, " ", "-")
	path := filepath.Join(p.dir, slug+"-controller-heap-end.pprof")
	rss := "RSS unreadable"
	if u, err := benchutil.ReadProc(p.pid); err == nil {
		rss = fmt.Sprintf("RSS %d MiB (%d MiB of it mapped files), peak %d MiB", u.RSS>>20, u.File>>20, u.HWM>>20)
	}
	if err := p.heapProfile(ctx, path, rss); err != nil {
		p.say("heap profile of the controller: %v", err)
		return
	}
	p.say("heap profile of the controller at the end of %q: %s", name, path)
}

// wait returns once every profile is written.
func (p *profiler) wait() {
	if p != nil {
		p.wg.Wait()
	}
}
