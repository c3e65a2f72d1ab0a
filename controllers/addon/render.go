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

package addon

import (
	"fmt"
	"io/fs"
	"path"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	"helm.sh/helm/v3/pkg/strvals"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// LoadChart reads a Helm chart from dir in fsys (charts.FS, charts.Dir for
// nettune's own).
func LoadChart(fsys fs.FS, dir string) (*chart.Chart, error) {
	var files []*loader.BufferedFile
	err := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		files = append(files, &loader.BufferedFile{Name: strings.TrimPrefix(p, dir+"/"), Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read chart %s: %w", dir, err)
	}
	ch, err := loader.LoadFiles(files)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", dir, err)
	}
	return ch, nil
}

// Release says where and with what a chart is rendered for one cluster.
type Release struct {
	// Name is the Helm release name (object names derive from it).
	Name string
	// Namespace is the install namespace in the cluster.
	Namespace string
	// KubeVersion is the cluster's Kubernetes version (the ManagedCluster's
	// status.version.kubernetes); Helm's default when empty.
	KubeVersion string
	// Values are the user's values (over the chart's values.yaml).
	Values map[string]any
	// Set are Helm --set expressions applied over Values, in order
	// (e.g. from an AddOnDeploymentConfig's customizedVariables).
	Set []string
}

// Render renders ch as `helm template` would for rel (the values checked
// against the chart's values.schema.json): the Namespace first, then the
// chart's CRDs, then its templates in Helm's install order. NOTES.txt and
// empty documents are left out.
func Render(ch *chart.Chart, rel Release) ([]*unstructured.Unstructured, error) {
	vals := map[string]any{}
	for k, v := range rel.Values {
		vals[k] = v
	}
	for _, s := range rel.Set {
		if err := strvals.ParseInto(s, vals); err != nil {
			return nil, fmt.Errorf("value %q: %w", s, err)
		}
	}
	caps := chartutil.DefaultCapabilities.Copy()
	if rel.KubeVersion != "" {
		v := rel.KubeVersion
		if !strings.HasPrefix(v, "v") {
			v = "v" + v
		}
		caps.KubeVersion = chartutil.KubeVersion{Version: v}
		if parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3); len(parts) >= 2 {
			caps.KubeVersion.Major, caps.KubeVersion.Minor = parts[0], parts[1]
		}
	}
	top, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: rel.Name, Namespace: rel.Namespace, Revision: 1, IsInstall: true}, caps)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	rendered, err := engine.Render(ch, top)
	if err != nil {
		return nil, fmt.Errorf("render chart %s: %w", ch.Name(), err)
	}
	ns := &unstructured.Unstructured{}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	ns.SetName(rel.Namespace)
	out := []*unstructured.Unstructured{ns}
	for _, crd := range ch.CRDObjects() {
		objs, err := decode(crd.Filename, string(crd.File.Data))
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	files := map[string]string{}
	for n, data := range rendered {
		if path.Base(n) == "NOTES.txt" || strings.HasPrefix(path.Base(n), "_") || strings.TrimSpace(data) == "" {
			continue
		}
		files[n] = data
	}
	// Helm's install order by kind; the chart has no hooks.
	hooks, manifests, err := releaseutil.SortManifests(files, caps.APIVersions, releaseutil.InstallOrder)
	if err != nil {
		return nil, fmt.Errorf("render chart %s: %w", ch.Name(), err)
	}
	if len(hooks) > 0 {
		return nil, fmt.Errorf("render chart %s: hooks are not supported (%s)", ch.Name(), hooks[0].Path)
	}
	for _, m := range manifests {
		objs, err := decode(m.Name, m.Content)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

func decode(name, doc string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, part := range releaseutil.SplitManifests(doc) {
		m := map[string]any{}
		if err := yaml.Unmarshal([]byte(part), &m); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "" || u.GetAPIVersion() == "" {
			return nil, fmt.Errorf("%s: a document without apiVersion or kind", name)
		}
		out = append(out, u)
	}
	return out, nil
}
