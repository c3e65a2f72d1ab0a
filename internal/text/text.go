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

// Package text holds string helpers shared by the controller's packages.
package text

import "unicode/utf8"

// Ellipsis ends a truncated string.
const Ellipsis = "..."

// Truncate cuts s to at most n bytes, ending in Ellipsis, on a rune
// boundary (a status message or an event must stay valid UTF-8: the API
// server refuses an object that is not). s is returned as it is when it
// fits; n below the ellipsis' length keeps only as much of the ellipsis.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= len(Ellipsis) {
		return Ellipsis[:max(n, 0)]
	}
	cut := n - len(Ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + Ellipsis
}
