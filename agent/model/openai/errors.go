package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/agentbox/agentbox/agent/model"
)

// wrapErr turns what openai-go returned into a *model.Error that names the
// server, the HTTP status and whether retrying later can help. openai-go has
// already made its own retries by the time we see err.
func (m *Model) wrapErr(what string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %s model at %s: %w", what, providerName(m.api), m.baseURL, err)
	}
	e := &model.Error{Provider: providerName(m.api), BaseURL: m.baseURL}
	var apiErr *sdk.Error
	var streamErr *ssestream.StreamError
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	var netErr net.Error
	switch {
	case errors.As(err, &apiErr):
		e.StatusCode = apiErr.StatusCode
		detail := apiErr.Message
		if detail == "" {
			detail = apiErr.Error()
		}
		switch {
		case apiErr.StatusCode == 401:
			e.Err = fmt.Errorf("%s: the API key was refused (check OPENAI_API_KEY or the key passed to agentbox): %s: %w", what, detail, err)
		case apiErr.StatusCode == 403:
			e.Err = fmt.Errorf("%s: access denied for this key or model: %s: %w", what, detail, err)
		case apiErr.StatusCode == 404:
			e.Err = fmt.Errorf("%s: not found (is the base URL right, does the server implement the %s API, does the model exist?): %s: %w", what, m.api, detail, err)
		case apiErr.StatusCode == 429 || apiErr.StatusCode >= 500 || apiErr.StatusCode == 408 || apiErr.StatusCode == 409:
			e.Retryable = true
			e.Err = fmt.Errorf("%s: still failing after %d retries: %s: %w", what, m.retries, detail, err)
		default:
			e.Err = fmt.Errorf("%s: request rejected: %s: %w", what, detail, err)
		}
	case errors.Is(err, syscall.ECONNREFUSED):
		e.Retryable = true
		e.Err = fmt.Errorf("%s: no server answers (connection refused, after %d retries): %w", what, m.retries, err)
	case errors.As(err, &streamErr):
		e.Err = fmt.Errorf("%s: the server reported an error in the stream: %w", what, err)
	case errors.As(err, &syntaxErr), errors.As(err, &typeErr), errors.Is(err, io.ErrUnexpectedEOF),
		// openai-go wraps decoder failures of other kinds under this prefix.
		strings.Contains(err.Error(), "error parsing response json"):
		e.Err = fmt.Errorf("%s: the server's answer is not valid JSON for the %s API: %w", what, m.api, err)
	case errors.As(err, &netErr):
		e.Retryable = true
		e.Err = fmt.Errorf("%s: network error talking to the server (after %d retries): %w", what, m.retries, err)
	default:
		e.Err = fmt.Errorf("%s: %w", what, err)
	}
	return e
}

// badAnswer reports a response that parsed but makes no sense for the API.
func (m *Model) badAnswer(what string, format string, args ...any) error {
	return &model.Error{Provider: providerName(m.api), BaseURL: m.baseURL,
		Err: fmt.Errorf("%s: unusable answer: %s", what, fmt.Sprintf(format, args...))}
}
