package openai

import (
	"encoding/json"
	"fmt"

	"github.com/agentbox/agentbox/agent/model"
)

// toolParameters decodes a tool's JSON Schema into the map openai-go sends;
// a tool without parameters gets an empty object schema.
func toolParameters(t model.Tool) (map[string]any, error) {
	if len(t.Parameters) == 0 || string(t.Parameters) == "null" {
		return map[string]any{"type": "object", "properties": map[string]any{}}, nil
	}
	var p map[string]any
	if err := json.Unmarshal(t.Parameters, &p); err != nil {
		return nil, fmt.Errorf("tool %q: parameters are not a JSON object: %w", t.Name, err)
	}
	return p, nil
}

// checkToolChoice accepts the model.Settings values.
func checkToolChoice(s string) error {
	switch s {
	case "", "auto", "required", "none":
		return nil
	}
	return fmt.Errorf("tool choice %q: want auto, required or none", s)
}
