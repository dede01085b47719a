// Command agentbox runs untrusted commands and AI agents in a sandbox.
//
// This program is the one a shell-driven agent runs per command: it links
// the native and local backends and the commands that use them on the hot
// path (exec, session, snapshot), and nothing whose start-up would cost
// every call; deps.txt lists what it links and its test keeps the list
// from growing unnoticed. The other commands and backends (the agent
// harness, the Docker Engine) run in agentbox-full beside it.
package main

import "github.com/agentbox/agentbox/internal/cli"

func main() {
	a := cli.New()
	a.AddBackend("linux", cli.Linux, cli.LinuxGC)
	a.AddBackend("local", cli.Local, nil)
	a.Add(cli.Exec, cli.Session, cli.Snapshot)
	a.ForwardCatalog()
	a.Main()
}
