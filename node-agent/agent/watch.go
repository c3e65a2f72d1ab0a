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
	"fmt"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
)

// DefaultSyncTimeout bounds the first list of the node's NodeNetTuning: Run
// returns an error when the API server did not answer it by then.
const DefaultSyncTimeout = 2 * time.Minute

// Result says when to reconcile again (never when zero, unless an event
// comes).
type Result struct {
	RequeueAfter time.Duration
}

// nntWatch is the node's NodeNetTuning as the watch last delivered it.
type nntWatch struct {
	kube     *Kube
	store    cache.Store
	informer cache.Controller
}

// get is the watched copy of name (a NotFound error when there is none).
func (w *nntWatch) get(name string) (*v1alpha1.NodeNetTuning, error) {
	obj, ok, err := w.store.GetByKey(name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, apierrors.NewNotFound(v1alpha1.GroupVersion.WithResource("nodenettunings").GroupResource(), name)
	}
	return obj.(*v1alpha1.NodeNetTuning).DeepCopy(), nil
}

// names lists the names of what the watch holds.
func (w *nntWatch) names() []string { return w.store.ListKeys() }

// watchNodeNetTuning lists and watches the one NodeNetTuning named node (a
// field selector on metadata.name: the API server sends no other node's
// object), calling enqueue on its creation, deletion and every change of
// its generation (status writes do not wake the reconciler).
func (k *Kube) watchNodeNetTuning(node string, enqueue func()) *nntWatch {
	lw := cache.NewFilteredListWatchFromClient(k.rest, "nodenettunings", metav1.NamespaceAll, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", node).String()
	})
	store, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    &v1alpha1.NodeNetTuning{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { enqueue() },
			UpdateFunc: func(oldObj, newObj any) {
				o, ok1 := oldObj.(*v1alpha1.NodeNetTuning)
				n, ok2 := newObj.(*v1alpha1.NodeNetTuning)
				if ok1 && ok2 && o.Generation != n.Generation {
					enqueue()
				}
			},
			DeleteFunc: func(any) { enqueue() },
		},
		// The agent never reads managedFields: not kept in memory.
		Transform: func(obj any) (any, error) {
			if m, err := meta.Accessor(obj); err == nil {
				m.SetManagedFields(nil)
			}
			return obj, nil
		},
	})
	return &nntWatch{kube: k, store: store, informer: informer}
}

// Run watches the node's NodeNetTuning through k and reconciles it, one
// reconcile at a time, until ctx ends (nil) or the watch cannot list the
// object within syncTimeout (an error: the API server is out of reach).
// A reconcile runs on every change of the object's generation, on every
// Kick, after the RequeueAfter it returned, and after a failure with
// exponential backoff (5 ms doubling up to 1000 s, 10 per second overall),
// like controller-runtime's controllers. Run may be called again after it
// returned, with a new Kube.
func (r *Reconciler) Run(ctx context.Context, k *Kube, syncTimeout time.Duration, log logr.Logger) error {
	r.init()
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{})
	w := k.watchNodeNetTuning(r.NodeName, func() { q.Add(r.NodeName) })

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	informerDone := make(chan struct{})
	go func() {
		defer close(informerDone)
		w.informer.RunWithContext(ctx)
	}()
	defer func() { <-informerDone }()
	defer q.ShutDown()

	syncCtx, syncCancel := context.WithTimeout(ctx, syncTimeout)
	synced := cache.WaitForCacheSync(syncCtx.Done(), w.informer.HasSynced)
	syncCancel()
	if !synced {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("no list of NodeNetTuning %s within %s", r.NodeName, syncTimeout)
	}
	r.watch.Store(w)
	defer r.watch.Store(nil)

	kicked := make(chan struct{})
	go func() {
		defer close(kicked)
		for {
			select {
			case <-ctx.Done():
				return
			case <-r.Kick:
				q.Add(r.NodeName)
			}
		}
	}()
	defer func() { <-kicked }()
	defer cancel()

	go func() {
		<-ctx.Done()
		q.ShutDown()
	}()
	for {
		name, shutdown := q.Get()
		if shutdown {
			return nil
		}
		res, err := r.reconcileSafely(ctx, w, name)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				log.Error(err, "reconciler error", "name", name)
			}
			q.AddRateLimited(name)
		case res.RequeueAfter > 0:
			q.Forget(name)
			q.AddAfter(name, res.RequeueAfter)
		default:
			q.Forget(name)
		}
		q.Done(name)
	}
}

// reconcileSafely reconciles name, a panic turned into an error.
func (r *Reconciler) reconcileSafely(ctx context.Context, w *nntWatch, name string) (res Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v [recovered]", p)
		}
	}()
	r.reconciles.Add(1)
	return r.reconcile(ctx, w, name)
}
