package scripted

// A plan file is YAML: a list of steps (optionally under a "steps" key).
// Each model turn plays the next step.
//
//	steps:
//	  - call: {tool: exec_command, arguments: {cmd: "ls statements"}}
//	    expect: {output_contains: bank.csv, exit_code: 0}
//	  - calls:                      # several calls in one turn
//	      - {tool: exec_command, arguments: {cmd: "echo x >> statements/bank.csv"}}
//	      - {tool: read_file, arguments: {path: statements/bank.csv}}
//	    expect: {failed: true}      # every call of the step must fail
//	  - final: |
//	      Done. The listing was:
//	      {{output:1}}
//
// A step is exactly one of call, calls or final. expect is checked against
// the step's own tool outputs when they come back, before the next step:
// output_contains and output_not_contains take a string or a list;
// exit_code and failed read the "exit code: N" line the shell tools print.
// A final answer may quote an earlier step's output with {{output:N}}.
// Unknown keys are errors with their line; a conversation that needs a
// step the plan does not have fails with "scripted plan ... exhausted
// after step N".
