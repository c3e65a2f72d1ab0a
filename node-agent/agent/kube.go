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

package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	jsonpatch "github.com/evanphx/json-patch/v5"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
)

// Kube is the agent's whole conversation with the API server: one watch of
// its NodeNetTuning and the patches of its status, its Lease, its Events
// and one read of its Node's labels. It is a REST client with only these
// types in its scheme: no clientset, no informers of other API groups (the
// agent's binary is mostly what it links, and every page of it counts in
// its RSS on a vehicle).
type Kube struct {
	rest *rest.RESTClient // nettune.io/v1alpha1; other groups through AbsPath
}

// kubeScheme knows the NodeNetTuning, the Lease and the API's own types
// (Status, ListOptions, WatchEvent).
func kubeScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := coordinationv1.AddToScheme(s); err != nil {
		return nil, err
	}
	metav1.AddToGroupVersion(s, metav1.SchemeGroupVersion)
	return s, nil
}

// NewKube connects to the API server of cfg (one HTTP client for every
// request and the watch).
func NewKube(cfg *rest.Config) (*Kube, error) {
	s, err := kubeScheme()
	if err != nil {
		return nil, err
	}
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &v1alpha1.GroupVersion
	c.APIPath = "/apis"
	c.ContentType = runtime.ContentTypeJSON
	c.AcceptContentTypes = runtime.ContentTypeJSON
	c.NegotiatedSerializer = serializer.NewCodecFactory(s).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	hc, err := rest.HTTPClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("HTTP client for %s: %w", c.Host, err)
	}
	rc, err := rest.RESTClientForConfigAndClient(c, hc)
	if err != nil {
		return nil, fmt.Errorf("REST client for %s: %w", c.Host, err)
	}
	return &Kube{rest: rc}, nil
}

// PatchStatus writes the status of updated as a JSON merge patch from
// original (what changed only, a field gone as null).
func (k *Kube) PatchStatus(ctx context.Context, original, updated *v1alpha1.NodeNetTuning) error {
	from, err := json.Marshal(original)
	if err != nil {
		return err
	}
	to, err := json.Marshal(updated)
	if err != nil {
		return err
	}
	patch, err := jsonpatch.CreateMergePatch(from, to)
	if err != nil {
		return fmt.Errorf("computing the status patch: %w", err)
	}
	return k.rest.Patch(types.MergePatchType).Resource("nodenettunings").Name(updated.Name).SubResource("status").
		Body(patch).Do(ctx).Error()
}

// NodeLabels reads the labels of the Node name.
func (k *Kube) NodeLabels(ctx context.Context, name string) (map[string]string, error) {
	raw, err := k.rest.Get().AbsPath("/api/v1/nodes", name).Do(ctx).Raw()
	if err != nil {
		return nil, err
	}
	var node metav1.PartialObjectMetadata
	if err := json.Unmarshal(raw, &node); err != nil {
		return nil, fmt.Errorf("decoding node %s: %w", name, err)
	}
	return node.Labels, nil
}

// leasePath is the path of the Leases of namespace, or of one of them.
func leasePath(namespace string, name ...string) string {
	p := "/apis/coordination.k8s.io/v1/namespaces/" + namespace + "/leases"
	if len(name) > 0 {
		p += "/" + name[0]
	}
	return p
}

// GetLease reads a Lease (LeaseClient).
func (k *Kube) GetLease(ctx context.Context, namespace, name string) (*coordinationv1.Lease, error) {
	l := &coordinationv1.Lease{}
	if err := k.rest.Get().AbsPath(leasePath(namespace, name)).Do(ctx).Into(l); err != nil {
		return nil, err
	}
	return l, nil
}

// CreateLease creates a Lease (LeaseClient).
func (k *Kube) CreateLease(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	if err := k.rest.Post().AbsPath(leasePath(l.Namespace)).Body(leaseBody(l)).Do(ctx).Into(out); err != nil {
		return nil, err
	}
	return out, nil
}

// UpdateLease replaces a Lease, with its resourceVersion (LeaseClient).
func (k *Kube) UpdateLease(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	if err := k.rest.Put().AbsPath(leasePath(l.Namespace, l.Name)).Body(leaseBody(l)).Do(ctx).Into(out); err != nil {
		return nil, err
	}
	return out, nil
}

// leaseBody is l with its kind, as the API server wants it in a body.
func leaseBody(l *coordinationv1.Lease) []byte {
	c := l.DeepCopy()
	c.APIVersion, c.Kind = coordinationv1.SchemeGroupVersion.String(), "Lease"
	raw, _ := json.Marshal(c) // a Lease always marshals
	return raw
}

// postEvent creates an events.k8s.io/v1 Event.
func (k *Kube) postEvent(ctx context.Context, namespace string, body []byte) error {
	return k.rest.Post().AbsPath("/apis/events.k8s.io/v1/namespaces/"+namespace+"/events").
		SetHeader("Content-Type", runtime.ContentTypeJSON).Body(body).Do(ctx).Error()
}

// patchEvent merge-patches an events.k8s.io/v1 Event.
func (k *Kube) patchEvent(ctx context.Context, namespace, name string, patch []byte) error {
	return k.rest.Patch(types.MergePatchType).AbsPath("/apis/events.k8s.io/v1/namespaces/"+namespace+"/events", name).
		Body(patch).Do(ctx).Error()
}

// LoadConfig finds the API server as controller-runtime's config.GetConfig
// does, without its --kubeconfig flag: $KUBECONFIG (a list of files),
// else the in-cluster configuration, else ~/.kube/config; requests are
// limited to 20 per second (bursts of 30) unless the configuration says
// otherwise.
func LoadConfig() (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar); env != "" {
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{Precedence: filepath.SplitList(env)}, &clientcmd.ConfigOverrides{}).ClientConfig()
	} else if cfg, err = rest.InClusterConfig(); err != nil {
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			clientcmd.NewDefaultClientConfigLoadingRules(), &clientcmd.ConfigOverrides{}).ClientConfig()
	}
	if err != nil {
		return nil, err
	}
	if cfg.QPS == 0 {
		cfg.QPS = 20
	}
	if cfg.Burst == 0 {
		cfg.Burst = 30
	}
	return cfg, nil
}
