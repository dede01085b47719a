// Command agentbox-full is agentbox with every command and backend: what
// agentbox runs (same arguments, same environment) for the commands and
// backends it does not link, and a complete agentbox on its own.
package main

import (
	"github.com/agentbox/agentbox/internal/cli"
	"github.com/agentbox/agentbox/internal/cli/dockercli"
	"github.com/agentbox/agentbox/internal/cli/harness"
	"github.com/agentbox/agentbox/internal/cli/kubecli"
	"github.com/agentbox/agentbox/internal/cli/mcpcli"
	"github.com/agentbox/agentbox/internal/cli/servecli"
)

func main() {
	a := cli.New()
	a.AddBackend("linux", cli.Linux, cli.LinuxGC)
	a.AddBackend("local", cli.Local, nil)
	a.Add(cli.Exec, cli.Session, cli.Snapshot, cli.GCCommand, cli.Backends)
	harness.Register(a)
	dockercli.Register(a)
	kubecli.Register(a)
	mcpcli.Register(a)
	servecli.Register(a)
	a.Main()
}
