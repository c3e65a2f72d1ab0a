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

package revision

import (
	"context"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/nettune/nettune/api/v1alpha1"
)

// Store stores revision contents as apps/v1 ControllerRevisions owned by
// the profile (the node renderer reads them back). ControllerRevisions are
// namespaced; they live in the controller's namespace.
type Store struct {
	c         client.Client
	namespace string
}

// NewStore is the store of c's ControllerRevisions in namespace.
func NewStore(c client.Client, namespace string) *Store {
	return &Store{c: c, namespace: namespace}
}

// Ensure stores the profile's current content as revision name.
func (r *Store) Ensure(ctx context.Context, p *v1alpha1.NetTuningProfile, name string, scheme *runtime.Scheme) error {
	cr, err := Object(r.namespace, p.Name, name, Content(p), p.Generation)
	if err != nil {
		return err
	}
	existing := &appsv1.ControllerRevision{}
	switch err := r.c.Get(ctx, client.ObjectKey{Namespace: r.namespace, Name: name}, existing); {
	case err == nil:
		// Content-addressed: an existing revision of this name holds this
		// content. Nothing to write (no create answered 409 every reconcile).
		return nil
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("read revision %s: %w", name, err)
	}
	if err := controllerutil.SetOwnerReference(p, cr, scheme); err != nil {
		return fmt.Errorf("revision %s: %w", name, err)
	}
	if err := r.c.Create(ctx, cr); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("store revision %s: %w", name, err)
	}
	return nil
}

// Prune deletes the profile's ControllerRevisions that are not in keep.
func (r *Store) Prune(ctx context.Context, p *v1alpha1.NetTuningProfile, keep map[string]bool) error {
	list := &appsv1.ControllerRevisionList{}
	if err := r.c.List(ctx, list, client.InNamespace(r.namespace), client.MatchingLabels{v1alpha1.ProfileLabel: labelValue(p.Name)}); err != nil {
		return fmt.Errorf("list revisions: %w", err)
	}
	for i := range list.Items {
		cr := &list.Items[i]
		if keep[cr.Name] || !metav1.IsControlledBy(cr, p) && !ownedBy(cr, p) {
			continue
		}
		if err := r.c.Delete(ctx, cr); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("prune revision %s: %w", cr.Name, err)
		}
	}
	return nil
}

// Object is revision name of profile, holding content, as the
// ControllerRevision in namespace that stores it (without owner). A hub
// places the same object in a cluster: the data is immutable, so one name
// must always carry the same bytes.
func Object(namespace, profile, name string, content *v1alpha1.NetTuningProfileSpec, generation int64) (*appsv1.ControllerRevision, error) {
	raw, err := json.Marshal(content)
	if err != nil {
		return nil, fmt.Errorf("encode revision %s: %w", name, err)
	}
	return &appsv1.ControllerRevision{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ControllerRevision"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{v1alpha1.ProfileLabel: labelValue(profile)}},
		Data:       runtime.RawExtension{Raw: raw},
		Revision:   generation,
	}, nil
}

func ownedBy(o metav1.Object, p *v1alpha1.NetTuningProfile) bool {
	for _, ref := range o.GetOwnerReferences() {
		if ref.UID == p.UID {
			return true
		}
	}
	return false
}

// labelValue fits a name into a label value (63 characters).
func labelValue(s string) string {
	if len(s) <= 63 {
		return s
	}
	return s[:52] + "-" + Hash(s)
}

// Read reads revision name's content (nil when it does not exist, or is not
// yet in the client's cache).
func (r *Store) Read(ctx context.Context, name string) (*v1alpha1.NetTuningProfileSpec, error) {
	cr := &appsv1.ControllerRevision{}
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: r.namespace, Name: name}, cr); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read revision %s: %w", name, err)
	}
	spec := &v1alpha1.NetTuningProfileSpec{}
	if err := json.Unmarshal(cr.Data.Raw, spec); err != nil {
		return nil, fmt.Errorf("decode revision %s: %w", name, err)
	}
	return spec, nil
}
