# nettune — see README.md for the quick start.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

ROOT       := $(CURDIR)
BIN        := $(ROOT)/bin
GO         ?= go
export KUBEBUILDER_ASSETS := $(BIN)

CONTROLLER_GEN := $(BIN)/controller-gen
KUBE_APISERVER := $(BIN)/kube-apiserver
ETCD           := $(BIN)/etcd
KUBECTL        := $(BIN)/kubectl
KUBELET        := $(BIN)/kubelet
KUBE_CONTROLLER_MANAGER := $(BIN)/kube-controller-manager
KUBE_SCHEDULER := $(BIN)/kube-scheduler
LOKI           := $(BIN)/loki
HELM           := $(BIN)/helm
GOLANGCI_LINT  := $(BIN)/golangci-lint
# Open Cluster Management (hub mode, test/framework/hubtest): bin/ocm runs the hub's
# controllers (`ocm hub`) and a spoke's klusterlet agent (`ocm agent`); kine
# is k3s's datastore (SQLite behind the etcd API) under each spoke's API server.
OCM            := $(BIN)/ocm
KINE           := $(BIN)/kine
# OCM's CRDs from open-cluster-management.io/api at the version bin/ocm is
# built with (hack/tools/ocm/go.mod): bin/crds/ocm/hub and bin/crds/ocm/spoke.
OCM_API_VERSION = $(shell awk '$$1 == "open-cluster-management.io/api" { print $$2 }' hack/tools/ocm/go.mod)
OCM_CRDS       := $(BIN)/crds/ocm/VERSION
# The Prometheus Operator's ServiceMonitor CRD, so the API server can validate
# the chart's ServiceMonitors (test/chart); taken from the Go module proxy.
PROMETHEUS_OPERATOR_VERSION := v0.85.0
SERVICEMONITOR_CRD := $(BIN)/crds/monitoring.coreos.com_servicemonitors.yaml

##@ General

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Quick start

# What the demo runs, and nothing else: built in parallel (TOOLS_JOBS at
# once), one progress line per tool.
DEMO_TOOLS := $(KUBE_APISERVER) $(ETCD) $(KUBECTL) $(LOKI)
TOOLS_JOBS ?= 4
# A cold make demo's tool builds, as measured (docs/demo.md, "How long it takes").
DEMO_COLD ?= 14 minutes beside a running make test (21.5 minutes of CPU: Loki 9, kube-apiserver and kubectl 7.5, nettune 3.5, etcd 1.5)

.PHONY: demo
demo: ## The embedded default (root): control plane, Loki, Prometheus, controller, simulated vehicles with real agents, and a canary rollout.
	@hack/deps.sh demo
	@missing=$$(for t in $(DEMO_TOOLS); do [ -x $$t ] || printf ' %s' $${t##*/}; done); \
	if [ -n "$$missing" ]; then \
	  echo "demo: building what it runs and bin/ lacks ($${missing# }) and nettune's binaries, $(TOOLS_JOBS) at once;"; \
	  echo "demo: from empty Go caches the builds took $(DEMO_COLD) on 2 cores (docs/demo.md); afterwards they are reused"; \
	fi
	@$(MAKE) --no-print-directory -s -j$(TOOLS_JOBS) $(DEMO_TOOLS) build-timed
	$(BIN)/nettune-demo $(DEMO_ARGS)

.PHONY: test
test: deps tools ansible verify vet build chart ## Run every test: unit, envtest (real kube-apiserver, etcd, Loki, Prometheus), netns, chart, Ansible, then end to end.
	NETTUNE_REQUIRE_TOOLS=1 NETTUNE_REQUIRE_ANSIBLE=1 $(GO) test $$($(GO) list ./... | grep -v -e /test/e2e -e /test/faults -e /test/node -e /test/hub) -count=1 -timeout 30m
	cd hack/bench && $(GO) test ./... -count=1
	$(MAKE) --no-print-directory test-kernels
	$(MAKE) --no-print-directory test-node
	$(MAKE) --no-print-directory test-faults
	$(MAKE) --no-print-directory test-e2e
	$(MAKE) --no-print-directory test-hub

.PHONY: test-faults
test-faults: build ## The fault matrix alone (root): one test per fault on 3 vehicles x 3 hosts with real agents; FAULTS_REPORT=file writes its table (docs/reliability.md).
	NETTUNE_FAULTS_REPORT=$(FAULTS_REPORT) $(GO) test ./test/faults/ -count=1 -v -timeout 30m

.PHONY: test-kernels
test-kernels: ## The agent's kernel-level tests inside the fleet's kernels under qemu (TCG): Debian 11's 5.10 on x86_64 and aarch64, Debian 12's 6.1 on x86_64; downloads and initramfs kept in bin/kernels, consoles in bin/kernels/logs; about 6 minutes once cached (root for the qemu install; KERNELS_ARGS=-only=bookworm-6.1-amd64 boots one).
	hack/kernels/deps.sh
	$(GO) run ./hack/kernels -go $(GO) $(KERNELS_ARGS)

.PHONY: test-node
test-node: ## The chart on a real node alone (root): kubelet, containerd, runc and a bridge CNI start the agent DaemonSet and the controller from images built here; then the node restarts and boots from last-known-good.
	@# The node's namespace, veth and addresses are the machine's (test/framework/testnode):
	@# a second run on this machine waits for the first instead of tearing it down.
	flock /run/lock/nettune-test-node.lock env NETTUNE_REQUIRE_TOOLS=1 $(GO) test ./test/node/ -count=1 -v -timeout 30m

.PHONY: node
node: deps tools ## A real node for a human (root): control plane, containerd and a kubelet in a network namespace, the images imported; prints the kubeconfig and how to install the chart, and runs until Ctrl-C.
	$(GO) run ./hack/node

.PHONY: test-hub
test-hub: build ## The hub alone (root): an Open Cluster Management hub, three spoke clusters on kine with netns vehicles and real agents, one central Loki; a rollout across the clusters, a silent cluster, a cluster whose nettune controller is killed, a rollback everywhere (docs/hub.md).
	NETTUNE_REQUIRE_TOOLS=1 $(GO) test ./test/hub/ -count=1 -v -timeout 30m

.PHONY: test-e2e
test-e2e: build ## End to end alone (root): control plane, Loki, Prometheus, controller, 4 vehicles x 3 hosts with real agents.
	$(GO) test ./test/e2e/ -count=1 -v -timeout 30m

##@ Development

.PHONY: deps
deps: ## Install the Debian packages the tests use, if missing (iproute2, iptables, ethtool, prometheus, containerd, runc, CNI plugins).
	hack/deps.sh

.PHONY: ansible
ansible: ## bin/ansible-venv: ansible-core and ansible-lint from PyPI (ansible/requirements.txt), for ansible/ and test/ansible.
	hack/ansible.sh

.PHONY: chart
chart: $(HELM) ## helm lint and helm template of charts/nettune (the API server validates the result in test/chart).
	$(HELM) lint --strict charts/nettune
	$(HELM) template nettune charts/nettune --namespace nettune-system --include-crds > /dev/null
	@echo "chart: helm lint and helm template clean"

.PHONY: dashboards
dashboards: ## Regenerate the Grafana dashboards (charts/nettune/dashboards) from hack/dashboards.
	$(GO) run ./hack/dashboards/gen

.PHONY: build
build: ## Build the binaries into bin/.
	$(GO) build -o $(BIN)/ ./cmd/...

.PHONY: build-timed
build-timed:
	@$(ROOT)/hack/timed.sh nettune $(GO) build -o $(BIN)/ ./cmd/...

.PHONY: images
images: ## Multi-arch images without Docker: OCI image indexes (linux/amd64, linux/arm64) of the controller and the agent into bin/images/*.oci.tar; IMAGES_ARGS='-registry R -tag T' (default ghcr.io/nettune and the chart's appVersion). See docs/install-k3s.md.
	$(GO) run ./hack/images -o $(BIN)/images $(IMAGES_ARGS)

.PHONY: generate
generate: $(CONTROLLER_GEN) $(HELM) ## Regenerate deepcopy, CRDs and RBAC, and the chart's admission warnings rendered into config/admission.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=nettune-controller paths=./controllers/... output:rbac:artifacts:config=config/rbac
	rm -rf charts/nettune/crds && mkdir -p charts/nettune/crds charts/nettune/files
	cp config/crd/bases/*.yaml charts/nettune/crds/
	cp config/rbac/role.yaml charts/nettune/files/controller-role.yaml
	@# The chart's warnings for risky but legal profiles, rendered: kubectl
	@# apply -f installs them without helm (the demo does).
	mkdir -p config/admission
	{ echo "# Generated by make generate from charts/nettune: do not edit."; \
	  echo "# helm template nettune charts/nettune --namespace nettune-system --show-only templates/profile-warnings.yaml"; \
	  echo "# (without the Helm labels). To install the chart later, delete these first: helm does not adopt objects it did not create."; \
	  $(HELM) template nettune charts/nettune --namespace nettune-system --show-only templates/profile-warnings.yaml \
	    | sed -e '/app.kubernetes.io\/managed-by: Helm/d' -e '/helm.sh\/chart:/d'; } \
	  > config/admission/profile-warnings.yaml.tmp && mv config/admission/profile-warnings.yaml.tmp config/admission/profile-warnings.yaml

.PHONY: lint
lint: $(GOLANGCI_LINT) ## golangci-lint (.golangci.yml) on the product and the benchmarks' module; also part of make verify.
	$(GOLANGCI_LINT) run --allow-parallel-runners ./...
	cd hack/bench && $(GOLANGCI_LINT) run --allow-parallel-runners --config ../../.golangci.yml ./...

.PHONY: krew
krew: ## The kubectl plugin's krew archives (linux amd64, arm64) and manifest with their sha256, into dist/.
	hack/krew.sh

.PHONY: verify
verify: ## Regenerate everything and fail if the tree differs (generated files edited by hand or stale).
	hack/verify.sh

.PHONY: bench-agent
bench-agent: tools build ## Benchmark the node agent (apply+verify 1/10/100 routes, RSS, idle CPU) into docs/bench-agent.md (root).
	cd hack/bench && $(GO) run ./agent

.PHONY: bench-latency
bench-latency: ## Topic latency on the testbed under loss: kernel defaults vs profiles v2 and v1, applied by the agent, into docs/benchmarks.md (root, ~10 min).
	$(GO) build -o $(BIN)/ ./cmd/nettune-agent
	cd hack/bench && $(GO) run ./latency $(BENCH_LATENCY_ARGS)

.PHONY: bench-detection
bench-detection: tools build ## Rollback detection on the simulated fleet under background load: judge, TCP guard and threshold analysis on 20 trials per arm, into docs/benchmarks-detection.md (root, about 75 minutes). Every trial is logged in docs/bench-detection-trials.jsonl; BENCH_DETECTION_ARGS='-load 0 -accumulate' adds an idle run to the record of the same commit.
	cd hack/bench && $(GO) run ./detection $(BENCH_DETECTION_ARGS)

.PHONY: bench-experiment
bench-experiment: tools build ## NetTuningExperiments on the simulated fleet (cwnd 10/30/80, rto_min 200/10 ms, the bad edit), each ranking beside the arms' retransmissions, then a winner adopted canary first, into docs/bench-experiment.md (root, about 25 minutes).
	cd hack/bench && $(GO) run ./experiment $(BENCH_EXPERIMENT_ARGS)

# The 30,000-node fleet renews its Leases every 4 min (125 writes a second, as
# 5,000 nodes at the default 40 s): 750 a second is more than this 2-core
# machine's API server takes. The previous protocol (status heartbeats) runs
# beside the Lease protocol at 1,000 nodes: at 5,000 its 167 heartbeats a
# second saturate the API server (31 minutes for that run alone on
# 2026-11-23, docs/bench-scale-notes.md). The controller runs with the Go
# soft memory limit the chart gives it (256 MiB: its 320Mi memory limit
# less a fifth). About an hour.
BENCH_SCALE_ARGS ?= -sizes 1000,5000,30000 -lease-renew 40s,40s,4m -status-max 1000 -idle 3m -max-wait 20m -controller-env GOMEMLIMIT=256MiB
.PHONY: bench-scale
bench-scale: tools build ## Fleet scale: the real controller against simulated agents at 1,000, 5,000 and 30,000 nodes, into docs/bench-scale.md.
	cd hack/bench && $(GO) run ./scale $(BENCH_SCALE_ARGS)

.PHONY: bench-hub
bench-hub: tools build ## A nettune hub with simulated clusters speaking OCM's work-agent status protocol, nettune's add-on in each (a ManagedClusterAddOn, Available) and the hub's add-on gate on (liveness AddOnLease, no heartbeat through the hub; BENCH_HUB_ARGS='-liveness report' for none), 100 and 1,000 clusters of 10 vehicles (about 6 min; BENCH_HUB_ARGS='-sizes 3500x10,1000x100' for the large fleets): staged, all at once, rollback, CPU, RSS, writes per cluster moved, what the reports weigh, into docs/bench-hub.md.
	cd hack/bench && $(GO) run ./hub -liveness addon $(BENCH_HUB_ARGS)

.PHONY: bench-writes
bench-writes: tools ## What one write of each object costs kube-apiserver and etcd (Lease, a minimal CR, NodeNetTunings of 1/4/12 routes, what-if CRD variants), into docs/bench-writes.md (about 10 minutes).
	cd hack/bench && $(GO) run ./scale -write-cost $(BENCH_WRITES_ARGS)

.PHONY: bench-push
bench-push: $(LOKI) ## What TLS and basic auth cost the agent's Loki push (CPU, RSS): plain HTTP vs HTTPS through a TLS gateway, interleaved, native and arm64 under qemu-user-static, into docs/bench-push.md (about 13 minutes).
	cd hack/bench && $(GO) run ./push $(BENCH_PUSH_ARGS)

.PHONY: soak
soak: tools ## The whole e2e suite and the demo N=5 times each under a 50 % CPU burner, one line per run (root, about 30 minutes).
	hack/soak.sh

.PHONY: vet
vet: ## go vet, the product and the benchmarks' module (hack/bench).
	$(GO) vet ./...
	cd hack/bench && $(GO) vet ./...

.PHONY: fmt
fmt: ## gofmt the tree.
	gofmt -w $$(git ls-files '*.go')

##@ Tools (built from the Go module proxy, pinned in hack/tools/*/go.mod)

# Each tool's build prints a line when it starts and when it ends.
TIMED = $(ROOT)/hack/timed.sh $(notdir $@)

.PHONY: tools
tools: ## Build controller-gen, kube-apiserver, etcd, kubectl, the node's kubelet, kube-controller-manager and kube-scheduler, loki, helm, golangci-lint, Open Cluster Management (bin/ocm and its CRDs in bin/crds/ocm) and kine into bin/, TOOLS_JOBS at once (reused when present).
	@$(MAKE) --no-print-directory -s -j$(TOOLS_JOBS) tools-each

.PHONY: tools-each
tools-each: $(CONTROLLER_GEN) $(KUBE_APISERVER) $(ETCD) $(KUBECTL) $(KUBELET) $(KUBE_CONTROLLER_MANAGER) $(KUBE_SCHEDULER) $(LOKI) $(HELM) $(GOLANGCI_LINT) $(SERVICEMONITOR_CRD) $(OCM) $(KINE) $(OCM_CRDS)

$(CONTROLLER_GEN): hack/tools/controller-gen/go.mod
	$(TIMED) $(GO) -C hack/tools/controller-gen build -o $@ sigs.k8s.io/controller-tools/cmd/controller-gen

$(ETCD): hack/tools/etcd/go.mod
	$(TIMED) $(GO) -C hack/tools/etcd build -o $@ -ldflags "-s -w" go.etcd.io/etcd/server/v3

# The Kubernetes binaries report the pinned version (helm checks the chart's
# kubeVersion against the API server's; without it they say v0.0.0-master).
KUBE_VERSION = $(shell awk '$$1 == "require" && $$2 == "k8s.io/kubernetes" { print $$3 }' hack/tools/kube-apiserver/go.mod)
KUBE_LDFLAGS = -X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) -X k8s.io/component-base/version.gitMajor=$(word 1,$(subst ., ,$(KUBE_VERSION:v%=%))) -X k8s.io/component-base/version.gitMinor=$(word 2,$(subst ., ,$(KUBE_VERSION:v%=%))) -X k8s.io/component-base/version.gitTreeState=clean

# kube-apiserver and kubectl in one go build (one process compiles the
# packages they share, once).
$(KUBE_APISERVER) $(KUBECTL) &: hack/tools/kube-apiserver/go.mod
	$(ROOT)/hack/timed.sh "kube-apiserver, kubectl" $(GO) -C hack/tools/kube-apiserver build -o $(BIN)/ -ldflags "-s -w $(KUBE_LDFLAGS)" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl

# The node's kubelet, kube-controller-manager and kube-scheduler (test/node,
# make node), from the same module as kube-apiserver, after it: they share
# most of its build cache.
$(KUBELET) $(KUBE_CONTROLLER_MANAGER) $(KUBE_SCHEDULER) &: hack/tools/kube-apiserver/go.mod | $(KUBE_APISERVER)
	$(ROOT)/hack/timed.sh "kubelet, kcm, scheduler" $(GO) -C hack/tools/kube-apiserver build -o $(BIN)/ -ldflags "-s -w $(KUBE_LDFLAGS)" k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler

# Loki single binary (about 3-5 min on 2 cores); the version comes from go.mod.
LOKI_VERSION = $(shell awk '$$1 == "require" && $$2 == "github.com/grafana/loki/v3" { print $$3 }' hack/tools/loki/go.mod)
$(LOKI): hack/tools/loki/go.mod
	$(TIMED) $(GO) -C hack/tools/loki build -o $@ -ldflags "-s -w -X github.com/grafana/loki/v3/pkg/util/build.Version=$(LOKI_VERSION)" github.com/grafana/loki/v3/cmd/loki

# helm (about 3-4 min on 2 cores); the version comes from go.mod.
HELM_VERSION = $(shell awk '$$1 == "require" && $$2 == "helm.sh/helm/v4" { print $$3 }' hack/tools/helm/go.mod)
$(HELM): hack/tools/helm/go.mod
	$(TIMED) $(GO) -C hack/tools/helm build -o $@ -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$(HELM_VERSION)" helm.sh/helm/v4/cmd/helm

$(GOLANGCI_LINT): hack/tools/golangci-lint/go.mod
	$(TIMED) $(GO) -C hack/tools/golangci-lint build -o $@ github.com/golangci/golangci-lint/v2/cmd/golangci-lint

# Open Cluster Management v1.0.0: the hub's registration, placement and work
# controllers and the klusterlet agent in one binary (hack/tools/ocm/main.go);
# about 6 min of CPU cold (10.5 min on 2 cores beside the other tools' builds).
# The version comes from go.mod.
OCM_VERSION = $(shell awk '$$1 == "open-cluster-management.io/ocm" { print $$2 }' hack/tools/ocm/go.mod)
$(OCM): hack/tools/ocm/go.mod hack/tools/ocm/main.go
	$(TIMED) $(GO) -C hack/tools/ocm build -o $@ -ldflags "-s -w -X open-cluster-management.io/ocm/pkg/version.versionFromGit=$(OCM_VERSION)" .

# kine with cgo (SQLite from mattn/go-sqlite3); about 3.5 min of CPU cold.
KINE_VERSION = $(shell awk '$$1 == "require" && $$2 == "github.com/k3s-io/kine" { print $$3 }' hack/tools/kine/go.mod)
$(KINE): hack/tools/kine/go.mod
	CGO_ENABLED=1 $(TIMED) $(GO) -C hack/tools/kine build -o $@ -ldflags "-s -w -X github.com/k3s-io/kine/pkg/version.Version=$(KINE_VERSION)" github.com/k3s-io/kine

# The hub's CRDs (clusters, placements, works, add-ons) and the spoke's (the
# work agent's AppliedManifestWork, the registration agent's ClusterClaim), as
# OCM's ClusterManager and Klusterlet operators would install them.
OCM_HUB_CRDS = cluster/v1/0000_00_clusters.open-cluster-management.io_managedclusters.crd.yaml \
	cluster/v1beta2/0000_00_clusters.open-cluster-management.io_managedclustersets.crd.yaml \
	cluster/v1beta2/0000_01_clusters.open-cluster-management.io_managedclustersetbindings.crd.yaml \
	cluster/v1beta1/0000_02_clusters.open-cluster-management.io_placements.crd.yaml \
	cluster/v1beta1/0000_03_clusters.open-cluster-management.io_placementdecisions.crd.yaml \
	cluster/v1alpha1/0000_05_clusters.open-cluster-management.io_addonplacementscores.crd.yaml \
	work/v1/0000_00_work.open-cluster-management.io_manifestworks.crd.yaml \
	work/v1alpha1/0000_00_work.open-cluster-management.io_manifestworkreplicasets.crd.yaml \
	addon/v1alpha1/0000_00_addon.open-cluster-management.io_clustermanagementaddons.crd.yaml \
	addon/v1alpha1/0000_01_addon.open-cluster-management.io_managedclusteraddons.crd.yaml \
	addon/v1alpha1/0000_02_addon.open-cluster-management.io_addondeploymentconfigs.crd.yaml \
	addon/v1alpha1/0000_03_addon.open-cluster-management.io_addontemplates.crd.yaml
OCM_SPOKE_CRDS = work/v1/0000_01_work.open-cluster-management.io_appliedmanifestworks.crd.yaml \
	cluster/v1alpha1/0000_02_clusters.open-cluster-management.io_clusterclaims.crd.yaml
$(OCM_CRDS): hack/tools/ocm/go.mod
	rm -rf $(dir $@) && mkdir -p $(dir $@)hub $(dir $@)spoke
	dir=$$($(GO) mod download -json open-cluster-management.io/api@$(OCM_API_VERSION) | sed -n 's/^.*"Dir": "\(.*\)",$$/\1/p'); \
	for f in $(OCM_HUB_CRDS); do cp "$$dir/$$f" $(dir $@)hub/; done; \
	for f in $(OCM_SPOKE_CRDS); do cp "$$dir/$$f" $(dir $@)spoke/; done
	chmod 644 $(dir $@)hub/*.yaml $(dir $@)spoke/*.yaml
	echo $(OCM_API_VERSION) > $@

$(SERVICEMONITOR_CRD):
	mkdir -p $(dir $@)
	dir=$$($(GO) mod download -json github.com/prometheus-operator/prometheus-operator@$(PROMETHEUS_OPERATOR_VERSION) | sed -n 's/^.*"Dir": "\(.*\)",$$/\1/p'); \
	cp "$$dir/example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml" $@

.PHONY: clean
clean: ## Remove built binaries and local state.
	rm -rf $(BIN) .nettune
