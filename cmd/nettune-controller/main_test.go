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
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nettune/nettune/controllers/hub"
	"github.com/nettune/nettune/controllers/noderender"
	"github.com/nettune/nettune/node-agent/lokipush"
)

func parse(t *testing.T, args ...string) Options {
	t.Helper()
	var o Options
	fs := flag.NewFlagSet("nettune-controller", flag.ContinueOnError)
	o.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o
}

// TestEventShipperFlags: without --loki-push-url nothing is shipped; with
// it, the shipper buffers in --loki-buffer-dir (created) and registers its
// metrics.
func TestEventShipperFlags(t *testing.T) {
	o := parse(t)
	if o.LokiPushURL != "" || o.LokiBufferDir != "" || o.LokiBufferMaxBytes != lokipush.DefaultMaxBytes {
		t.Errorf("defaults %q %q %d", o.LokiPushURL, o.LokiBufferDir, o.LokiBufferMaxBytes)
	}
	s, err := newEventShipper(o, prometheus.NewRegistry(), logr.Discard())
	if err != nil || s != nil {
		t.Fatalf("no --loki-push-url: shipper %v, error %v; want none", s, err)
	}

	dir := filepath.Join(t.TempDir(), "buffer")
	o = parse(t, "--loki-push-url", "http://127.0.0.1:1", "--loki-buffer-dir", dir, "--loki-buffer-max-bytes", "1048576")
	if o.LokiBufferMaxBytes != 1<<20 {
		t.Errorf("--loki-buffer-max-bytes %d", o.LokiBufferMaxBytes)
	}
	reg := prometheus.NewRegistry()
	s, err = newEventShipper(o, reg, logr.Discard())
	if err != nil || s == nil {
		t.Fatalf("shipper %v, error %v", s, err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Errorf("buffer directory %s not created: %v", dir, err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		found = found || mf.GetName() == "nettune_loki_buffered_bytes"
	}
	if !found {
		t.Errorf("the shipper's metrics are not registered")
	}
}

// TestRenderWorkersFlag: --render-workers defaults to the renderer's
// default and is read as given.
func TestRenderWorkersFlag(t *testing.T) {
	if o := parse(t); o.RenderWorkers != noderender.DefaultWorkers {
		t.Errorf("default --render-workers %d, want %d", o.RenderWorkers, noderender.DefaultWorkers)
	}
	if o := parse(t, "--render-workers", "3"); o.RenderWorkers != 3 {
		t.Errorf("--render-workers 3 read as %d", o.RenderWorkers)
	}
}

// TestWorkWritersFlag: --work-writers defaults to the hub's default, is
// read as given, and below 1 is refused naming the flag.
func TestWorkWritersFlag(t *testing.T) {
	if o := parse(t); o.WorkWriters != hub.DefaultWorkWriters {
		t.Errorf("default --work-writers %d, want %d", o.WorkWriters, hub.DefaultWorkWriters)
	}
	if o := parse(t, "--work-writers", "4"); o.WorkWriters != 4 {
		t.Errorf("--work-writers 4 read as %d", o.WorkWriters)
	}
	if err := run([]string{"--hub", "--work-writers", "0"}); err == nil || !strings.Contains(err.Error(), "--work-writers") {
		t.Errorf("--work-writers 0: %v, want an error naming the flag", err)
	}
}
