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

package planner

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// setCondition sets c with the planner's clock: the transition time changes
// only when the status does.
func setCondition(conds []metav1.Condition, c metav1.Condition, now time.Time) []metav1.Condition {
	if c.Message == "" {
		c.Message = c.Reason
	}
	c.LastTransitionTime = metav1.NewTime(now)
	meta.SetStatusCondition(&conds, c)
	return conds
}

func removeCondition(conds []metav1.Condition, t string) []metav1.Condition {
	meta.RemoveStatusCondition(&conds, t)
	return conds
}

func findCondition(conds []metav1.Condition, t string) *metav1.Condition {
	return meta.FindStatusCondition(conds, t)
}
