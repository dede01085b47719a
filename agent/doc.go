// Package agent is agentbox's agent harness: a SandboxAgent (instructions,
// workspace manifest, capabilities, model) and a Runner that binds the
// model's tool calls to a confined sandbox session, turn by turn, until a
// final answer.
//
// It follows the shape of the OpenAI Agents SDK's sandbox agents: the
// capabilities Shell, Filesystem, Skills and Compaction each contribute an
// instruction fragment and tools bound to the live session; custom tools
// are plain FunctionTools in a Functions capability.
//
// # Where a run works
//
// Runner.Run resolves its session in this order: RunConfig.Sandbox.Session
// (the caller's live session, never closed by the runner), then
// Sandbox.State (Client.Resume), then a fresh session from Sandbox.Client,
// seeded from Sandbox.Snapshot when set, with the manifest materialized
// into its workspace first. Whatever happens (answer, error, cancellation)
// the runner then ends the shell's background processes, runs BeforeClose
// (on success only: artifact promotion), snapshots the workspace when
// SaveSnapshot is set, and closes the session it created or resumed.
//
// # Instructions
//
// The system prompt is built in a fixed order: SandboxPrompt (or the
// agent's BaseInstructions), the agent's Instructions, each capability's
// fragment, then a tree of the workspace listed through the session.
// What it says of the sandbox is read from the session's state: the hosts
// an allow-list reaches, the limits set, and in the tree which paths are
// read-only or read-write mounts, read-only or denied by the policy.
//
// # Agent files
//
// LoadFile reads an agent.yaml strictly (unknown keys are errors); every
// relative path in it resolves against the file's directory:
//
//	name: reconcile-auditor
//	instructions: |
//	  ...
//	base_instructions: ...        # replaces the built-in sandbox prompt
//	manifest: manifest.yaml       # or an inline manifest mapping
//	capabilities:                 # default: filesystem, shell, compaction
//	  - shell: {timeout: 30s, max_timeout: 10m, max_processes: 8}
//	  - filesystem: {max_read_lines: 2000, max_read_file: 8M, max_image: 5M}
//	  - skills: {dir: skills}     # dir/*/SKILL.md with name/description front matter
//	  - compaction: {max_tokens: 24000, keep_last: 4}
//	model: {provider: openai-responses|openai-chat|scripted, name: gpt-4.1, base_url: ..., plan: plan.yaml}
//	settings: {temperature: 0, top_p: 1, max_output_tokens: 2000, tool_choice: auto}
//	                              # store: true lets the Responses API keep the
//	                              # conversation; agentbox sends store: false otherwise
//	max_turns: 20
//	run_as: "1000:1000"
//	policy:
//	  network: none               # or host, or a list of allowed hosts, or:
//	  # network:
//	  #   allow: [api.github.com, api.openai.com]
//	  #   inspect: [api.github.com]   # HTTPS terminated at the egress proxy
//	  #   rules: ["GET,HEAD api.github.com/repos/acme/**"]
//	  #   credentials: ["api.openai.com=placeholder:OPENAI_API_KEY:env:OPENAI_API_KEY"]
//	  memory: 512M
//	  pids: 256
//	  cpus: 1.5
//	  timeout: 60s                # per command
//	  session_timeout: 10m
//	  disk: 1G
//	  output: 1M
//	  read_only: [/workspace/statements]
//	  deny: [/workspace/secret]
//	approvals:
//	  - {tool: exec_command, match: '\brm\b'}
//	artifacts: {rules: rules.yaml, to: promoted}
//	redact: ['ACME-[0-9]{8}']     # more secret patterns the trace hides
//	mcp_servers:                  # tools from MCP servers, run outside the sandbox
//	  - {name: fx, command: [python3, fx_server.py], env: {FX_DATE: "2026-03-31"}}
//	  - {name: crm, url: "https://crm.internal/mcp"}
package agent
