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
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
)

// EventRecorder records Kubernetes Events about an object. It is the method
// of client-go's events.EventRecorder, which satisfies it.
type EventRecorder interface {
	Eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// The series bookkeeping of client-go's events broadcaster: an Event
// isomorphic to one recorded less than eventFinish ago is counted in that
// one's series instead of being created again.
const (
	eventFinish      = 6 * time.Minute
	eventRefresh     = 30 * time.Minute
	eventRetryWait   = 10 * time.Second
	eventMaxAttempts = 12
)

// kubeEvent is an events.k8s.io/v1 Event with the fields the agent writes
// (k8s.io/api/events/v1 would link all of k8s.io/api/core/v1).
type kubeEvent struct {
	APIVersion          string           `json:"apiVersion"`
	Kind                string           `json:"kind"`
	Metadata            eventMeta        `json:"metadata"`
	EventTime           metav1.MicroTime `json:"eventTime"`
	Series              *eventSeries     `json:"series,omitempty"`
	ReportingController string           `json:"reportingController"`
	ReportingInstance   string           `json:"reportingInstance"`
	Action              string           `json:"action"`
	Reason              string           `json:"reason"`
	Regarding           objectReference  `json:"regarding"`
	Note                string           `json:"note,omitempty"`
	Type                string           `json:"type"`
}

type eventMeta struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
}

type eventSeries struct {
	Count            int32            `json:"count"`
	LastObservedTime metav1.MicroTime `json:"lastObservedTime"`
}

type objectReference struct {
	Kind            string `json:"kind,omitempty"`
	Namespace       string `json:"namespace,omitempty"`
	Name            string `json:"name,omitempty"`
	UID             string `json:"uid,omitempty"`
	APIVersion      string `json:"apiVersion,omitempty"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

// eventKey is what makes two Events isomorphic (client-go's getKey).
type eventKey struct {
	eventType, action, reason, controller, instance string
	regarding                                       objectReference
}

// kubeRecorder writes Events through Kube, as client-go's events
// broadcaster does: asynchronously, retried while the API server is out of
// reach, repeats counted in a series.
type kubeRecorder struct {
	kube                 *Kube
	ctx                  context.Context
	controller, instance string
	log                  logr.Logger

	mu    sync.Mutex
	cache map[eventKey]*kubeEvent
}

// EventRecorder returns a recorder of Events reported by controller, until
// ctx ends (then what it still holds is dropped).
func (k *Kube) EventRecorder(ctx context.Context, controller string, log logr.Logger) EventRecorder {
	host, _ := os.Hostname()
	r := &kubeRecorder{kube: k, ctx: ctx, controller: controller, instance: controller + "-" + host, log: log,
		cache: map[eventKey]*kubeEvent{}}
	go r.maintain()
	return r
}

func (r *kubeRecorder) Eventf(regarding runtime.Object, _ runtime.Object, eventtype, reason, action, note string, args ...any) {
	ref, err := reference(regarding)
	if err != nil {
		r.log.Error(err, "not reporting an event about an object without a reference", "reason", reason)
		return
	}
	if eventtype != "Normal" && eventtype != "Warning" {
		r.log.Error(nil, "unsupported event type", "eventType", eventtype)
		return
	}
	now := time.Now()
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	ev := &kubeEvent{
		APIVersion: "events.k8s.io/v1", Kind: "Event",
		Metadata:            eventMeta{Name: fmt.Sprintf("%s.%x", ref.Name, now.UnixNano()), Namespace: ns},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: r.controller, ReportingInstance: r.instance,
		Action: action, Reason: reason, Regarding: ref, Note: fmt.Sprintf(note, args...), Type: eventtype,
	}
	go r.record(ev)
}

// reference is the ObjectReference of obj (a NodeNetTuning when it has no
// kind of its own, as objects read from a typed watch have none).
func reference(obj runtime.Object) (objectReference, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return objectReference{}, err
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Kind == "" {
		if _, ok := obj.(*v1alpha1.NodeNetTuning); !ok {
			return objectReference{}, fmt.Errorf("%T has no kind", obj)
		}
		gvk = v1alpha1.GroupVersion.WithKind("NodeNetTuning")
	}
	return objectReference{Kind: gvk.Kind, APIVersion: gvk.GroupVersion().String(), Namespace: m.GetNamespace(),
		Name: m.GetName(), UID: string(m.GetUID()), ResourceVersion: m.GetResourceVersion()}, nil
}

// record creates ev, or counts it in the series of an isomorphic Event.
func (r *kubeRecorder) record(ev *kubeEvent) {
	key := eventKey{ev.Type, ev.Action, ev.Reason, ev.ReportingController, ev.ReportingInstance, ev.Regarding}
	r.mu.Lock()
	var write *kubeEvent
	if have, ok := r.cache[key]; ok {
		if have.Series != nil {
			have.Series.Count++
			have.Series.LastObservedTime = metav1.NewMicroTime(time.Now())
		} else {
			have.Series = &eventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(time.Now())}
			c := *have
			s := *have.Series
			c.Series = &s
			write = &c
		}
	} else {
		r.cache[key] = ev
		c := *ev
		write = &c
	}
	r.mu.Unlock()
	if write == nil {
		return
	}
	for attempt := 1; ; attempt++ {
		if !r.write(write) {
			return
		}
		if attempt >= eventMaxAttempts {
			r.log.Error(nil, "unable to write event (retry limit exceeded)", "reason", write.Reason, "regarding", write.Regarding.Name)
			return
		}
		wait := eventRetryWait + time.Duration(rand.Int64N(int64(eventRetryWait)/4))
		select {
		case <-r.ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// write patches a series, or creates the Event (also when the series' Event
// is gone); it says whether to try again (the API server was not reached).
func (r *kubeRecorder) write(ev *kubeEvent) (retry bool) {
	var err error
	if ev.Series != nil {
		patch, _ := json.Marshal(map[string]any{"series": ev.Series})
		err = r.kube.patchEvent(r.ctx, ev.Metadata.Namespace, ev.Metadata.Name, patch)
	}
	if ev.Series == nil || apierrors.IsNotFound(err) {
		body, _ := json.Marshal(ev)
		err = r.kube.postEvent(r.ctx, ev.Metadata.Namespace, body)
	}
	if err == nil {
		return false
	}
	if _, rejected := err.(apierrors.APIStatus); rejected {
		if apierrors.IsAlreadyExists(err) && ev.Series != nil {
			return true
		}
		if !apierrors.IsAlreadyExists(err) {
			r.log.Error(err, "server rejected event (not retried)", "reason", ev.Reason, "regarding", ev.Regarding.Name)
		}
		return false
	}
	if r.ctx.Err() == nil {
		r.log.Error(err, "unable to write event (retrying)", "reason", ev.Reason, "regarding", ev.Regarding.Name)
	}
	return r.ctx.Err() == nil
}

// maintain ends series (their last count written) and forgets single
// Events eventFinish after they were last seen, and rewrites the open
// series every eventRefresh, until ctx ends.
func (r *kubeRecorder) maintain() {
	finish := time.NewTicker(eventFinish)
	defer finish.Stop()
	refresh := time.NewTicker(eventRefresh)
	defer refresh.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-finish.C:
			r.mu.Lock()
			for k, ev := range r.cache {
				switch {
				case ev.Series != nil && time.Since(ev.Series.LastObservedTime.Time) > eventFinish:
					if !r.write(ev) {
						delete(r.cache, k)
					}
				case ev.Series == nil && time.Since(ev.EventTime.Time) > eventFinish:
					delete(r.cache, k)
				}
			}
			r.mu.Unlock()
		case <-refresh.C:
			r.mu.Lock()
			for _, ev := range r.cache {
				if ev.Series != nil {
					r.write(ev)
				}
			}
			r.mu.Unlock()
		}
	}
}
