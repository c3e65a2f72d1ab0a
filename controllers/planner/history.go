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

import "github.com/nettune/nettune/api/v1alpha1"

// maxAnalysisResults is how many analysis results status.analysis keeps
// (the latest).
const maxAnalysisResults = 8

// WithResult is st with res recorded in status.analysis: it replaces the
// result of the same analysis and step, or is appended (the oldest beyond
// maxAnalysisResults dropped). st is not modified.
func WithResult(st v1alpha1.NetTuningProfileStatus, res v1alpha1.AnalysisResult) v1alpha1.NetTuningProfileStatus {
	st = *st.DeepCopy()
	recordResult(&st, res)
	return st
}

func recordResult(st *v1alpha1.NetTuningProfileStatus, res v1alpha1.AnalysisResult) {
	idx := -1
	for i, a := range st.Analysis {
		if a.Name == res.Name && a.Step == res.Step {
			idx = i
		}
	}
	if idx >= 0 {
		st.Analysis[idx] = res
	} else {
		st.Analysis = append(st.Analysis, res)
	}
	if len(st.Analysis) > maxAnalysisResults {
		st.Analysis = st.Analysis[len(st.Analysis)-maxAnalysisResults:]
	}
}

// AnalysisResultOf is st's result of analysis name at step (ok false:
// none yet).
func AnalysisResultOf(st v1alpha1.NetTuningProfileStatus, name string, step int32) (res v1alpha1.AnalysisResult, ok bool) {
	for _, a := range st.Analysis {
		if a.Name == name && a.Step == step {
			res, ok = a, true
		}
	}
	return res, ok
}
