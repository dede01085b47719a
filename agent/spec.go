package agent

import (
	"encoding/json"

	"github.com/agentbox/agentbox/agent/model"
)

// mustSpec declares a built-in tool; its schema is a constant, so a bad
// one is a programming error caught by the package's tests.
func mustSpec(name, description, schema string) model.Tool {
	if !json.Valid([]byte(schema)) {
		panic("agent: invalid JSON schema for tool " + name)
	}
	return model.Tool{Name: name, Description: description, Parameters: json.RawMessage(schema)}
}
