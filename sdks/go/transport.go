package orbit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Paths of the worker protocol's HTTP/JSON binding.
const (
	pathRegister   = "/v1/workers/register"
	pathPoll       = "/v1/workers/poll"
	pathHeartbeat  = "/v1/workers/heartbeat"
	pathUnregister = "/v1/workers/unregister"
	pathComplete   = "/v1/tasks/complete"
	pathFail       = "/v1/tasks/fail"
)

// callTimeout bounds every call but a poll, which waits PollWait plus this.
const callTimeout = 15 * time.Second

// maxErrorBody bounds how much of an error answer is read into a message.
const maxErrorBody = 64 << 10

type client struct {
	server string
	token  string
	http   *http.Client
}

func newClient(s settings) *client {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = s.tls
	// Every poll goroutine, the heartbeat and result deliveries keep their
	// connections, so no request pays for a new TCP (or TLS) handshake.
	transport.MaxIdleConnsPerHost = s.concurrency + 4
	return &client{server: s.server, token: s.token, http: &http.Client{Transport: transport}}
}

// post sends body as JSON and decodes a 200 answer into out. It returns the
// status (204 leaves out untouched) or an *APIError: Status 0 when no answer
// arrived.
func (c *client) post(ctx context.Context, path string, body any, timeout time.Duration, out any) (int, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return 0, &APIError{Code: "INVALID_REQUEST", Message: err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.server+path, bytes.NewReader(data))
	if err != nil {
		return 0, &APIError{Code: "CONNECTION", Message: err.Error()}
	}
	req.Header.Set("content-type", "application/json")
	req.Header.Set("accept", "application/json")
	req.Header.Set("user-agent", "orbit-go/"+Version)
	if c.token != "" {
		req.Header.Set("authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err // the method and URL would repeat what the message says
		}
		return 0, &APIError{Code: "CONNECTION", Message: fmt.Sprintf("cannot reach the runtime at %s: %v", c.server, err)}
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNoContent:
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return resp.StatusCode, &APIError{Status: resp.StatusCode, Code: "HTTP_ERROR", Message: "unreadable answer: " + err.Error()}
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	return resp.StatusCode, apiError(resp.StatusCode, raw)
}

// apiError reads the runtime's {"error": {"code", "message"}} body; other
// bodies (plain-text 400 and 422 answers, a proxy's page) become HTTP_ERROR.
func apiError(status int, raw []byte) *APIError {
	var envelope struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &envelope) == nil && envelope.Error.Code != "" {
		return &APIError{Status: status, Code: envelope.Error.Code, Message: envelope.Error.Message}
	}
	message := strings.TrimSpace(string(raw))
	if message == "" {
		message = http.StatusText(status)
	}
	return &APIError{Status: status, Code: "HTTP_ERROR", Message: message}
}
