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

package controllers_test

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers"
	"github.com/nettune/nettune/controllers/fleetmodel"
	"github.com/nettune/nettune/controllers/render"
)

// TestTrimForCache: the cache keeps of a kubelet's Node only what rendering
// reads (the rendered view is unchanged, the rest is gone), and of a
// NodeNetTuning everything the controllers read (the report is unchanged)
// but the per-item results and managedFields.
func TestTrimForCache(t *testing.T) {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "av-1-h0", UID: "u1", ResourceVersion: "7",
			Labels: map[string]string{v1alpha1.DefaultVehicleLabel: "av-1", "nettune.io/host": "h0"},
			Annotations: map[string]string{v1alpha1.LANDeviceAnnotation: "eth1", "node.alpha.kubernetes.io/ttl": "0",
				"flannel.alpha.coreos.com/backend-data": `{"VNI":1}`},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec: corev1.NodeSpec{PodCIDR: "10.42.0.0/24", ProviderID: "k3s://av-1-h0"},
		Status: corev1.NodeStatus{
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "av-1-h0"}, {Type: corev1.NodeInternalIP, Address: "10.0.0.1"}},
			Capacity:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Images:     []corev1.ContainerImage{{Names: []string{"docker.io/library/nettune-agent:dev"}, SizeBytes: 1 << 24}},
			NodeInfo:   corev1.NodeSystemInfo{KubeletVersion: "v1.36.0+k3s1"},
		},
	}
	before := render.NodeFromCore(node)
	got, err := controllers.TrimForCache(node.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	trimmed := got.(*corev1.Node)
	if after := render.NodeFromCore(trimmed); !reflect.DeepEqual(before, after) {
		t.Fatalf("rendered view changed: %+v -> %+v", before, after)
	}
	if trimmed.Name != node.Name || trimmed.UID != node.UID || trimmed.ResourceVersion != "7" || !reflect.DeepEqual(trimmed.Labels, node.Labels) {
		t.Fatalf("identity or labels lost: %+v", trimmed.ObjectMeta)
	}
	if len(trimmed.Annotations) != 1 || trimmed.ManagedFields != nil || len(trimmed.Status.Images) != 0 ||
		len(trimmed.Status.Conditions) != 0 || trimmed.Status.Capacity != nil || trimmed.Spec.PodCIDR != "" || trimmed.Status.NodeInfo.KubeletVersion != "" {
		t.Fatalf("not trimmed: %+v", trimmed)
	}

	now := metav1.Now()
	nnt := &v1alpha1.NodeNetTuning{
		ObjectMeta: metav1.ObjectMeta{Name: "av-1-h0", Generation: 3, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "nettune-agent"}}},
		Spec:       v1alpha1.NodeNetTuningSpec{Revision: "r3", Profiles: []v1alpha1.SourceProfile{{Name: "p", Revision: "p-1"}}},
		Status: v1alpha1.NodeNetTuningStatus{ObservedGeneration: 3, AppliedRevision: "r3", LastHeartbeatTime: &now,
			Conditions: []metav1.Condition{{Type: v1alpha1.ConditionVerified, Status: metav1.ConditionTrue, ObservedGeneration: 3}},
			Items:      []v1alpha1.ItemResult{{Kind: "Route", Name: "10.0.0.2/32", State: "Verified"}}},
	}
	v0, f0, s0 := fleetmodel.NodeReport(nnt)
	got, err = controllers.TrimForCache(nnt.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	tn := got.(*v1alpha1.NodeNetTuning)
	if v, f, s := fleetmodel.NodeReport(tn); v != v0 || f != f0 || !s.Equal(s0) || !v0 {
		t.Fatalf("report changed: %v %v %v -> %v %v %v", v0, f0, s0, v, f, s)
	}
	if !reflect.DeepEqual(tn.Spec, nnt.Spec) || tn.Status.Items != nil || tn.ManagedFields != nil {
		t.Fatalf("NodeNetTuning trimmed wrongly: %+v", tn)
	}
}
