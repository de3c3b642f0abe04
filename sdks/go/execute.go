package orbit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
)

// outcome is the protocol call that reports an attempt: complete or fail,
// with its body. fallback marks the failure sent in place of a refused
// report; it gets no fallback of its own.
type outcome struct {
	path     string
	body     map[string]any
	fallback bool
}

func completed(token string, output json.RawMessage) outcome {
	return outcome{path: pathComplete, body: map[string]any{"token": token, "output": output}}
}

func failed(token, code, message string, retryable bool, details any) outcome {
	body := map[string]any{
		"token":         token,
		"error_code":    code,
		"error_message": message,
		"retryable":     retryable,
	}
	if details != nil {
		if raw, err := json.Marshal(details); err == nil {
			body["details"] = json.RawMessage(raw)
		} else {
			// The failure must stay reportable even when its details are not JSON.
			body["details"] = fmt.Sprint(details)
		}
	}
	return outcome{path: pathFail, body: body}
}

// runHandler calls the handler and turns what it did into the report.
func runHandler(ctx context.Context, handler Handler, t *Task) (result outcome) {
	defer func() {
		if r := recover(); r != nil {
			details := map[string]any{"stack": string(debug.Stack())}
			result = failed(t.Token, "PANIC", fmt.Sprint(r), true, details)
		}
	}()
	output, err := handler(ctx, t)
	if err != nil {
		var te *TaskError
		if errors.As(err, &te) {
			return failed(t.Token, te.Code, te.Message, te.Retryable, te.Details)
		}
		return failed(t.Token, "UNHANDLED_EXCEPTION", err.Error(), true, nil)
	}
	if output == nil {
		return completed(t.Token, json.RawMessage("{}"))
	}
	raw, err := json.Marshal(output)
	if err != nil {
		return failed(t.Token, "INVALID_RESULT", "the handler's output cannot be marshaled to JSON: "+err.Error(), false, nil)
	}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		message := fmt.Sprintf("a task's output must be a JSON object; the handler returned %.40s", trimmed)
		return failed(t.Token, "INVALID_RESULT", message, false, nil)
	}
	return completed(t.Token, json.RawMessage(trimmed))
}
