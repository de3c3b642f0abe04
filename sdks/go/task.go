package orbit

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
)

// Task is one delivery of an attempt, as the runtime sent it.
type Task struct {
	Token           string          `json:"token"`
	ExecutionID     string          `json:"execution_id"`
	Workflow        string          `json:"workflow"`
	WorkflowVersion string          `json:"workflow_version"`
	StepID          string          `json:"step_id"`
	TaskName        string          `json:"task_name"`
	ContractVersion string          `json:"contract_version"`
	Input           json.RawMessage `json:"input"`
	IdempotencyKey  string          `json:"idempotency_key"`
	Attempt         int             `json:"attempt"`
	Redelivery      bool            `json:"redelivery"`
	DeadlineMs      *int64          `json:"deadline_ms,omitempty"`
	TimeoutMs       *int64          `json:"timeout_ms,omitempty"`
}

// Decode unmarshals the task's input into v (json.Unmarshal).
func (t *Task) Decode(v any) error {
	input := t.Input
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	return json.Unmarshal(input, v)
}

// Handler runs one attempt. It returns the output (marshaled to a JSON
// object; nil means {}) or an error (a *TaskError, possibly wrapped, keeps
// its code).
type Handler func(ctx context.Context, t *Task) (any, error)

// Typed adapts a function of a decoded input to a Handler. Input that does
// not decode into In fails the attempt with the permanent INVALID_INPUT.
func Typed[In any, Out any](fn func(ctx context.Context, t *Task, in In) (Out, error)) Handler {
	return func(ctx context.Context, t *Task) (any, error) {
		var in In
		if err := t.Decode(&in); err != nil {
			return nil, Permanent("INVALID_INPUT", fmt.Sprintf("cannot decode the input of %s: %v", t.TaskName, err))
		}
		return fn(ctx, t, in)
	}
}

type attemptKey struct{}

type attemptInfo struct {
	task   *Task
	logger *log.Logger
}

// TaskFrom returns the task a handler's context belongs to.
func TaskFrom(ctx context.Context) (*Task, bool) {
	info, ok := ctx.Value(attemptKey{}).(*attemptInfo)
	if !ok {
		return nil, false
	}
	return info.task, true
}

// Logf writes a line to the worker's logger, followed by the execution, step
// and attempt of the handler's context. Outside a handler it goes to the
// standard logger.
func Logf(ctx context.Context, format string, args ...any) {
	message := fmt.Sprintf(format, args...)
	info, ok := ctx.Value(attemptKey{}).(*attemptInfo)
	if !ok {
		log.Print(message)
		return
	}
	info.logger.Printf("%s %s", message, describe(info.task))
}

// describe names an attempt in log lines.
func describe(t *Task) string {
	return fmt.Sprintf("execution=%s step=%s attempt=%d task=%s", t.ExecutionID, t.StepID, t.Attempt, t.TaskName)
}
