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

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LabelSelector selects objects (Nodes, or a hub's ManagedClusters) by their
// labels. It has the JSON shape of metav1.LabelSelector and encodes to the
// same bytes, so manifests, stored objects and revision names (a hash of the
// JSON) are unchanged; but every key, value and operator is held at
// admission to what Kubernetes accepts in a label and what the controller
// parses (metav1.LabelSelectorAsSelector): a selector the controller could not
// use is refused instead of stored. Its lists and maps are bounded so that
// its CEL rules fit the CRD's cost budget. The requirements of matchLabels and
// matchExpressions are ANDed; an empty selector selects everything.
// +structType=atomic
type LabelSelector struct {
	// matchLabels are {key: value} pairs, each the same as a matchExpressions
	// requirement with the key, the operator In and the one value. Keys are
	// label keys (an optional DNS subdomain prefix of at most 253 characters
	// and "/", then a name of at most 63 characters).
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule=`self.all(k, k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$') && k.indexOf('/') <= 253)`,message="every matchLabels key must be a label key: an optional DNS subdomain prefix of at most 253 characters and a slash, then a name of at most 63 alphanumerics, dashes, underscores and dots that starts and ends with an alphanumeric",messageExpression=`'matchLabels key "' + self.filter(k, !(k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$') && k.indexOf('/') <= 253))[0] + '" is not a label key: an optional DNS subdomain prefix of at most 253 characters and a slash, then a name of at most 63 alphanumerics, dashes, underscores and dots that starts and ends with an alphanumeric'`
	MatchLabels map[string]LabelValue `json:"matchLabels,omitempty"`

	// matchExpressions are label requirements.
	// An experiment's arm profiles add one to their base profile's.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	MatchExpressions []LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// LabelValue is a label value: empty, or at most 63 alphanumerics, '-', '_'
// and '.', starting and ending with an alphanumeric.
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
type LabelValue string

// LabelSelectorRequirement is a key, an operator and the values the
// operator relates the key to.
// +kubebuilder:validation:XValidation:rule="!(self.operator in ['In', 'NotIn']) || (has(self.values) && size(self.values) > 0)",message="matchExpressions with In or NotIn need at least one value",fieldPath=".values"
// +kubebuilder:validation:XValidation:rule="!(self.operator in ['Exists', 'DoesNotExist']) || !has(self.values) || size(self.values) == 0",message="matchExpressions with Exists or DoesNotExist take no values",fieldPath=".values"
type LabelSelectorRequirement struct {
	// key is the label key the requirement applies to: an optional DNS
	// subdomain prefix of at most 253 characters and "/", then a name of at
	// most 63 characters.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self.indexOf('/') <= 253",message="the prefix of a label key must be at most 253 characters"
	Key string `json:"key"`

	// operator relates the key to the values: In, NotIn, Exists or
	// DoesNotExist.
	// +required
	// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist
	Operator metav1.LabelSelectorOperator `json:"operator"`

	// values are label values: at least one for In and NotIn, none for Exists
	// and DoesNotExist. An experiment's arm profile lists every vehicle of
	// its arm here, hence the generous bound.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10000
	Values []LabelValue `json:"values,omitempty"`
}

// AsMetav1 is the selector as a metav1.LabelSelector (nil for nil), for
// metav1.LabelSelectorAsSelector and the other apimachinery helpers.
func (s *LabelSelector) AsMetav1() *metav1.LabelSelector {
	if s == nil {
		return nil
	}
	out := &metav1.LabelSelector{}
	if s.MatchLabels != nil {
		out.MatchLabels = make(map[string]string, len(s.MatchLabels))
		for k, v := range s.MatchLabels {
			out.MatchLabels[k] = string(v)
		}
	}
	for _, r := range s.MatchExpressions {
		req := metav1.LabelSelectorRequirement{Key: r.Key, Operator: r.Operator}
		if r.Values != nil {
			req.Values = make([]string, len(r.Values))
			for i, v := range r.Values {
				req.Values[i] = string(v)
			}
		}
		out.MatchExpressions = append(out.MatchExpressions, req)
	}
	return out
}

// LabelSelectorFromMetav1 is the LabelSelector of a metav1.LabelSelector
// (nil for nil).
func LabelSelectorFromMetav1(s *metav1.LabelSelector) *LabelSelector {
	if s == nil {
		return nil
	}
	out := &LabelSelector{}
	if s.MatchLabels != nil {
		out.MatchLabels = make(map[string]LabelValue, len(s.MatchLabels))
		for k, v := range s.MatchLabels {
			out.MatchLabels[k] = LabelValue(v)
		}
	}
	for _, r := range s.MatchExpressions {
		req := LabelSelectorRequirement{Key: r.Key, Operator: r.Operator}
		if r.Values != nil {
			req.Values = make([]LabelValue, len(r.Values))
			for i, v := range r.Values {
				req.Values[i] = LabelValue(v)
			}
		}
		out.MatchExpressions = append(out.MatchExpressions, req)
	}
	return out
}
