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

package text

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTruncateKeepsRunesWhole(t *testing.T) {
	cases := []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"abcdefghijk", 10, "abcdefg..."},
		// "车辆" is 6 bytes: a cut at byte 5 would split the second rune.
		{"车辆回滚了", 8, "车..."},
		{"车辆回滚了", 9, "车辆..."},
		{"abc", 2, ".."},
		{"abc", 0, ""},
	}
	for _, c := range cases {
		got := Truncate(c.s, c.n)
		if got != c.want {
			t.Errorf("Truncate(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
		if len(got) > max(c.n, 0) || !utf8.ValidString(got) {
			t.Errorf("Truncate(%q, %d) = %q: %d bytes, valid UTF-8 %v", c.s, c.n, got, len(got), utf8.ValidString(got))
		}
	}
	// Every cut of a long mixed string stays valid and within n.
	long := strings.Repeat("延迟 p99.9 ", 50)
	for n := 0; n <= len(long); n++ {
		if got := Truncate(long, n); len(got) > n || !utf8.ValidString(got) {
			t.Fatalf("n=%d: %d bytes, valid %v", n, len(got), utf8.ValidString(got))
		}
	}
}
