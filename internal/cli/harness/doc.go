// Package harness is the agent harness's part of agentbox's command line:
// run (an agent on a task), trace (its record) and promote (its outputs,
// checked). It links the OpenAI SDK, OpenTelemetry and a JSON Schema
// compiler, whose start-up only agentbox-full pays.
package harness

import "github.com/agentbox/agentbox/internal/cli"

// Register links the harness's commands into a.
func Register(a *cli.App) { a.Add(Run, Trace, Promote) }
