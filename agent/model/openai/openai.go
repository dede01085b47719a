// Package openai is the model provider for OpenAI-compatible servers: the
// Responses API and the Chat Completions API, through github.com/openai/openai-go.
// A base URL makes local servers (Ollama, vLLM, llama.cpp) work the same way.
package openai

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/agentbox/agentbox/agent/model"
)

// API names which OpenAI wire protocol a Model speaks.
const (
	// APIResponses is the Responses API (POST /responses), the default.
	APIResponses = "responses"
	// APIChat is the Chat Completions API (POST /chat/completions), which
	// most local servers implement.
	APIChat = "chat"
)

// DefaultBaseURL is used when neither Config.BaseURL nor OPENAI_BASE_URL is set.
const DefaultBaseURL = "https://api.openai.com/v1"

// DefaultMaxRetries is how many times a request is retried on 408, 409, 429,
// 5xx and connection errors when Config.MaxRetries is zero.
const DefaultMaxRetries = 2

// Config says which server and model to talk to and how.
type Config struct {
	// API is APIResponses (default, also when empty) or APIChat.
	API string
	// BaseURL defaults to OPENAI_BASE_URL, then DefaultBaseURL.
	BaseURL string
	// APIKey defaults to OPENAI_API_KEY. Local servers often need none.
	APIKey string
	// Model is the model name; a request's Settings.Model overrides it.
	Model string
	// MaxRetries is the number of retries after the first attempt: zero
	// means DefaultMaxRetries, negative means none. Retries back off
	// exponentially and honour Retry-After / Retry-After-Ms.
	MaxRetries int
	// MaxRetryDelay caps the wait between retries, including a server's
	// Retry-After (a server asking for longer ends the retries). Zero keeps
	// openai-go's defaults (8 s backoff cap, 2 min Retry-After cap).
	MaxRetryDelay time.Duration
	// HTTPClient replaces the default HTTP client (timeouts, proxies, tests).
	HTTPClient *http.Client
	// Stream makes Respond use the streaming endpoint too, so partial output
	// arrives early; RespondStream always streams.
	Stream bool
}

// Model is an OpenAI-compatible language model. It implements model.Model
// and model.Streamer and is safe for concurrent use.
type Model struct {
	api     string
	baseURL string
	model   string
	retries int
	stream  bool
	client  sdk.Client
}

var (
	_ model.Model    = (*Model)(nil)
	_ model.Streamer = (*Model)(nil)
)

// New checks cfg, fills defaults from the environment, and returns a Model.
func New(cfg Config) (*Model, error) {
	api := strings.ToLower(strings.TrimSpace(cfg.API))
	switch api {
	case "", APIResponses, "openai-responses":
		api = APIResponses
	case APIChat, "chat_completions", "chat-completions", "openai-chat":
		api = APIChat
	default:
		return nil, fmt.Errorf("openai model: unknown API %q (want %q or %q)", cfg.API, APIResponses, APIChat)
	}
	baseURL := cfg.BaseURL
	if baseURL == "" {
		baseURL = os.Getenv("OPENAI_BASE_URL")
	}
	if baseURL == "" {
		baseURL = DefaultBaseURL
	}
	baseURL = strings.TrimRight(baseURL, "/")
	if !strings.HasPrefix(baseURL, "http://") && !strings.HasPrefix(baseURL, "https://") {
		return nil, fmt.Errorf("openai model: base URL %q must start with http:// or https://", baseURL)
	}
	apiKey := cfg.APIKey
	if apiKey == "" {
		apiKey = os.Getenv("OPENAI_API_KEY")
	}
	if apiKey == "" && baseURL == DefaultBaseURL {
		return nil, &model.Error{Provider: providerName(api), BaseURL: baseURL,
			Err: fmt.Errorf("no API key: set OPENAI_API_KEY (or point OPENAI_BASE_URL at a local server)")}
	}
	retries := cfg.MaxRetries
	switch {
	case retries == 0:
		retries = DefaultMaxRetries
	case retries < 0:
		retries = 0
	}
	// openai-go sends the trailing slash form; keep our copy without it
	// for messages and give the client the canonical one.
	opts := []option.RequestOption{
		option.WithBaseURL(baseURL + "/"),
		option.WithMaxRetries(retries),
	}
	if apiKey != "" {
		opts = append(opts, option.WithAPIKey(apiKey))
	} else {
		// Local servers take any key; openai-go wants one to send.
		opts = append(opts, option.WithAPIKey("none"))
	}
	if cfg.MaxRetryDelay > 0 {
		opts = append(opts, option.WithMaxRetryDelay(cfg.MaxRetryDelay))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	return &Model{
		api:     api,
		baseURL: baseURL,
		model:   cfg.Model,
		retries: retries,
		stream:  cfg.Stream,
		client:  sdk.NewClient(opts...),
	}, nil
}

// Name is "openai-responses:MODEL" or "openai-chat:MODEL".
func (m *Model) Name() string { return providerName(m.api) + ":" + m.model }

// BaseURL is the server this model talks to, without a trailing slash.
func (m *Model) BaseURL() string { return m.baseURL }

// Respond runs one turn; with Config.Stream it streams and discards events.
func (m *Model) Respond(ctx context.Context, req model.Request) (*model.Response, error) {
	if m.stream {
		return m.RespondStream(ctx, req, nil)
	}
	name, err := m.modelFor(req)
	if err != nil {
		return nil, err
	}
	if m.api == APIChat {
		return m.chat(ctx, name, req)
	}
	return m.responses(ctx, name, req)
}

// RespondStream runs one turn over server-sent events, calling onEvent (if
// not nil) for text deltas, started calls and argument deltas, and returns
// the whole response at the end.
func (m *Model) RespondStream(ctx context.Context, req model.Request, onEvent func(model.Event)) (*model.Response, error) {
	name, err := m.modelFor(req)
	if err != nil {
		return nil, err
	}
	if onEvent == nil {
		onEvent = func(model.Event) {}
	}
	if m.api == APIChat {
		return m.chatStream(ctx, name, req, onEvent)
	}
	return m.responsesStream(ctx, name, req, onEvent)
}

func (m *Model) modelFor(req model.Request) (string, error) {
	if req.Settings.Model != "" {
		return req.Settings.Model, nil
	}
	if m.model != "" {
		return m.model, nil
	}
	return "", &model.Error{Provider: providerName(m.api), BaseURL: m.baseURL,
		Err: fmt.Errorf("no model name: set one in the agent's model settings or with --model")}
}

func providerName(api string) string {
	if api == APIChat {
		return "openai-chat"
	}
	return "openai-responses"
}
