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

package latency

import (
	"encoding/json"
	"sort"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nettune/nettune/api/v1alpha1"
)

// Sample is one acknowledged message.
type Sample struct {
	// Time is when the message was sent (just before its first byte was
	// written).
	Time              time.Time
	Topic, Peer       string
	Profile, Revision string
	// Latency is from Time until the acknowledgement was read.
	Latency time.Duration
	Size    int
	Seq     uint64
}

// Sink receives samples. Observe is called from the emulator's reader
// goroutines, concurrently, and must not block.
type Sink interface {
	Observe(s Sample)
}

// LossObserver is optionally implemented by a Sink to learn of messages
// written but never acknowledged: the connection broke or no ack came
// within the ack timeout. s.Latency is how long the message waited.
type LossObserver interface {
	Lost(s Sample)
}

// Sinks sends every sample to each of its sinks.
type Sinks []Sink

// Observe implements Sink.
func (ss Sinks) Observe(s Sample) {
	for _, k := range ss {
		k.Observe(s)
	}
}

// Lost implements LossObserver for the sinks that do.
func (ss Sinks) Lost(s Sample) {
	for _, k := range ss {
		if l, ok := k.(LossObserver); ok {
			l.Lost(s)
		}
	}
}

// LatencyBuckets are the histogram's bucket bounds in seconds: 40
// exponential buckets from 0.1 ms to 1 s (each about 26.6% wider than the
// one before), plus ThresholdBuckets.
var LatencyBuckets = withBounds(prometheus.ExponentialBucketsRange(0.0001, 1, 40), ThresholdBuckets...)

// ThresholdBuckets are bucket bounds at the latencies analyses judge by
// (the fleet's 20 ms target, the 200 ms RTO floor, ...), so that the count
// of messages slower than each is exact: total minus the bucket
// le="<bound>".
var ThresholdBuckets = v1alpha1.ProbeLatencyThresholds

// withBounds returns bs with extra added, sorted, without duplicates.
func withBounds(bs []float64, extra ...float64) []float64 {
	out := append(append([]float64{}, bs...), extra...)
	sort.Float64s(out)
	j := 0
	for i, b := range out {
		if i == 0 || b != out[j-1] {
			out[j] = b
			j++
		}
	}
	return out[:j]
}

// SampleLabels are the variable labels of the probe's metrics.
var SampleLabels = []string{"peer", "topic", "profile", "revision"}

// PrometheusSink exports samples as metrics:
//
//	nettune_probe_latency_seconds{peer,topic,profile,revision}  histogram
//	nettune_probe_messages_total{peer,topic,profile,revision}   acknowledged messages
//	nettune_probe_lost_messages_total{peer,topic,profile,revision}  written, never acknowledged
//
// An empty profile or revision (no route of the spec reaches the peer) is an
// empty label value, which Prometheus treats as absent: select such series
// with revision="".
type PrometheusSink struct {
	Latency  *prometheus.HistogramVec
	Messages *prometheus.CounterVec
	LostMsgs *prometheus.CounterVec
}

// NewPrometheusSink creates the metrics with constLabels (e.g. vehicle and
// node) and registers them on reg.
func NewPrometheusSink(reg prometheus.Registerer, constLabels prometheus.Labels) (*PrometheusSink, error) {
	s := &PrometheusSink{
		Latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:        "nettune_probe_latency_seconds",
			Help:        "Host-pair message latency measured by the topic emulator: from writing a message to reading the peer's acknowledgement.",
			ConstLabels: constLabels,
			Buckets:     LatencyBuckets,
		}, SampleLabels),
		Messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "nettune_probe_messages_total",
			Help:        "Messages of the topic emulator acknowledged by the peer.",
			ConstLabels: constLabels,
		}, SampleLabels),
		LostMsgs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "nettune_probe_lost_messages_total",
			Help:        "Messages of the topic emulator written but never acknowledged (connection broken or ack timeout).",
			ConstLabels: constLabels,
		}, SampleLabels),
	}
	for _, c := range []prometheus.Collector{s.Latency, s.Messages, s.LostMsgs} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Observe implements Sink.
func (p *PrometheusSink) Observe(s Sample) {
	p.Latency.WithLabelValues(s.Peer, s.Topic, s.Profile, s.Revision).Observe(s.Latency.Seconds())
	p.Messages.WithLabelValues(s.Peer, s.Topic, s.Profile, s.Revision).Inc()
}

// Lost implements LossObserver.
func (p *PrometheusSink) Lost(s Sample) {
	p.LostMsgs.WithLabelValues(s.Peer, s.Topic, s.Profile, s.Revision).Inc()
}

// LokiAdder is what LokiSink ships lines with (a *lokipush.Shipper).
type LokiAdder interface {
	Add(labels map[string]string, t time.Time, line string)
}

// ProbeJob is the job label of the probe's Loki streams.
const ProbeJob = "nettune-probe"

// LokiSink ships every sample as one JSON line at its send time,
//
//	{"latency_ms":0.183,"topic":"planning","seq":42,"size":4096}
//
// (latency in milliseconds with 3 decimals, i.e. microseconds) in the stream
// {job="nettune-probe", vehicle, node, host, peer, profile, revision}. Empty
// values (no vehicle configured, no profile on the route to the peer) leave
// the label out; Loki treats a missing label as empty, so revision=""
// selects the samples of untuned pairs. Lost messages are not shipped: a
// line without latency_ms would break `| unwrap latency_ms` queries.
type LokiSink struct {
	Shipper       LokiAdder
	Vehicle, Node string
	// Host is the sending host's name in its vehicle (label host); empty
	// leaves the label out.
	Host string
}

// Observe implements Sink.
func (l *LokiSink) Observe(s Sample) {
	labels := map[string]string{"job": ProbeJob, "peer": s.Peer}
	for k, v := range map[string]string{"vehicle": l.Vehicle, "node": l.Node, "host": l.Host, "profile": s.Profile, "revision": s.Revision} {
		if v != "" {
			labels[k] = v
		}
	}
	l.Shipper.Add(labels, s.Time, SampleLine(s))
}

// SampleLine is the JSON line of s.
func SampleLine(s Sample) string {
	topic, _ := json.Marshal(s.Topic)
	b := make([]byte, 0, 96+len(topic))
	b = append(b, `{"latency_ms":`...)
	b = strconv.AppendFloat(b, float64(s.Latency.Nanoseconds())/1e6, 'f', 3, 64)
	b = append(b, `,"topic":`...)
	b = append(b, topic...)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, s.Seq, 10)
	b = append(b, `,"size":`...)
	b = strconv.AppendInt(b, int64(s.Size), 10)
	b = append(b, '}')
	return string(b)
}
