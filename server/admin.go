package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
)

// AdminSocket is the running server's administration socket in its data
// directory (mode 0600 in a 0700 directory: the operator's alone). The
// token commands use it while a server holds the registry.
func AdminSocket(data string) string { return filepath.Join(data, "admin.sock") }

// KeyCreated is the answer to a key creation: the row and the token,
// shown once.
type KeyCreated struct {
	Key   Key    `json:"key"`
	Token string `json:"token"`
}

// AdminHandler serves the key operations on the registry to the operator:
// POST /keys?tenant=T, GET /keys, POST /keys/{id}/revoke.
func AdminHandler(reg *Registry) http.Handler {
	mux := http.NewServeMux()
	fail := func(w http.ResponseWriter, status int, err error) {
		writeJSON(w, status, map[string]string{"error": err.Error()})
	}
	mux.HandleFunc("POST /keys", func(w http.ResponseWriter, r *http.Request) {
		k, tok, err := reg.CreateKey(r.URL.Query().Get("tenant"))
		if err != nil {
			fail(w, http.StatusBadRequest, err)
			return
		}
		writeJSON(w, http.StatusCreated, KeyCreated{Key: k, Token: tok})
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, _ *http.Request) {
		keys, err := reg.Keys()
		if err != nil {
			fail(w, http.StatusInternalServerError, err)
			return
		}
		writeJSON(w, http.StatusOK, keys)
	})
	mux.HandleFunc("POST /keys/{id}/revoke", func(w http.ResponseWriter, r *http.Request) {
		k, err := reg.RevokeKey(r.PathValue("id"))
		if err != nil {
			fail(w, http.StatusNotFound, err)
			return
		}
		writeJSON(w, http.StatusOK, k)
	})
	return mux
}

// KeyAdmin manages API keys: the registry itself, or a running server's
// through its admin socket.
type KeyAdmin interface {
	CreateKey(tenant string) (Key, string, error)
	Keys() ([]Key, error)
	RevokeKey(id string) (Key, error)
	Close() error
}

// OpenKeyAdmin opens the registry in data, or, when a running server
// holds it, that server's admin socket.
func OpenKeyAdmin(data string) (KeyAdmin, error) {
	reg, err := OpenRegistry(data)
	if err == nil {
		return reg, nil
	}
	if !errors.Is(err, ErrLocked) {
		return nil, err
	}
	sock := AdminSocket(data)
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	return &adminClient{hc: hc, sock: sock}, nil
}

// adminClient is KeyAdmin over a running server's admin socket.
type adminClient struct {
	hc   *http.Client
	sock string
}

func (a *adminClient) do(method, path string, v any) error {
	req, err := http.NewRequest(method, "http://admin"+path, nil)
	if err != nil {
		return err
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return fmt.Errorf("a running server holds the registry, and its admin socket %s does not answer: %w", a.sock, err)
	}
	return decodeAdmin(resp, v)
}

func (a *adminClient) CreateKey(tenant string) (Key, string, error) {
	var kc KeyCreated
	err := a.do("POST", "/keys?tenant="+url.QueryEscape(tenant), &kc)
	return kc.Key, kc.Token, err
}

func (a *adminClient) Keys() ([]Key, error) {
	var keys []Key
	err := a.do("GET", "/keys", &keys)
	return keys, err
}

func (a *adminClient) RevokeKey(id string) (Key, error) {
	var k Key
	err := a.do("POST", "/keys/"+url.PathEscape(id)+"/revoke", &k)
	return k, err
}

func (a *adminClient) Close() error { a.hc.CloseIdleConnections(); return nil }

// decodeAdmin reads an admin answer.
func decodeAdmin(resp *http.Response, v any) error {
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		var e map[string]string
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return &adminError{e["error"]}
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

type adminError struct{ msg string }

func (e *adminError) Error() string { return e.msg }
