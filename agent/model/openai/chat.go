package openai

import (
	"context"
	"fmt"
	"sort"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentbox/agentbox/agent/model"
)

const chatWhat = "POST /chat/completions"

// chatParams maps a provider-neutral request onto Chat Completions: the
// instructions become a leading system message, consecutive function calls
// (and the assistant text before them) one assistant message with
// tool_calls, and each call output a tool message.
func chatParams(name string, req model.Request) (sdk.ChatCompletionNewParams, error) {
	p := sdk.ChatCompletionNewParams{Model: name}
	if req.Instructions != "" {
		p.Messages = append(p.Messages, sdk.SystemMessage(req.Instructions))
	}
	var pending *sdk.ChatCompletionAssistantMessageParam
	flush := func() {
		if pending != nil {
			p.Messages = append(p.Messages, sdk.ChatCompletionMessageParamUnion{OfAssistant: pending})
			pending = nil
		}
	}
	for i, it := range req.Input {
		switch it.Type {
		case model.ItemMessage:
			flush()
			switch it.Role {
			case model.RoleUser, "":
				p.Messages = append(p.Messages, sdk.UserMessage(it.Text))
			case model.RoleSystem:
				p.Messages = append(p.Messages, sdk.SystemMessage(it.Text))
			case model.RoleAssistant:
				pending = &sdk.ChatCompletionAssistantMessageParam{}
				pending.Content.OfString = param.NewOpt(it.Text)
			default:
				return p, fmt.Errorf("input item %d: unknown message role %q", i, it.Role)
			}
		case model.ItemFunctionCall:
			if pending == nil {
				pending = &sdk.ChatCompletionAssistantMessageParam{}
			}
			args := it.Arguments
			if args == "" {
				args = "{}"
			}
			pending.ToolCalls = append(pending.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
					ID:       it.CallID,
					Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{Name: it.Name, Arguments: args},
				},
			})
		case model.ItemFunctionCallOutput:
			flush()
			p.Messages = append(p.Messages, sdk.ToolMessage(it.Output, it.CallID))
		default:
			return p, fmt.Errorf("input item %d: unknown item type %q", i, it.Type)
		}
	}
	flush()
	for _, t := range req.Tools {
		params, err := toolParameters(t)
		if err != nil {
			return p, err
		}
		def := shared.FunctionDefinitionParam{Name: t.Name, Parameters: shared.FunctionParameters(params)}
		if t.Description != "" {
			def.Description = param.NewOpt(t.Description)
		}
		p.Tools = append(p.Tools, sdk.ChatCompletionFunctionTool(def))
	}
	s := req.Settings
	// Only when set: OpenAI keeps no chat completions unless asked, so
	// requests to other servers stay as they were.
	if s.Store != nil {
		p.Store = param.NewOpt(*s.Store)
	}
	if s.Temperature != nil {
		p.Temperature = param.NewOpt(*s.Temperature)
	}
	if s.TopP != nil {
		p.TopP = param.NewOpt(*s.TopP)
	}
	if s.MaxOutputTokens > 0 {
		p.MaxCompletionTokens = param.NewOpt(s.MaxOutputTokens)
	}
	if err := checkToolChoice(s.ToolChoice); err != nil {
		return p, err
	}
	if s.ToolChoice != "" {
		p.ToolChoice = sdk.ChatCompletionToolChoiceOptionUnionParam{OfAuto: param.NewOpt(s.ToolChoice)}
	}
	return p, nil
}

func chatUsage(u sdk.CompletionUsage) model.Usage {
	return model.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
}

func (m *Model) chat(ctx context.Context, name string, req model.Request) (*model.Response, error) {
	p, err := chatParams(name, req)
	if err != nil {
		return nil, &model.Error{Provider: providerName(m.api), BaseURL: m.baseURL, Err: fmt.Errorf("build request: %w", err)}
	}
	c, err := m.client.Chat.Completions.New(ctx, p)
	if err != nil {
		return nil, m.wrapErr(chatWhat, err)
	}
	if len(c.Choices) == 0 {
		return nil, m.badAnswer(chatWhat, "completion %q has no choices", c.ID)
	}
	msg := c.Choices[0].Message
	out := &model.Response{ID: c.ID, Model: c.Model, Usage: chatUsage(c.Usage)}
	text := msg.Content
	if text == "" && msg.Refusal != "" {
		text = "(refused) " + msg.Refusal
	}
	if text != "" {
		out.Output = append(out.Output, model.Item{Type: model.ItemMessage, Role: model.RoleAssistant, Text: text})
	}
	for _, tc := range msg.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			continue
		}
		if tc.ID == "" || tc.Function.Name == "" {
			return nil, m.badAnswer(chatWhat, "tool call lacks an id or function name")
		}
		out.Output = append(out.Output, model.Item{Type: model.ItemFunctionCall, CallID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	if len(out.Output) == 0 {
		// An empty final answer is still an answer; keep it explicit.
		out.Output = append(out.Output, model.Item{Type: model.ItemMessage, Role: model.RoleAssistant})
	}
	return out, nil
}

// chatCall collects one streamed tool call, whose id and name arrive in
// its first delta and whose arguments arrive in pieces.
type chatCall struct {
	id, name string
	args     []byte
}

func (m *Model) chatStream(ctx context.Context, name string, req model.Request, onEvent func(model.Event)) (*model.Response, error) {
	p, err := chatParams(name, req)
	if err != nil {
		return nil, &model.Error{Provider: providerName(m.api), BaseURL: m.baseURL, Err: fmt.Errorf("build request: %w", err)}
	}
	p.StreamOptions.IncludeUsage = param.NewOpt(true)
	stream := m.client.Chat.Completions.NewStreaming(ctx, p)
	defer stream.Close()
	const what = chatWhat + " (stream)"
	out := &model.Response{}
	var text []byte
	calls := map[int64]*chatCall{}
	chunks := 0
	for stream.Next() {
		chunks++
		ch := stream.Current()
		if out.ID == "" {
			out.ID, out.Model = ch.ID, ch.Model
		}
		if ch.Usage.TotalTokens > 0 || ch.Usage.PromptTokens > 0 {
			out.Usage = chatUsage(ch.Usage)
		}
		if len(ch.Choices) == 0 {
			continue
		}
		d := ch.Choices[0].Delta
		if d.Content != "" {
			text = append(text, d.Content...)
			onEvent(model.Event{Type: "text_delta", Delta: d.Content})
		}
		for _, tc := range d.ToolCalls {
			c := calls[tc.Index]
			if c == nil {
				c = &chatCall{}
				calls[tc.Index] = c
			}
			if tc.ID != "" {
				c.id = tc.ID
			}
			if tc.Function.Name != "" {
				c.name += tc.Function.Name
				onEvent(model.Event{Type: "call_started", Name: c.name})
			}
			if tc.Function.Arguments != "" {
				c.args = append(c.args, tc.Function.Arguments...)
				onEvent(model.Event{Type: "call_arguments_delta", Delta: tc.Function.Arguments})
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, m.wrapErr(what, err)
	}
	if chunks == 0 {
		return nil, m.badAnswer(what, "the stream ended without a single chunk")
	}
	if len(text) > 0 || len(calls) == 0 {
		out.Output = append(out.Output, model.Item{Type: model.ItemMessage, Role: model.RoleAssistant, Text: string(text)})
	}
	idx := make([]int64, 0, len(calls))
	for i := range calls {
		idx = append(idx, i)
	}
	sort.Slice(idx, func(a, b int) bool { return idx[a] < idx[b] })
	for _, i := range idx {
		c := calls[i]
		if c.id == "" || c.name == "" {
			return nil, m.badAnswer(what, "streamed tool call %d lacks an id or function name", i)
		}
		out.Output = append(out.Output, model.Item{Type: model.ItemFunctionCall, CallID: c.id, Name: c.name, Arguments: string(c.args)})
	}
	return out, nil
}
