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

// Package ansible runs the playbooks and roles of ansible/ for real: lint and
// syntax check, the standalone play against network namespaces with the real
// nettune-agent, and site.yml against a real kube-apiserver.
//
// The Ansible tools come from bin/ansible-venv (hack/ansible.sh). Without it
// the tests skip, unless NETTUNE_REQUIRE_ANSIBLE is set (as `make test` does),
// when a missing venv is a failure.
package ansible

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nettune/nettune/internal/localcp"
)

// requireEnv is the variable that turns a missing venv into a failure.
const requireEnv = "NETTUNE_REQUIRE_ANSIBLE"

// repoRoot is the repository root.
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := localcp.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// tools are the Ansible commands of bin/ansible-venv.
type tools struct {
	root     string // repository root
	venvBin  string // bin/ansible-venv/bin
	python   string // the venv's python, for ansible_python_interpreter
	ansible  string // ansible/
	playbook string
	lint     string
	invent   string
}

// requireAnsible returns the venv's tools, skipping (or failing under
// NETTUNE_REQUIRE_ANSIBLE) when hack/ansible.sh has not made them.
func requireAnsible(t testing.TB) tools {
	t.Helper()
	root := repoRoot(t)
	bin := filepath.Join(root, "bin", "ansible-venv", "bin")
	tl := tools{
		root:     root,
		venvBin:  bin,
		python:   filepath.Join(bin, "python"),
		ansible:  filepath.Join(root, "ansible"),
		playbook: filepath.Join(bin, "ansible-playbook"),
		lint:     filepath.Join(bin, "ansible-lint"),
		invent:   filepath.Join(bin, "ansible-inventory"),
	}
	for _, p := range []string{tl.python, tl.playbook, tl.lint, tl.invent} {
		if _, err := os.Stat(p); err != nil {
			msg := fmt.Sprintf("%s missing: run hack/ansible.sh to create bin/ansible-venv", p)
			if os.Getenv(requireEnv) != "" {
				t.Fatalf("%s (%s is set, so the Ansible tests must run)", msg, requireEnv)
			}
			t.Skipf("%s (set %s=1 to make this a failure)", msg, requireEnv)
		}
	}
	return tl
}

// env is the environment of an Ansible command: the venv first on PATH, the
// project's ansible.cfg, and an ANSIBLE_HOME of the test's own.
func (tl tools) env(t testing.TB, extra ...string) []string {
	t.Helper()
	env := []string{}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PATH=") || strings.HasPrefix(kv, "ANSIBLE_") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env,
		"PATH="+tl.venvBin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"ANSIBLE_CONFIG="+filepath.Join(tl.ansible, "ansible.cfg"),
		"ANSIBLE_HOME="+t.TempDir(),
		"ANSIBLE_NOCOLOR=1",
		"NO_COLOR=1",
		"PY_COLORS=0",
	)
	return append(env, extra...)
}

// run runs an Ansible command in ansible/ and returns its combined output.
func (tl tools) run(t testing.TB, timeout time.Duration, env []string, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = tl.ansible
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("%s timed out after %s: %w", filepath.Base(name), timeout, err)
	}
	return string(out), err
}

// agentOnce builds nettune-agent once for the package.
var agentOnce struct {
	sync.Once
	path string
	err  error
}

// agentDir is removed by TestMain.
var agentDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if agentDir != "" {
		os.RemoveAll(agentDir)
	}
	os.Exit(code)
}

// agentBinary builds ./cmd/nettune-agent from this tree into a temporary
// directory (once per package), so the test does not depend on a stale bin/.
func agentBinary(t testing.TB) string {
	t.Helper()
	root := repoRoot(t)
	agentOnce.Do(func() {
		dir, err := os.MkdirTemp("", "nettune-ansible-agent-")
		if err != nil {
			agentOnce.err = err
			return
		}
		agentDir = dir
		cmd := exec.Command("go", "build", "-o", dir+"/", "./cmd/nettune-agent")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			agentOnce.err = fmt.Errorf("go build ./cmd/nettune-agent: %w\n%s", err, out)
			return
		}
		agentOnce.path = filepath.Join(dir, "nettune-agent")
	})
	if agentOnce.err != nil {
		t.Fatal(agentOnce.err)
	}
	return agentOnce.path
}

// hostStats is one host's line of the play recap.
type hostStats struct {
	Ok          int `json:"ok"`
	Changed     int `json:"changed"`
	Failures    int `json:"failures"`
	Unreachable int `json:"unreachable"`
	Skipped     int `json:"skipped"`
	Rescued     int `json:"rescued"`
	Ignored     int `json:"ignored"`
}

// taskResult is one task's result on one host.
type taskResult struct {
	Changed bool   `json:"changed"`
	Failed  bool   `json:"failed"`
	Skipped bool   `json:"skipped"`
	Msg     any    `json:"msg"`
	Stdout  string `json:"stdout"`
	Stderr  string `json:"stderr"`
	Rc      *int   `json:"rc"`
}

// playResult is a playbook run as testdata/callback_plugins/nettune_record.py
// recorded it, with the command's exit error and duration.
type playResult struct {
	Plays []struct {
		Play struct {
			Name string `json:"name"`
		} `json:"play"`
		Tasks []struct {
			Task struct {
				Name string `json:"name"`
			} `json:"task"`
			Hosts map[string]taskResult `json:"hosts"`
		} `json:"tasks"`
	} `json:"plays"`
	Stats map[string]hostStats `json:"stats"`

	exitErr  error
	duration time.Duration
}

// task returns the result of the named task on host (the last one of that name).
func (r *playResult) task(host, name string) (taskResult, bool) {
	var res taskResult
	found := false
	for _, p := range r.Plays {
		for _, tk := range p.Tasks {
			if strings.HasSuffix(tk.Task.Name, name) {
				if h, ok := tk.Hosts[host]; ok {
					res, found = h, true
				}
			}
		}
	}
	return res, found
}

// failureMessages returns the messages of every failed task.
func (r *playResult) failureMessages() []string {
	var msgs []string
	for _, p := range r.Plays {
		for _, tk := range p.Tasks {
			for h, res := range tk.Hosts {
				if res.Failed {
					msgs = append(msgs, fmt.Sprintf("%s: %s: %v", h, tk.Task.Name, res.Msg))
				}
			}
		}
	}
	return msgs
}

// runPlaybook runs ansible-playbook in ansible/ and returns its result: the
// default (human) output, logged, and the task results and recap recorded as
// JSON by testdata/callback_plugins/nettune_record.py.
func (tl tools) runPlaybook(t testing.TB, inventory string, extraVars map[string]any, args ...string) *playResult {
	t.Helper()
	vars, err := json.Marshal(extraVars)
	if err != nil {
		t.Fatal(err)
	}
	plugins, err := filepath.Abs(filepath.Join("testdata", "callback_plugins"))
	if err != nil {
		t.Fatal(err)
	}
	record := filepath.Join(t.TempDir(), "record.json")
	argv := append([]string{"-i", inventory, "--extra-vars", string(vars)}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, tl.playbook, argv...)
	cmd.Dir = tl.ansible
	cmd.Env = tl.env(t,
		"ANSIBLE_CALLBACK_PLUGINS="+plugins,
		"ANSIBLE_CALLBACKS_ENABLED=nettune_record",
		"NETTUNE_ANSIBLE_RECORD="+record,
	)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	r := &playResult{exitErr: err, duration: time.Since(start)}
	t.Logf("ansible-playbook %s (%s, exit: %v)\n%s", strings.Join(args, " "), r.duration.Round(time.Millisecond), err, out)
	raw, rerr := os.ReadFile(record)
	if rerr != nil {
		t.Fatalf("ansible-playbook recorded no results (%v): see its output above", rerr)
	}
	if err := json.Unmarshal(raw, r); err != nil {
		t.Fatalf("reading the recorded results: %v\n%s", err, raw)
	}
	return r
}

// writeFile writes a test file and fails the test on error.
func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
