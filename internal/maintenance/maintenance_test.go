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

package maintenance

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
)

func win(schedule, d, tz string) v1alpha1.MaintenanceWindow {
	dur, err := time.ParseDuration(d)
	if err != nil {
		panic(err)
	}
	return v1alpha1.MaintenanceWindow{Schedule: schedule, Duration: metav1.Duration{Duration: dur}, TimeZone: tz}
}

func TestWindowAt(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	shanghai, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		w         v1alpha1.MaintenanceWindow
		now       time.Time
		local     *time.Location
		open      bool
		wantStart time.Time
	}{
		{"inside, UTC", win("0 22 * * *", "4h", "UTC"), time.Date(2026, 11, 28, 23, 30, 0, 0, time.UTC), nil, true, time.Date(2026, 11, 28, 22, 0, 0, 0, time.UTC)},
		{"past midnight, still inside", win("0 22 * * *", "4h", "UTC"), time.Date(2026, 11, 29, 1, 59, 0, 0, time.UTC), nil, true, time.Date(2026, 11, 28, 22, 0, 0, 0, time.UTC)},
		{"end is exclusive", win("0 22 * * *", "4h", "UTC"), time.Date(2026, 11, 29, 2, 0, 0, 0, time.UTC), nil, false, time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC)},
		{"start is inclusive", win("0 22 * * *", "4h", "UTC"), time.Date(2026, 11, 28, 22, 0, 0, 0, time.UTC), nil, true, time.Date(2026, 11, 28, 22, 0, 0, 0, time.UTC)},
		{"before", win("0 22 * * *", "4h", "UTC"), time.Date(2026, 11, 28, 21, 59, 0, 0, time.UTC), nil, false, time.Date(2026, 11, 28, 22, 0, 0, 0, time.UTC)},
		// 22:00 in Berlin (UTC+1 in winter) is 21:00 UTC.
		{"zone of the window", win("0 22 * * *", "1h", "Europe/Berlin"), time.Date(2026, 11, 28, 21, 30, 0, 0, time.UTC), nil, true, time.Date(2026, 11, 28, 22, 0, 0, 0, berlin)},
		// No zone: the vehicle's (Asia/Shanghai, UTC+8): 22:00 there is 14:00 UTC.
		{"vehicle's zone", win("0 22 * * *", "1h", ""), time.Date(2026, 11, 28, 14, 30, 0, 0, time.UTC), shanghai, true, time.Date(2026, 11, 28, 22, 0, 0, 0, shanghai)},
		{"vehicle's zone, closed in UTC terms", win("0 22 * * *", "1h", ""), time.Date(2026, 11, 28, 22, 30, 0, 0, time.UTC), shanghai, false, time.Date(2026, 11, 29, 22, 0, 0, 0, shanghai)},
		{"weekdays only, Saturday", win("0 9 * * 1-5", "8h", "UTC"), time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC), nil, false, time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)},
		{"every minute, 30s", win("* * * * *", "30s", "UTC"), time.Date(2026, 11, 28, 10, 0, 45, 0, time.UTC), nil, false, time.Date(2026, 11, 28, 10, 1, 0, 0, time.UTC)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, err := Parse(c.w)
			if err != nil {
				t.Fatal(err)
			}
			open, start := w.At(c.now, c.local)
			if open != c.open || !start.Equal(c.wantStart) {
				t.Errorf("At(%s) = %t, %s; want %t, %s", c.now, open, start, c.open, c.wantStart)
			}
		})
	}
}

func TestParseNamesTheField(t *testing.T) {
	cases := []struct {
		w    v1alpha1.MaintenanceWindow
		want string
	}{
		{win("0 0 30 2 *", "1h", "UTC"), "schedule \"0 0 30 2 *\": never fires"},
		{win("61 * * * *", "1h", "UTC"), "schedule \"61 * * * *\""},
		{win("0 22 * * *", "1h", "Mars/Olympus_Mons"), "timeZone \"Mars/Olympus_Mons\": unknown time zone"},
		{win("0 22 * * *", "0s", "UTC"), "duration 0s: must be above 0"},
	}
	for _, c := range cases {
		_, err := ParseSet([]v1alpha1.MaintenanceWindow{win("@daily", "1h", ""), c.w})
		if err == nil || !strings.HasPrefix(err.Error(), "maintenanceWindows[1]."+c.want) {
			t.Errorf("ParseSet(%+v) = %v, want maintenanceWindows[1].%s...", c.w, err, c.want)
		}
	}
}

func TestSetAt(t *testing.T) {
	s, err := ParseSet([]v1alpha1.MaintenanceWindow{win("0 22 * * *", "1h", "UTC"), win("0 6 * * *", "1h", "UTC")})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	if open, next := s.At(now, nil); open || !next.Equal(time.Date(2026, 11, 28, 22, 0, 0, 0, time.UTC)) {
		t.Errorf("noon: open=%t next=%s, want closed until 22:00", open, next)
	}
	if open, _ := s.At(now.Add(-5*time.Hour-30*time.Minute), nil); !open {
		t.Error("06:30: want open (second window)")
	}
	if open, next := Set(nil).At(now, nil); !open || !next.IsZero() {
		t.Errorf("no windows: open=%t next=%s, want always open", open, next)
	}
}
