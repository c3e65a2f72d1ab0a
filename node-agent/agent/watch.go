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
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
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

// WatchRetryMax bounds the wait between two attempts to list or watch the
// node's NodeNetTuning while the API server is out of reach: the backoff
// starts at 800 ms and doubles up to 10 s, each wait drawn up to 50 % longer
// (client-go's informers wait up to 60 s). The agent lists or watches again
// at most this long after the API server answers again.
const WatchRetryMax = 15 * time.Second

// watchBackoff is the watch's retry backoff (WatchRetryMax); reset after
// two minutes without a failure, as client-go's own.
func watchBackoff() *wait.Backoff {
	const first, capped = 800 * time.Millisecond, 10 * time.Second
	return &wait.Backoff{Duration: first, Factor: 2, Jitter: 0.5, Cap: capped, Steps: int(capped/first) + 1}
}

// nntWatch is the node's NodeNetTuning as the watch last delivered it.
type nntWatch struct {
	kube      *Kube
	store     *nntStore
	reflector *cache.Reflector
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

// hasSynced says whether the first list has been stored.
func (w *nntWatch) hasSynced() bool { return w.store.synced.Load() }

// nntStore is the reflector's store: the watched objects without their
// managedFields (the agent never reads them), and the reconciler woken on
// every list (the first and every relist after the watch broke, so that a
// report an outage held back is written when the API server is back), on
// a creation or a deletion, and on a change of the generation (not on the
// agent's own status writes).
type nntStore struct {
	cache.Store
	enqueue func()
	synced  atomic.Bool
}

// strip drops what the agent does not keep of an object.
func strip(obj any) any {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj
}

func (s *nntStore) Add(obj any) error {
	if err := s.Store.Add(strip(obj)); err != nil {
		return err
	}
	s.enqueue()
	return nil
}

func (s *nntStore) Update(obj any) error {
	old, had, _ := s.Get(obj)
	if err := s.Store.Update(strip(obj)); err != nil {
		return err
	}
	o, ok1 := old.(*v1alpha1.NodeNetTuning)
	n, ok2 := obj.(*v1alpha1.NodeNetTuning)
	if !had || !ok1 || !ok2 || o.Generation != n.Generation {
		s.enqueue()
	}
	return nil
}

func (s *nntStore) Delete(obj any) error {
	if err := s.Store.Delete(obj); err != nil {
		return err
	}
	s.enqueue()
	return nil
}

func (s *nntStore) Replace(list []any, resourceVersion string) error {
	for i := range list {
		list[i] = strip(list[i])
	}
	if err := s.Store.Replace(list, resourceVersion); err != nil {
		return err
	}
	s.synced.Store(true)
	s.enqueue()
	return nil
}

// Resync is a no-op: the reflector runs without a resync period (the
// reconciler requeues itself every Resync).
func (s *nntStore) Resync() error { return nil }

// reconnectingLW calls reconnected when a list or a watch succeeds after
// one failed: the API server answers again. A watch the outage broke is
// resumed from its resourceVersion without a new list, so the store sees
// only what changed meanwhile; the reconciler, whose status write may have
// failed during the outage, is woken by this instead.
type reconnectingLW struct {
	*cache.ListWatch
	reconnected func()
	failed      atomic.Bool
}

func (l *reconnectingLW) outcome(err error) {
	if err != nil {
		l.failed.Store(true)
	} else if l.failed.Swap(false) {
		l.reconnected()
	}
}

func (l *reconnectingLW) ListWithContext(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	obj, err := l.ListWatch.ListWithContext(ctx, o)
	l.outcome(err)
	return obj, err
}

func (l *reconnectingLW) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	w, err := l.ListWatch.WatchWithContext(ctx, o)
	l.outcome(err)
	return w, err
}

// watchNodeNetTuning lists and watches the one NodeNetTuning named node (a
// field selector on metadata.name: the API server sends no other node's
// object) into a store that calls enqueue (nntStore), and calls reconnected
// when the API server answers again after a failed list or watch
// (reconnectingLW). A failed list or watch is retried with watchBackoff.
func (k *Kube) watchNodeNetTuning(node string, enqueue, reconnected func()) *nntWatch {
	lw := &reconnectingLW{ListWatch: cache.NewFilteredListWatchFromClient(k.rest, "nodenettunings", metav1.NamespaceAll, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", node).String()
	}), reconnected: reconnected}
	store := &nntStore{Store: cache.NewStore(cache.MetaNamespaceKeyFunc), enqueue: enqueue}
	r := cache.NewReflectorWithOptions(lw, &v1alpha1.NodeNetTuning{}, store, cache.ReflectorOptions{
		Name: "nodenettuning/" + node, Backoff: watchBackoff()})
	return &nntWatch{kube: k, store: store, reflector: r}
}

// Run watches the node's NodeNetTuning through k and reconciles it, one
// reconcile at a time, until ctx ends (nil) or the watch cannot list the
// object within syncTimeout (an error: the API server is out of reach;
// the watch has stopped when Run returns). While Run runs, a broken watch
// is listed or watched again within WatchRetryMax of the API server
// answering. A reconcile runs on every list, on every change of the
// object's generation, when the API server answers again after a failed
// list or watch, on every Kick, after the RequeueAfter it returned, and
// after a failure with exponential backoff (5 ms doubling up to 1000 s, 10
// per second overall), like controller-runtime's controllers. Run may be
// called again after it returned, with a new Kube.
func (r *Reconciler) Run(ctx context.Context, k *Kube, syncTimeout time.Duration, log logr.Logger) error {
	r.init()
	limiter := r.retryLimiter
	if limiter == nil {
		limiter = workqueue.DefaultTypedControllerRateLimiter[string]()
	}
	q := workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[string]{})
	w := k.watchNodeNetTuning(r.NodeName, func() { q.Add(r.NodeName) }, func() {
		// Back from an outage: reconcile now, and a failure from here
		// backs off from the start again.
		log.Info("API server answers again", "name", r.NodeName)
		q.Forget(r.NodeName)
		q.Add(r.NodeName)
	})

	ctx, cancel := context.WithCancel(ctx)
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		w.reflector.RunWithContext(ctx)
	}()
	// Deferred calls run last to first: the watch's context ends before
	// Run waits for the watch to stop, on every return.
	defer func() { <-watchDone }()
	defer cancel()
	defer q.ShutDown()

	syncCtx, syncCancel := context.WithTimeout(ctx, syncTimeout)
	synced := cache.WaitForCacheSync(syncCtx.Done(), w.hasSynced)
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
