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

package kernel

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// LoadCongestionControl asks the kernel for the congestion control
// algorithm name as a TCP socket does: setsockopt(TCP_CONGESTION) on a
// throwaway socket opened in the handle's namespace. A kernel that builds
// the algorithm as a module (tcp_bbr, tcp_vegas, ... on Debian's and
// NVIDIA's kernels) loads it then for a caller with CAP_NET_ADMIN, as it
// does when a route names it, and lists it in AvailableCongestionControls
// from then on (for every namespace: the list is global). It fails with
// ENOENT for an algorithm the kernel neither has nor can load; EPERM means
// the algorithm is there but this caller may not use it.
func (h *Handle) LoadCongestionControl(name string) error {
	if !validCongestionControlName(name) {
		return fmt.Errorf("congestion control %q: not a kernel algorithm name (1 to 15 letters, digits, '_' or '-')", name)
	}
	err := h.Do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.SetsockoptString(fd, unix.IPPROTO_TCP, unix.TCP_CONGESTION, name)
	})
	if errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("the kernel has no congestion control %q and could not load a module tcp_%s (%w)", name, name, err)
	}
	if err != nil {
		return fmt.Errorf("loading congestion control %q: %w", name, err)
	}
	return nil
}

// validCongestionControlName accepts what fits TCP_CA_NAME_MAX (16 with the
// NUL) and can only name a module tcp_<name>: no path, no option.
func validCongestionControlName(name string) bool {
	if len(name) == 0 || len(name) >= 16 {
		return false
	}
	for _, c := range name {
		if !sysctlNameChar(c) { // the same letters, digits, '_' and '-'
			return false
		}
	}
	return true
}
