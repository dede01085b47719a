package openai

import (
	"context"
	"fmt"
	"strings"

	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentbox/agentbox/agent/model"
)

const responsesWhat = "POST /responses"

// responsesParams maps a provider-neutral request onto the Responses API.
func responsesParams(name string, req model.Request) (responses.ResponseNewParams, error) {
	p := responses.ResponseNewParams{Model: name}
	if req.Instructions != "" {
		p.Instructions = param.NewOpt(req.Instructions)
	}
	items := make(responses.ResponseInputParam, 0, len(req.Input))
	for i, it := range req.Input {
		switch it.Type {
		case model.ItemMessage:
			role, err := easyRole(it.Role)
			if err != nil {
				return p, fmt.Errorf("input item %d: %w", i, err)
			}
			items = append(items, responses.ResponseInputItemParamOfMessage(it.Text, role))
		case model.ItemFunctionCall:
			args := it.Arguments
			if args == "" {
				args = "{}"
			}
			items = append(items, responses.ResponseInputItemParamOfFunctionCall(args, it.CallID, it.Name))
		case model.ItemFunctionCallOutput:
			out := responses.ResponseInputItemParamOfFunctionCallOutput(it.Output)
			out.OfFunctionCallOutput.CallID = param.NewOpt(it.CallID)
			items = append(items, out)
		default:
			return p, fmt.Errorf("input item %d: unknown item type %q", i, it.Type)
		}
	}
	p.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: items}
	for _, t := range req.Tools {
		params, err := toolParameters(t)
		if err != nil {
			return p, err
		}
		tool := responses.ToolParamOfFunction(t.Name, params, false)
		if t.Description != "" {
			tool.OfFunction.Description = param.NewOpt(t.Description)
		}
		p.Tools = append(p.Tools, tool)
	}
	s := req.Settings
	// Sent on every request, false unless the settings ask: the API's
	// own default is to keep responses (30 days), and a run's input holds
	// whatever its tools read.
	p.Store = param.NewOpt(s.Stores())
	if s.Temperature != nil {
		p.Temperature = param.NewOpt(*s.Temperature)
	}
	if s.TopP != nil {
		p.TopP = param.NewOpt(*s.TopP)
	}
	if s.MaxOutputTokens > 0 {
		p.MaxOutputTokens = param.NewOpt(s.MaxOutputTokens)
	}
	if err := checkToolChoice(s.ToolChoice); err != nil {
		return p, err
	}
	if s.ToolChoice != "" {
		p.ToolChoice = responses.ResponseNewParamsToolChoiceUnion{
			OfToolChoiceMode: param.NewOpt(responses.ToolChoiceOptions(s.ToolChoice)),
		}
	}
	return p, nil
}

func easyRole(r model.Role) (responses.EasyInputMessageRole, error) {
	switch r {
	case model.RoleUser, "":
		return responses.EasyInputMessageRoleUser, nil
	case model.RoleAssistant:
		return responses.EasyInputMessageRoleAssistant, nil
	case model.RoleSystem:
		return responses.EasyInputMessageRoleSystem, nil
	}
	return "", fmt.Errorf("unknown message role %q", r)
}

// fromResponse maps a Responses API answer back to provider-neutral items.
// Output types the agent cannot act on (reasoning, hosted tools) are dropped.
func (m *Model) fromResponse(r *responses.Response) (*model.Response, error) {
	switch r.Status {
	case responses.ResponseStatusFailed, responses.ResponseStatusCancelled:
		msg := r.Error.Message
		if msg == "" {
			msg = "no reason given"
		}
		return nil, m.badAnswer(responsesWhat, "response %s %s: %s (%s)", r.ID, r.Status, msg, r.Error.Code)
	}
	out := &model.Response{ID: r.ID, Model: r.Model, Usage: model.Usage{
		InputTokens:  r.Usage.InputTokens,
		OutputTokens: r.Usage.OutputTokens,
		TotalTokens:  r.Usage.TotalTokens,
	}}
	for _, item := range r.Output {
		switch item.Type {
		case "message":
			var text strings.Builder
			for _, c := range item.Content {
				switch c.Type {
				case "output_text":
					text.WriteString(c.Text)
				case "refusal":
					text.WriteString("(refused) " + c.Refusal)
				}
			}
			out.Output = append(out.Output, model.Item{Type: model.ItemMessage, Role: model.RoleAssistant, Text: text.String()})
		case "function_call":
			call := item.AsFunctionCall()
			if call.Name == "" || call.CallID == "" {
				return nil, m.badAnswer(responsesWhat, "function_call item %q lacks a name or call_id", item.ID)
			}
			out.Output = append(out.Output, model.Item{Type: model.ItemFunctionCall, CallID: call.CallID, Name: call.Name, Arguments: call.Arguments})
		}
	}
	if len(out.Output) == 0 && r.Status == responses.ResponseStatusIncomplete {
		return nil, m.badAnswer(responsesWhat, "response %s incomplete (%s) with no output", r.ID, r.IncompleteDetails.Reason)
	}
	return out, nil
}

func (m *Model) responses(ctx context.Context, name string, req model.Request) (*model.Response, error) {
	p, err := responsesParams(name, req)
	if err != nil {
		return nil, &model.Error{Provider: providerName(m.api), BaseURL: m.baseURL, Err: fmt.Errorf("build request: %w", err)}
	}
	r, err := m.client.Responses.New(ctx, p)
	if err != nil {
		return nil, m.wrapErr(responsesWhat, err)
	}
	return m.fromResponse(r)
}

func (m *Model) responsesStream(ctx context.Context, name string, req model.Request, onEvent func(model.Event)) (*model.Response, error) {
	p, err := responsesParams(name, req)
	if err != nil {
		return nil, &model.Error{Provider: providerName(m.api), BaseURL: m.baseURL, Err: fmt.Errorf("build request: %w", err)}
	}
	stream := m.client.Responses.NewStreaming(ctx, p)
	defer stream.Close()
	const what = responsesWhat + " (stream)"
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "response.output_text.delta":
			onEvent(model.Event{Type: "text_delta", Delta: ev.Delta})
		case "response.output_item.added":
			if ev.Item.Type == "function_call" {
				onEvent(model.Event{Type: "call_started", Name: ev.Item.Name})
			}
		case "response.function_call_arguments.delta":
			onEvent(model.Event{Type: "call_arguments_delta", Delta: ev.Delta})
		case "response.completed", "response.incomplete", "response.failed":
			r := ev.Response
			return m.fromResponse(&r)
		case "error":
			return nil, m.badAnswer(what, "server sent an error event: %s (%s)", ev.Message, ev.Code)
		}
	}
	if err := stream.Err(); err != nil {
		return nil, m.wrapErr(what, err)
	}
	return nil, m.badAnswer(what, "the stream ended before a response.completed event")
}
