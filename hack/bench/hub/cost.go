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
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/hack/bench/internal/benchutil"
)

// planeReading is what the hub's API server and etcd say at one moment:
// the watch events the API server sent (apiserver_watch_events_sizes, by
// kind: every event to every watcher) and etcd's database size.
type planeReading struct {
	watchBytes, watchEvents map[string]float64
	etcdDB, etcdInUse       float64
}

// readPlane scrapes the API server's and etcd's metrics (etcdURL "" skips
// etcd).
func readPlane(ctx context.Context, api *http.Client, host, etcdURL string) (planeReading, error) {
	pr := planeReading{watchBytes: map[string]float64{}, watchEvents: map[string]float64{}}
	body, err := benchutil.Fetch(ctx, api, strings.TrimSuffix(host, "/")+"/metrics")
	if err != nil {
		return pr, err
	}
	keep := func(n string) bool {
		return n == "apiserver_watch_events_sizes_sum" || n == "apiserver_watch_events_sizes_count"
	}
	for _, s := range benchutil.ParseSamples(body, keep) {
		kind := s.Labels["resource"] // kube-apiserver 1.36; kind before
		if kind == "" {
			kind = strings.ToLower(s.Labels["kind"]) + "s"
		}
		if s.Name == "apiserver_watch_events_sizes_sum" {
			pr.watchBytes[kind] += s.Value
		} else {
			pr.watchEvents[kind] += s.Value
		}
	}
	if etcdURL == "" {
		return pr, nil
	}
	body, err = benchutil.Fetch(ctx, http.DefaultClient, strings.TrimSuffix(etcdURL, "/")+"/metrics")
	if err != nil {
		return pr, err
	}
	for _, s := range benchutil.ParseSamples(body, func(n string) bool {
		return n == "etcd_mvcc_db_total_size_in_bytes" || n == "etcd_mvcc_db_total_size_in_use_in_bytes"
	}) {
		if s.Name == "etcd_mvcc_db_total_size_in_bytes" {
			pr.etcdDB = s.Value
		} else {
			pr.etcdInUse = s.Value
		}
	}
	return pr, nil
}

// watchDelta is what the API server's watches sent of one kind between two
// readings.
type watchDelta struct{ events, bytes float64 }

// reportCost is what the clusters' vehicle reports weigh at the hub, read
// once every vehicle reported (after the first scenario): one cluster's
// report, its work, and every work of the profile.
type reportCost struct {
	cluster     string
	reportBytes int // the vehicleReport feedback value
	reportLines int
	statusBytes int   // the work's status, as JSON
	workBytes   int   // the whole work as the API server serves it (JSON)
	worksBytes  int64 // every ManifestWork, one LIST's items (JSON)
	works       int
	// profileBytes is the hub profile as stored (JSON), statusBytes its
	// status; profileVehicles the vehicles that status counts.
	profileBytes, profileStatusBytes int
	profileVehicles                  int32
	// profileClusters are the entries of its status.clusters,
	// profileNames the vehicles its status.assignments names (none at a
	// hub), profileManagedBytes its metadata.managedFields (JSON).
	profileClusters, profileNames, profileManagedBytes int
	err                                                string
}

// measureReportCost reads the first cluster's work and every work through
// the API server (JSON, as stored: custom resources are stored as JSON).
func measureReportCost(ctx context.Context, api *http.Client, host, cluster string) reportCost {
	rc := reportCost{cluster: cluster}
	base := strings.TrimSuffix(host, "/") + "/apis/work.open-cluster-management.io/v1"
	body, err := benchutil.Fetch(ctx, api, fmt.Sprintf("%s/namespaces/%s/manifestworks/nettune-%s", base, cluster, profileName))
	if err != nil {
		rc.err = err.Error()
		return rc
	}
	rc.workBytes = len(body)
	pbody, err := benchutil.Fetch(ctx, api, strings.TrimSuffix(host, "/")+"/apis/nettune.io/v1alpha1/nettuningprofiles/"+profileName)
	if err != nil {
		rc.err = err.Error()
		return rc
	}
	var prof v1alpha1.NetTuningProfile
	if err := json.Unmarshal(pbody, &prof); err != nil {
		rc.err = err.Error()
		return rc
	}
	pstatus, _ := json.Marshal(prof.Status)
	rc.profileBytes, rc.profileStatusBytes, rc.profileVehicles = len(pbody), len(pstatus), prof.Status.Vehicles.Total
	rc.profileClusters = len(prof.Status.Clusters)
	for _, a := range prof.Status.Assignments {
		rc.profileNames += len(a.Vehicles)
	}
	managed, _ := json.Marshal(prof.ManagedFields)
	rc.profileManagedBytes = len(managed)
	var w workv1.ManifestWork
	if err := json.Unmarshal(body, &w); err != nil {
		rc.err = err.Error()
		return rc
	}
	status, _ := json.Marshal(w.Status)
	rc.statusBytes = len(status)
	for _, m := range w.Status.ResourceStatus.Manifests {
		for _, v := range m.StatusFeedbacks.Values {
			if v.Name == feedbackName && v.Value.String != nil {
				rc.reportBytes = len(*v.Value.String)
				rc.reportLines = strings.Count(*v.Value.String, "\n")
			}
		}
	}
	body, err = benchutil.FetchWithin(ctx, api, base+"/manifestworks", 2*time.Minute)
	if err != nil {
		rc.err = err.Error()
		return rc
	}
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		rc.err = err.Error()
		return rc
	}
	rc.works = len(list.Items)
	for _, it := range list.Items {
		rc.worksBytes += int64(len(it))
	}
	return rc
}
