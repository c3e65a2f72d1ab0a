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

// Command ocm runs Open Cluster Management's own controllers, built from
// open-cluster-management.io/ocm at the version go.mod pins, without the
// operators that would otherwise deploy them as pods:
//
//	ocm hub    the hub's registration, placement and work (ManifestWorkReplicaSet)
//	           controllers in one process, as cmd/registration "controller",
//	           cmd/placement "controller" and cmd/work "manager" run them;
//	           with --addon-manager also OCM's add-on manager (cmd/addon
//	           "manager": ManagedClusterAddOns from a ClusterManagementAddOn's
//	           install strategy, config rollout, install progression);
//	ocm agent  the klusterlet agent in singleton mode (registration and work
//	           agents in one process), OCM's own registration-operator "agent"
//	           command.
//
// OCM v1.0.0 has no single hub command: its registration-operator "hub"
// subcommand is the ClusterManager operator, which runs the hub controllers
// as Deployments and so needs a kubelet.
package main

import (
	"context"
	goflag "flag"
	"fmt"
	"os"

	"github.com/openshift/library-go/pkg/controller/controllercmd"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	utilflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/logs"
	"k8s.io/utils/clock"

	ocmfeature "open-cluster-management.io/api/feature"

	"open-cluster-management.io/ocm/pkg/addon"
	"open-cluster-management.io/ocm/pkg/cmd/spoke"
	commonoptions "open-cluster-management.io/ocm/pkg/common/options"
	"open-cluster-management.io/ocm/pkg/features"
	placement "open-cluster-management.io/ocm/pkg/placement/controllers"
	registrationhub "open-cluster-management.io/ocm/pkg/registration/hub"
	registrationspoke "open-cluster-management.io/ocm/pkg/registration/spoke"
	addonlease "open-cluster-management.io/ocm/pkg/registration/spoke/addon"
	"open-cluster-management.io/ocm/pkg/version"
	workhub "open-cluster-management.io/ocm/pkg/work/hub"
)

func main() {
	pflag.CommandLine.SetNormalizeFunc(utilflag.WordSepNormalizeFunc)
	pflag.CommandLine.AddGoFlagSet(goflag.CommandLine)

	logs.AddFlags(pflag.CommandLine)
	logs.InitLogs()
	defer logs.FlushLogs()

	cmd := &cobra.Command{
		Use:   "ocm",
		Short: "Open Cluster Management hub controllers and klusterlet agent",
		Run: func(cmd *cobra.Command, _ []string) {
			_ = cmd.Help()
			os.Exit(1)
		},
	}
	if v := version.Get().String(); v != "" {
		cmd.Version = v
	} else {
		cmd.Version = "<unknown>"
	}
	cmd.AddCommand(newHubCommand())
	// "agent": registration and work agents in one process (singleton mode).
	cmd.AddCommand(newAgentCommand())

	if err := cmd.Execute(); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		os.Exit(1) //nolint:gocritic // logs.FlushLogs has nothing left to flush
	}
}

// newHubCommand runs the hub controllers in one process. Each controller
// manager blocks until the context ends; the first that fails ends the
// process.
func newHubCommand() *cobra.Command {
	opts := commonoptions.NewOptions()
	registration := registrationhub.NewHubManagerOptions()
	workOpts := workhub.NewWorkHubManagerOptions()
	work := workhub.NewWorkHubManagerConfig(workOpts)
	withPlacement, withWork, withAddon := true, true, false

	start := func(ctx context.Context, cc *controllercmd.ControllerContext) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		managers := []func(context.Context, *controllercmd.ControllerContext) error{registration.RunControllerManager}
		if withPlacement {
			managers = append(managers, placement.RunControllerManager)
		}
		if withWork {
			managers = append(managers, work.RunWorkHubManager)
		}
		if withAddon {
			managers = append(managers, addon.RunManager)
		}
		errs := make(chan error, len(managers))
		for _, run := range managers {
			go func() { errs <- run(ctx, cc) }()
		}
		var first error
		for range managers {
			if err := <-errs; err != nil && first == nil {
				first = err
				cancel()
			}
		}
		return first
	}
	cmd := opts.NewControllerCommandConfig("ocm-hub", version.Get(), start, clock.RealClock{}).
		NewCommandWithContext(context.TODO())
	cmd.Use = "hub"
	cmd.Short = "Start the hub's registration, placement and work controllers in one process"

	flags := cmd.Flags()
	registration.AddFlags(flags)
	workOpts.AddFlags(flags)
	opts.AddFlags(flags)
	flags.BoolVar(&withPlacement, "placement", withPlacement, "Run the placement controller.")
	flags.BoolVar(&withWork, "work", withWork, "Run the work hub manager (the ManifestWorkReplicaSet controller).")
	flags.BoolVar(&withAddon, "addon-manager", withAddon, "Run OCM's add-on manager (ManagedClusterAddOns from a ClusterManagementAddOn's install strategy, config rollout and install progression).")

	utilruntime.Must(features.HubMutableFeatureGate.Add(ocmfeature.DefaultHubRegistrationFeatureGates))
	utilruntime.Must(features.HubMutableFeatureGate.Add(ocmfeature.DefaultHubWorkFeatureGates))
	features.HubMutableFeatureGate.AddFlag(flags)
	return cmd
}

// newAgentCommand is OCM's klusterlet agent command ("agent"), with two
// more flags over the add-on lease health check its registration agent
// runs; their defaults are OCM's.
func newAgentCommand() *cobra.Command {
	cmd := spoke.NewKlusterletAgentCmd()
	cmd.Flags().DurationVar(&registrationspoke.AddOnLeaseControllerSyncInterval, "addon-lease-sync-interval",
		registrationspoke.AddOnLeaseControllerSyncInterval,
		"How often the registration agent reads every add-on's Lease and sets its ManagedClusterAddOn's Available condition.")
	cmd.Flags().IntVar(&addonlease.AddOnLeaseControllerLeaseDurationSeconds, "addon-lease-duration-seconds",
		addonlease.AddOnLeaseControllerLeaseDurationSeconds,
		"An add-on's Lease counts as renewed for 5 times this after its renewTime (then Available=False).")
	return cmd
}
