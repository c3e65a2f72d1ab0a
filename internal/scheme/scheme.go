// Package scheme builds the runtime.Scheme shared by nettune's binaries.
package scheme

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	nettunev1alpha1 "github.com/nettune/nettune/api/v1alpha1"
)

// New returns a scheme with the core Kubernetes types and nettune's.
func New() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("adding client-go types: %w", err)
	}
	if err := nettunev1alpha1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("adding nettune types: %w", err)
	}
	return s, nil
}
