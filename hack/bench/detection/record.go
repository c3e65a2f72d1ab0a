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

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The trials log keeps every trial of every run, one JSON object a line, so
// that a record of more trials than one run can afford is accumulated over
// several runs of one commit (-accumulate): the report then covers every
// logged trial of the same commit and the same fleet shape, at every
// background load level the runs used.

// record is one trial as logged.
type record struct {
	Commit   string  `json:"commit"`
	Load     float64 `json:"load"` // the background load's share of each CPU
	Vehicles int     `json:"vehicles"`
	Canaries int     `json:"canaries"`
	MaxTrial string  `json:"maxTrial"`
	Run      string  `json:"run"` // the run's start, RFC 3339
	N        int     `json:"n"`
	Arm      string  `json:"arm"`
	Canary   string  `json:"canary"`
	// VerifiedMS is from the edit to the canary verified.
	VerifiedMS int64                     `json:"verifiedMs"`
	Loadavg    string                    `json:"loadavg"`
	By         map[string]decisionRecord `json:"by"`
	Ev         *evidenceRecord           `json:"evidence,omitempty"`
}

type decisionRecord struct {
	Phase      string `json:"phase,omitempty"`
	AfterMS    int64  `json:"afterMs"`
	EnoughAtMS int64  `json:"enoughAtMs,omitempty"`
	Msg        string `json:"msg,omitempty"`
}

type cohortRecord struct {
	Vehicles int                `json:"vehicles"`
	Msgs     float64            `json:"msgs"`
	Over     map[string]float64 `json:"over"` // bound in ms -> messages slower
	TCP      map[string]int64   `json:"tcp"`
}

type evidenceRecord struct {
	WindowMS int64        `json:"windowMs"`
	Canary   cohortRecord `json:"canary"`
	Baseline cohortRecord `json:"baseline"`
}

// shape is what trials must share to be counted together.
func (r record) shape() string {
	return fmt.Sprintf("%s/%d/%d/%s", r.Commit, r.Vehicles, r.Canaries, r.MaxTrial)
}

func toRecord(c config, commit string, run time.Time, t trial) record {
	r := record{Commit: commit, Load: t.level, Vehicles: c.vehicles, Canaries: c.canaries, MaxTrial: c.maxTrial.String(),
		Run: run.UTC().Format(time.RFC3339), N: t.n, Arm: t.arm, Canary: t.canary, VerifiedMS: t.verified.Milliseconds(),
		Loadavg: t.load, By: map[string]decisionRecord{}}
	for m, d := range t.by {
		r.By[m] = decisionRecord{Phase: d.phase, AfterMS: d.after.Milliseconds(), EnoughAtMS: d.enoughAt.Milliseconds(), Msg: d.msg}
	}
	if t.ev != nil {
		cohort := func(c cohortEvidence) cohortRecord {
			out := cohortRecord{Vehicles: c.vehicles, Msgs: c.msgs, Over: map[string]float64{}, TCP: c.tcp}
			for ms, n := range c.over {
				out.Over[strconv.Itoa(ms)] = n
			}
			return out
		}
		r.Ev = &evidenceRecord{WindowMS: t.ev.window.Milliseconds(), Canary: cohort(t.ev.canary), Baseline: cohort(t.ev.baseline)}
	}
	return r
}

func (r record) trial() trial {
	t := trial{arm: r.Arm, n: r.N, canary: r.Canary, verified: time.Duration(r.VerifiedMS) * time.Millisecond,
		load: r.Loadavg, level: r.Load, run: r.Run, by: map[string]decision{}}
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	for m, d := range r.By {
		t.by[m] = decision{phase: d.Phase, after: ms(d.AfterMS), enoughAt: ms(d.EnoughAtMS), msg: d.Msg}
	}
	if r.Ev != nil {
		cohort := func(c cohortRecord) cohortEvidence {
			out := cohortEvidence{vehicles: c.Vehicles, msgs: c.Msgs, over: map[int]float64{}, tcp: c.TCP}
			for k, n := range c.Over {
				if b, err := strconv.Atoi(k); err == nil {
					out.over[b] = n
				}
			}
			if out.tcp == nil {
				out.tcp = map[string]int64{}
			}
			return out
		}
		t.ev = &evidence{window: ms(r.Ev.WindowMS), canary: cohort(r.Ev.Canary), baseline: cohort(r.Ev.Baseline)}
	}
	return t
}

// appendRecord appends one trial to the log.
func appendRecord(path string, r record) error {
	line, err := json.Marshal(r)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// readRecords reads the log's trials of the given shape (none when the log
// does not exist). A line that does not parse is an error naming it.
func readRecords(path, shape string) ([]record, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []record
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		if r.shape() == shape {
			out = append(out, r)
		}
	}
	return out, sc.Err()
}

// commitOf names the code the trials measure: the commit, with "+dirty"
// when a file outside docs/ differs from it (such trials are never
// accumulated with a clean commit's).
func commitOf(root string) string {
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	commit := strings.TrimSpace(string(out))
	st, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)docs").Output()
	if err != nil || len(bytes.TrimSpace(st)) > 0 {
		commit += "+dirty"
	}
	return commit
}

// levelName names a background load level.
func levelName(load float64) string {
	switch {
	case load <= 0:
		return "idle (no background load)"
	case load >= 1:
		return "both CPUs busy (100 % background load)"
	default:
		return fmt.Sprintf("%.0f %% background load", 100*load)
	}
}

// levels are the load levels of trials, lowest first.
func levels(trials []trial) []float64 {
	seen := map[float64]bool{}
	var out []float64
	for _, t := range trials {
		if !seen[t.level] {
			seen[t.level] = true
			out = append(out, t.level)
		}
	}
	sort.Float64s(out)
	return out
}

// atLevel are the trials of one load level.
func atLevel(trials []trial, level float64) []trial {
	var out []trial
	for _, t := range trials {
		if t.level == level {
			out = append(out, t)
		}
	}
	return out
}
