"""Go: structs with `json` tags, typed handler funcs (standard library only).

Each struct has an `UnmarshalJSON` that refuses a missing or null required
field and fills defaults in, and wraps errors in `*DecodeError` with the field
path; marshalling is encoding/json's own (every field is written, null for a
nil optional). Int is int64, Float float64, Bytes []byte (encoding/json's
padded base64), Duration the `Duration` type here (milliseconds on the wire,
time.Duration inside), Timestamp `Timestamp` (a time.Time that reads every
form ORBIT accepts), UUID the checked string type `UUID`, JSON
json.RawMessage. Optional scalars and records are pointers; optional lists,
maps, bytes and JSON use nil. A handler type is generic in the SDK's task
type, so it fits `orbit.Typed` without importing the SDK, and `TaskContract`
has the fields of the SDK's `orbit.ContractRef`, so one converts to the other. gofmt formats the
output when it is installed (orbit_cli.codegen.formatting).
"""

from __future__ import annotations

import json

from orbit_cli.codegen.model import (
    Contract,
    ListOf,
    MapOf,
    Module,
    Named,
    Opt,
    Prim,
    Record,
    Ref,
    pascal,
)

_PRIM = {
    "string": "string",
    "int": "int64",
    "float": "float64",
    "bool": "bool",
    "bytes": "[]byte",
    "duration": "Duration",
    "timestamp": "Timestamp",
    "uuid": "UUID",
    "json": "json.RawMessage",
}
_INITIALISMS = {
    "id": "ID",
    "url": "URL",
    "uuid": "UUID",
    "http": "HTTP",
    "json": "JSON",
    "api": "API",
}


def go_name(name: str) -> str:
    words = [w for w in name.replace(".", "_").replace("-", "_").split("_") if w]
    out = "".join(_INITIALISMS.get(w.lower(), w[:1].upper() + w[1:]) for w in words)
    return out if out and not out[0].isdigit() else "F" + out


def go_type(ref: Ref) -> str:
    match ref:
        case Prim(kind):
            return _PRIM[kind]
        case ListOf(items):
            return f"[]{go_type(items)}"
        case MapOf(values):
            return f"map[string]{go_type(values)}"
        case Opt(inner):
            plain = go_type(inner)
            if plain.startswith(("[]", "map[", "json.")):
                return plain
            return "*" + plain
        case Named(name):
            return name


def _comment(doc: str | None, indent: str, lead: str = "") -> list[str]:
    if not doc:
        return []
    lines = doc.splitlines()
    if lead:
        lines[0] = f"{lead} {lines[0][:1].lower()}{lines[0][1:]}" if lines else lead
    return [f"{indent}// {line}".rstrip() for line in lines]


def _record(record: Record) -> list[str]:
    out = [*_comment(record.doc, "", f"{record.name} is"), f"type {record.name} struct {{"]
    for f in record.fields:
        out.extend(_comment(f.doc, "\t"))
        out.append(f'\t{go_name(f.name)} {go_type(f.type)} `json:"{f.name}"`')
    out.append("}")
    out += [
        "",
        "// UnmarshalJSON checks required fields and fills defaults in.",
        f"func (v *{record.name}) UnmarshalJSON(data []byte) error {{",
        "\tfields, err := decodeObject(data)",
        "\tif err != nil {",
        "\t\treturn err",
        "\t}",
        f"\tvar out {record.name}",
    ]
    if not record.fields:
        out.append("\t_ = fields")
    for f in record.fields:
        name = json.dumps(f.name)
        field = f"out.{go_name(f.name)}"
        out.append(f"\tif raw, ok := fields[{name}]; ok {{")
        if f.required and f.type != Prim("json"):  # JSON may hold null
            out.append(f"\t\tif err := decodeRequired({name}, raw, &{field}); err != nil {{")
        else:
            out.append(f"\t\tif err := decodeField({name}, raw, &{field}); err != nil {{")
        out += ["\t\t\treturn err", "\t\t}"]
        if f.required:
            out += [
                "\t} else {",
                f'\t\treturn &DecodeError{{Path: {name}, Message: "missing required field"}}',
            ]
        elif f.has_default:
            default = json.dumps(json.dumps(f.default, separators=(",", ":")))
            out += [
                "\t} else {",
                f"\t\tif err := decodeField({name}, []byte({default}), &{field}); err != nil {{",
                "\t\t\treturn err",
                "\t\t}",
            ]
        out.append("\t}")
    out += ["\t*v = out", "\treturn nil", "}"]
    return out


def _contract(contract: Contract) -> list[str]:
    ident = contract.ident
    document = json.dumps(contract.document, sort_keys=True, separators=(",", ":"))
    doc = contract.doc or contract.description
    lines = [
        *(
            _comment(doc, "", f"{ident}Contract:")
            or [f"// {ident}Contract is `{contract.task}@{contract.version}`."]
        ),
        f"var {ident}Contract = TaskContract{{",
        f"\tName: {json.dumps(contract.task)},",
        f"\tVersion: {json.dumps(contract.version)},",
        f'\tContractHash: "{contract.hash}",',
        f"\tContract: {json.dumps(document)},",
        "}",
        "",
        f"// {ident}Handler serves `{contract.task}`; T is the SDK's task type (*orbit.Task).",
        f"type {ident}Handler[T any] func(ctx context.Context, task T, in {go_type(contract.input)}) "
        f"({go_type(contract.output)}, error)",
    ]
    return lines


_PRELUDE = r"""
import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"time"
)

// TaskContract identifies a task contract: what a worker registers.
type TaskContract struct {
	Name    string
	Version string
	// ContractHash is `sha256:` + 64 hex digits; the runtime refuses a worker whose hash differs.
	ContractHash string
	// Contract is the hashed contract document, as canonical JSON.
	Contract string
}

// WorkflowType names a workflow a client starts.
type WorkflowType struct {
	Name    string
	Version string
}

// DecodeError is a JSON value that does not match its contract type, at Path.
type DecodeError struct {
	Path    string
	Message string
}

func (e *DecodeError) Error() string { return e.Path + ": " + e.Message }

func within(name string, err error) error {
	if inner, ok := err.(*DecodeError); ok {
		if inner.Path == "" || strings.HasPrefix(inner.Path, "[") {
			return &DecodeError{Path: name + inner.Path, Message: inner.Message}
		}
		return &DecodeError{Path: name + "." + inner.Path, Message: inner.Message}
	}
	return &DecodeError{Path: name, Message: err.Error()}
}

// decodeInto is json.Unmarshal, except that a list is read item by item, so
// that an error names the item's index (`items[3].sku`).
func decodeInto(raw []byte, into any) error {
	target := reflect.ValueOf(into).Elem()
	if target.Kind() != reflect.Slice || target.Type().Elem().Kind() == reflect.Uint8 {
		return json.Unmarshal(raw, into) // Bytes and JSON are not lists of items
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return json.Unmarshal(raw, into) // not a list: encoding/json says why
	}
	if items == nil {
		target.Set(reflect.Zero(target.Type()))
		return nil
	}
	out := reflect.MakeSlice(target.Type(), len(items), len(items))
	for i, item := range items {
		if err := decodeInto(item, out.Index(i).Addr().Interface()); err != nil {
			return within(fmt.Sprintf("[%d]", i), err)
		}
	}
	target.Set(out)
	return nil
}

func decodeObject(data []byte) (map[string]json.RawMessage, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil || fields == nil {
		return nil, &DecodeError{Path: "", Message: "expected an object"}
	}
	return fields, nil
}

func decodeField(name string, raw []byte, into any) error {
	if err := decodeInto(raw, into); err != nil {
		return within(name, err)
	}
	return nil
}

func decodeRequired(name string, raw []byte, into any) error {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return &DecodeError{Path: name, Message: "expected a value, found null"}
	}
	return decodeField(name, raw, into)
}

// Duration is ORBIT's Duration: a non-negative number of milliseconds on the wire.
type Duration time.Duration

// MarshalJSON writes whole milliseconds.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).Milliseconds())
}

// UnmarshalJSON reads a non-negative integer of milliseconds.
func (d *Duration) UnmarshalJSON(data []byte) error {
	var ms int64
	if err := json.Unmarshal(data, &ms); err != nil || ms < 0 {
		return &DecodeError{Path: "", Message: "expected a non-negative number of milliseconds"}
	}
	*d = Duration(time.Duration(ms) * time.Millisecond)
	return nil
}

// Timestamp is ORBIT's Timestamp: an RFC 3339 string on the wire.
type Timestamp struct{ time.Time }

var timestampForm = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$`)

// MarshalJSON writes RFC 3339 with nanoseconds when there are any.
func (t Timestamp) MarshalJSON() ([]byte, error) {
	return json.Marshal(t.Format(time.RFC3339Nano))
}

// UnmarshalJSON reads every form ORBIT accepts (`t` or a space for `T`, `z` for `Z`).
func (t *Timestamp) UnmarshalJSON(data []byte) error {
	var text string
	if err := json.Unmarshal(data, &text); err != nil || !timestampForm.MatchString(text) {
		return &DecodeError{Path: "", Message: "expected an RFC 3339 timestamp"}
	}
	text = text[:10] + "T" + strings.ToUpper(text[11:])
	parsed, err := time.Parse(time.RFC3339Nano, text)
	if err != nil {
		return &DecodeError{Path: "", Message: fmt.Sprintf("expected an RFC 3339 timestamp: %v", err)}
	}
	t.Time = parsed
	return nil
}

// UUID is ORBIT's UUID: a hyphenated string of hex digits.
type UUID string

var uuidForm = regexp.MustCompile(`^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$`)

// UnmarshalJSON checks the form.
func (u *UUID) UnmarshalJSON(data []byte) error {
	var text string
	if err := json.Unmarshal(data, &text); err != nil || !uuidForm.MatchString(text) {
		return &DecodeError{Path: "", Message: "expected a hyphenated UUID"}
	}
	*u = UUID(text)
	return nil
}

// Decode reads a task's input (or any generated type) and names the bad field on failure.
func Decode[T any](data []byte) (T, error) {
	var out T
	if err := json.Unmarshal(data, &out); err != nil {
		return out, within("input", err)
	}
	return out, nil
}

var _ = context.Background
"""


def render(module: Module, package: str) -> dict[str, str]:
    name = "".join(c for c in package.lower() if c.isalnum() or c == "_") or "contracts"
    out = [
        "// Code generated by `orbit codegen`. DO NOT EDIT.",
        *[f"// Source: {source}" for source in module.sources],
        "",
        f"// Package {name} holds typed ORBIT task contracts and workflow payloads.",
        f"package {name}",
    ]
    out.extend(_PRELUDE.rstrip("\n").split("\n"))
    for record in module.records:
        out += ["", *_record(record)]
    for contract in module.contracts:
        out += ["", *_contract(contract)]
    for flow in module.workflows:
        out += [
            "",
            *(
                _comment(flow.doc, "", f"{flow.ident}Workflow:")
                or [
                    f"// {flow.ident}Workflow is `{flow.name}@{flow.version}`; input {go_type(flow.input)}, output {go_type(flow.output)}."
                ]
            ),
            f"var {flow.ident}Workflow = WorkflowType{{Name: {json.dumps(flow.name)}, Version: {json.dumps(flow.version)}}}",
        ]
        for message in (*flow.signals, *flow.queries):
            if not isinstance(message.type, Named):
                alias = f"{flow.ident}{pascal(message.name)}Query"
                out += [
                    "",
                    f"// {alias} is the answer of query `{message.name}`.",
                    f"type {alias} = {go_type(message.type)}",
                ]
    return {f"{name}.go": "\n".join(out) + "\n"}
