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
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/node-agent/lokipush"
)

// ConditionLogsShipped is v1alpha1.ConditionLogsShipped: the agent's push
// to Loki, its reasons lokipush.Reason*, its message from
// lokipush.PushHealth (never a credential).
const ConditionLogsShipped = v1alpha1.ConditionLogsShipped

// maxLogsMessage bounds the condition's message.
const maxLogsMessage = 1024

// LogShipper is what reports the agent's push to Loki (a
// *lokipush.Shipper).
type LogShipper interface {
	Health() lokipush.PushHealth
}

// logsShippedCondition is the LogsShipped condition for h; false before
// the first push (the condition is then left as it was).
func logsShippedCondition(h lokipush.PushHealth) (metav1.Condition, bool) {
	if h.Reason == "" {
		return metav1.Condition{}, false
	}
	c := metav1.Condition{Type: ConditionLogsShipped, Reason: h.Reason}
	switch {
	case h.OK:
		c.Status = metav1.ConditionTrue
		c.Message = "Loki accepted the latest push"
		if h.Buffered > 0 {
			c.Message += fmt.Sprintf("; %d line(s) buffered on disk are being sent, oldest first", h.Buffered)
		}
	case h.Reason == lokipush.ReasonRejected:
		c.Status = metav1.ConditionFalse
		c.Message = fmt.Sprintf("Loki refused the content of the latest push (%s); %d line(s) wait on disk", h.Message, h.Buffered)
	default:
		c.Status = metav1.ConditionFalse
		c.Message = fmt.Sprintf("the latest push to Loki failed (%s); %d line(s) wait on disk, retried with backoff (the disk buffer keeps the newest within its bound)", h.Message, h.Buffered)
	}
	if len(c.Message) > maxLogsMessage {
		c.Message = c.Message[:maxLogsMessage-3] + "..."
	}
	return c, true
}

// setLogsShippedCondition sets (or, without a shipper, removes) the
// LogsShipped condition of st. It is called when the status is built, so
// it is written at the status' own cadence: statusEqual does not count a
// change of its message alone (the count of lines on disk moves at every
// push), only of its status or reason; the message is brought up to date
// whenever the status is written.
func (r *Reconciler) setLogsShippedCondition(st *v1alpha1.NodeNetTuningStatus, generation int64) {
	if r.Logs == nil {
		meta.RemoveStatusCondition(&st.Conditions, ConditionLogsShipped)
		return
	}
	c, ok := logsShippedCondition(r.Logs.Health())
	if !ok {
		return
	}
	c.ObservedGeneration = generation
	meta.SetStatusCondition(&st.Conditions, c)
}
