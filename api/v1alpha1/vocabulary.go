package v1alpha1

// The words of a NetTuningProfile's status, shared by the controller, the
// plugin, the demo and the tests: one definition each.

// Phases of a profile's rollout (status.phase).
const (
	PhaseProgressing = "Progressing"
	PhasePaused      = "Paused"
	PhaseHealthy     = "Healthy"
	PhaseRolledBack  = "RolledBack"
	PhaseDegraded    = "Degraded"
)

// Revision outcomes (status.revisions[].outcome).
const (
	OutcomeProgressing = "Progressing"
	OutcomeStable      = "Stable"
	OutcomeRolledBack  = "RolledBack"
	OutcomeSuperseded  = "Superseded"
)

// Phases of an analysis result (status.analysis[].phase): the analysis as a
// whole, accumulated over its measurements.
const (
	AnalysisRunning      = "Running"
	AnalysisSuccessful   = "Successful"
	AnalysisFailed       = "Failed"
	AnalysisInconclusive = "Inconclusive"
)

// AnalysisTerminal reports whether an analysis result's phase is final:
// Successful, Failed or Inconclusive.
func AnalysisTerminal(phase string) bool {
	switch phase {
	case AnalysisSuccessful, AnalysisFailed, AnalysisInconclusive:
		return true
	}
	return false
}

// Event reasons the controller records on a profile that other parts read
// back (the Loki event line, metrics, dashboards).
const (
	// ReasonRolledBack: the rollout's revision was rolled back; every
	// vehicle returns to the stable revision.
	ReasonRolledBack = "RolledBack"
	// ReasonAnalysisFailed: an analysis failed and the rollout was rolled
	// back (the RolledBack condition's reason).
	ReasonAnalysisFailed = "AnalysisFailed"
	// ReasonAnalysisInconclusive: an analysis was inconclusive; the rollout
	// paused (or, with onInconclusive Abort, was rolled back).
	ReasonAnalysisInconclusive = "AnalysisInconclusive"
)
