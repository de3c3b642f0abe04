package main

import (
	"context"
	"encoding/json"
	"testing"

	orbit "github.com/AjmalX0/Orbit/sdks/go"
)

// The chapter's handler test, as written there.
func TestFrequencies(t *testing.T) {
	task := &orbit.Task{Input: json.RawMessage(`{"tokens":["a","b","a"],"top":1}`)}
	out, err := frequencies(context.Background(), task)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(map[string]any)
	if got["unique"] != 2 {
		t.Fatalf("unique = %v", got["unique"])
	}
	if top := got["top"].([]wordCount); len(top) != 1 || top[0] != (wordCount{"a", 2}) {
		t.Fatalf("top = %v", top)
	}
}

func TestUndecodableInputIsPermanent(t *testing.T) {
	_, err := frequencies(context.Background(), &orbit.Task{Input: json.RawMessage(`{"tokens": 3}`)})
	te, ok := err.(*orbit.TaskError)
	if !ok || te.Code != "INVALID_INPUT" || te.Retryable {
		t.Fatalf("err = %#v", err)
	}
}
