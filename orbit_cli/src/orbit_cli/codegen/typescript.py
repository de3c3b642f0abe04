"""TypeScript: interfaces plus a decoder and encoder per record (no imports).

Each record is an `interface` and a `const` of the same name holding
`decode(value, path)` and `encode(value)`; decoding checks every field and
throws `DecodeError` with the field path. The code is plain erasable syntax
(no enums, namespaces or parameter properties), so it type-checks under the
strictest settings (`strict`, `exactOptionalPropertyTypes`,
`noUncheckedIndexedAccess`) and runs under Node.js type stripping.

Int and Float are `number` (JSON.parse gives numbers: integers beyond 2^53
lose precision before any decoder sees them, so `bigint` would promise more
than it holds), Duration is a number of milliseconds, Timestamp and UUID are
checked strings, Bytes a `Uint8Array` (base64 written out here, so that the
code needs neither Node's Buffer nor the DOM), JSON the recursive
`JsonValue`. Optional fields and fields with defaults are optional
properties; decoding fills defaults in.
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
    upper_snake,
)

_PRIM = {
    "string": "string",
    "int": "number",
    "float": "number",
    "bool": "boolean",
    "bytes": "Uint8Array",
    "duration": "number",
    "timestamp": "string",
    "uuid": "string",
    "json": "JsonValue",
}


def ts_type(ref: Ref) -> str:
    match ref:
        case Prim(kind):
            return _PRIM[kind]
        case ListOf(items):
            return f"ReadonlyArray<{ts_type(items)}>"
        case MapOf(values):
            return f"Readonly<Record<string, {ts_type(values)}>>"
        case Opt(inner):
            return f"{ts_type(inner)} | null"
        case Named(name):
            return name


def decoder(ref: Ref) -> str:
    match ref:
        case Prim(kind):
            return f"decode{kind.capitalize()}"
        case ListOf(items):
            return f"listOf({decoder(items)})"
        case MapOf(values):
            return f"mapOf({decoder(values)})"
        case Opt(inner):
            return f"optional({decoder(inner)})"
        case Named(name):
            return f"{name}.decode"


def encoder(ref: Ref) -> str | None:
    """A function expression encoding the type, or None when values are JSON already."""
    match ref:
        case Prim("bytes"):
            return "encodeBytes"
        case Prim(_):
            return None
        case ListOf(items):
            inner = encoder(items)
            return None if inner is None else f"encodeList({inner})"
        case MapOf(values):
            inner = encoder(values)
            return None if inner is None else f"encodeMap({inner})"
        case Opt(inner):
            found = encoder(inner)
            return None if found is None else f"encodeOptional({found})"
        case Named(name):
            return f"{name}.encode"


def _encode(ref: Ref, value: str) -> str:
    found = encoder(ref)
    if found is None:
        if isinstance(ref, ListOf | MapOf):
            return f"{value} as JsonValue"
        return value
    return f"{found}({value})"


def _comment(doc: str | None, indent: str) -> list[str]:
    if not doc:
        return []
    lines = doc.replace("*/", "* /").splitlines()
    if len(lines) == 1:
        return [f"{indent}/** {lines[0]} */"]
    return [f"{indent}/**", *[f"{indent} * {line}".rstrip() for line in lines], f"{indent} */"]


def _record(record: Record) -> list[str]:
    out = [*_comment(record.doc, ""), f"export interface {record.name} {{"]
    for f in record.fields:
        out.extend(_comment(f.doc, "  "))
        mark = "" if f.required else "?"
        out.append(f"  readonly {_key(f.name)}{mark}: {ts_type(f.type)};")
    out.append("}")
    out += [
        "",
        f"export const {record.name} = {{",
        f'  decode(value: unknown, path = "$"): {record.name} {{',
    ]
    if record.fields:
        out.append("    const o = decodeObject(value, path);")
        out.append("    return {")
        for f in record.fields:
            name = json.dumps(f.name)
            if f.has_default:
                got = f"field(o, {name}, path, {json.dumps(f.default)})"
            elif not f.required:
                got = f"field(o, {name}, path, null)"
            else:
                got = f"required(o, {name}, path)"
            out.append(f"      {_key(f.name)}: {decoder(f.type)}({got}, `${{path}}.{f.name}`),")
        out.append("    };")
    else:
        out.append("    decodeObject(value, path);")
        out.append("    return {};")
    out += ["  },", f"  encode(value: {record.name}): JsonValue {{"]
    if record.fields:
        out.append("    const o: { [key: string]: JsonValue } = {};")
        for f in record.fields:
            name = json.dumps(f.name)
            get = f"value[{name}]"
            if f.required:
                out.append(f"    o[{name}] = {_encode(f.type, get)};")
            else:
                out.append(f"    const v{_ident(f.name)} = {get};")
                out.append(
                    f"    if (v{_ident(f.name)} !== undefined) o[{name}] = "
                    f"{_encode(f.type, 'v' + _ident(f.name))};"
                )
        out.append("    return o;")
    else:
        out.append("    void value;")
        out.append("    return {};")
    out += ["  },", "};"]
    return out


def _key(name: str) -> str:
    """A property name, quoted only when it is not an identifier."""
    return name if name.isidentifier() and name.isascii() else json.dumps(name)


def _ident(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)


def _codec(ref: Ref) -> tuple[str, str]:
    if isinstance(ref, Named):
        return f"{ref.name}.decode", f"{ref.name}.encode"
    found = encoder(ref)
    return decoder(ref), found or f"(v: {ts_type(ref)}): JsonValue => v as JsonValue"


def _contract(contract: Contract) -> list[str]:
    const = upper_snake(contract.ident)
    i, o = ts_type(contract.input), ts_type(contract.output)
    dec_in, enc_in = _codec(contract.input)
    dec_out, enc_out = _codec(contract.output)
    document = json.dumps(json.dumps(contract.document, sort_keys=True, separators=(",", ":")))
    doc = contract.doc or contract.description or f"The `{contract.task}@{contract.version}` task."
    return [
        *_comment(doc, ""),
        f"export const {const}: TaskContract<{i}, {o}> = {{",
        f"  name: {json.dumps(contract.task)},",
        f"  version: {json.dumps(contract.version)},",
        f'  contractHash: "{contract.hash}",',
        f"  contract: {document},",
        f"  decodeInput: {dec_in},",
        f"  encodeInput: {enc_in},",
        f"  decodeOutput: {dec_out},",
        f"  encodeOutput: {enc_out},",
        "};",
        "",
        f"/** A handler of `{contract.task}`; `ctx` is the SDK's Context. */",
        f"export type {contract.ident}Handler<Ctx = unknown> = (",
        f"  input: {i},",
        "  ctx: Ctx,",
        f") => {o} | Promise<{o}>;",
    ]


_PRELUDE = r"""
/** Any JSON value (ORBIT's `JSON` type). */
export type JsonValue =
  | null
  | boolean
  | number
  | string
  | readonly JsonValue[]
  | { readonly [key: string]: JsonValue };

/** A JSON value that does not match its contract type, at `path`. */
export class DecodeError extends Error {
  readonly path: string;

  constructor(path: string, message: string) {
    super(`${path}: ${message}`);
    this.name = "DecodeError";
    this.path = path;
  }
}

export type Decoder<T> = (value: unknown, path: string) => T;

/** A task contract: what a worker registers and a typed handler serves. */
export interface TaskContract<I, O> {
  readonly name: string;
  readonly version: string;
  /** `sha256:` + 64 hex digits; the runtime refuses a worker whose hash differs. */
  readonly contractHash: string;
  /** The hashed contract document, as canonical JSON. */
  readonly contract: string;
  readonly decodeInput: Decoder<I>;
  readonly encodeInput: (value: I) => JsonValue;
  readonly decodeOutput: Decoder<O>;
  readonly encodeOutput: (value: O) => JsonValue;
}

/** A workflow's input and output, for clients that start it. */
export interface WorkflowType<I, O> {
  readonly name: string;
  readonly version: string;
  readonly encodeInput: (value: I) => JsonValue;
  readonly decodeOutput: Decoder<O>;
}

/** A workflow's signal payload or query answer. */
export interface MessageType<T> {
  readonly workflow: string;
  readonly name: string;
  readonly encode: (value: T) => JsonValue;
  readonly decode: Decoder<T>;
}

export function kind(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  switch (typeof value) {
    case "boolean":
      return "a boolean";
    case "number":
      return "a number";
    case "string":
      return "a string";
    case "object":
      return "an object";
    default:
      return typeof value;
  }
}

export function expected(path: string, what: string, value: unknown): DecodeError {
  return new DecodeError(path, `expected ${what}, found ${kind(value)}`);
}

export function decodeObject(value: unknown, path: string): { readonly [key: string]: unknown } {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw expected(path, "an object", value);
  }
  return value as { readonly [key: string]: unknown };
}

export function required(o: { readonly [key: string]: unknown }, name: string, path: string): unknown {
  if (!Object.prototype.hasOwnProperty.call(o, name)) {
    throw new DecodeError(`${path}.${name}`, "missing required field");
  }
  return o[name];
}

export function field(
  o: { readonly [key: string]: unknown },
  name: string,
  _path: string,
  fallback: unknown,
): unknown {
  return Object.prototype.hasOwnProperty.call(o, name) ? o[name] : fallback;
}

export function decodeString(value: unknown, path: string): string {
  if (typeof value !== "string") throw expected(path, "a string", value);
  return value;
}

export function decodeInt(value: unknown, path: string): number {
  if (typeof value !== "number" || !Number.isInteger(value)) {
    throw expected(path, "an integer", value);
  }
  return value;
}

export function decodeFloat(value: unknown, path: string): number {
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw expected(path, "a number", value);
  }
  return value;
}

export function decodeBool(value: unknown, path: string): boolean {
  if (typeof value !== "boolean") throw expected(path, "a boolean", value);
  return value;
}

export const BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

export function decodeBytes(value: unknown, path: string): Uint8Array {
  const text = decodeString(value, path);
  if (text.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(text)) {
    throw new DecodeError(path, "expected standard padded base64");
  }
  const padding = text.endsWith("==") ? 2 : text.endsWith("=") ? 1 : 0;
  const out = new Uint8Array((text.length / 4) * 3 - padding);
  let bits = 0;
  let count = 0;
  let at = 0;
  for (const c of text) {
    if (c === "=") break;
    bits = (bits << 6) | BASE64.indexOf(c);
    count += 6;
    if (count >= 8) {
      count -= 8;
      out[at++] = (bits >> count) & 0xff;
    }
  }
  return out;
}

export function encodeBytes(value: Uint8Array): string {
  let out = "";
  for (let i = 0; i < value.length; i += 3) {
    const a = value[i] ?? 0;
    const b = value[i + 1] ?? 0;
    const c = value[i + 2] ?? 0;
    const n = (a << 16) | (b << 8) | c;
    out += BASE64[(n >> 18) & 63];
    out += BASE64[(n >> 12) & 63];
    out += i + 1 < value.length ? BASE64[(n >> 6) & 63] : "=";
    out += i + 2 < value.length ? BASE64[n & 63] : "=";
  }
  return out;
}

export function decodeDuration(value: unknown, path: string): number {
  const ms = decodeInt(value, path);
  if (ms < 0) throw new DecodeError(path, "expected a non-negative number of milliseconds");
  return ms;
}

export const TIMESTAMP = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

export function decodeTimestamp(value: unknown, path: string): string {
  const text = decodeString(value, path);
  if (!TIMESTAMP.test(text)) throw new DecodeError(path, "expected an RFC 3339 timestamp");
  return text;
}

export const UUID = /^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$/;

export function decodeUuid(value: unknown, path: string): string {
  const text = decodeString(value, path);
  if (!UUID.test(text)) throw new DecodeError(path, "expected a hyphenated UUID");
  return text;
}

export function decodeJson(value: unknown, path: string): JsonValue {
  if (value === null || typeof value === "boolean" || typeof value === "string") return value;
  if (typeof value === "number") return decodeFloat(value, path);
  if (Array.isArray(value)) return value.map((v: unknown, i) => decodeJson(v, `${path}[${i}]`));
  const o = decodeObject(value, path);
  const out: { [key: string]: JsonValue } = {};
  for (const [k, v] of Object.entries(o)) out[k] = decodeJson(v, `${path}.${k}`);
  return out;
}

export function listOf<T>(item: Decoder<T>): Decoder<ReadonlyArray<T>> {
  return (value, path) => {
    if (!Array.isArray(value)) throw expected(path, "an array", value);
    return value.map((v: unknown, i) => item(v, `${path}[${i}]`));
  };
}

export function mapOf<T>(item: Decoder<T>): Decoder<Readonly<Record<string, T>>> {
  return (value, path) => {
    const out: Record<string, T> = {};
    for (const [k, v] of Object.entries(decodeObject(value, path))) {
      out[k] = item(v, `${path}.${k}`);
    }
    return out;
  };
}

export function optional<T>(item: Decoder<T>): Decoder<T | null> {
  return (value, path) => (value === null || value === undefined ? null : item(value, path));
}

export function encodeList<T>(item: (value: T) => JsonValue): (value: ReadonlyArray<T>) => JsonValue {
  return (value) => value.map(item);
}

export function encodeMap<T>(
  item: (value: T) => JsonValue,
): (value: Readonly<Record<string, T>>) => JsonValue {
  return (value) => {
    const out: { [key: string]: JsonValue } = {};
    for (const [k, v] of Object.entries(value)) out[k] = item(v);
    return out;
  };
}

export function encodeOptional<T>(item: (value: T) => JsonValue): (value: T | null) => JsonValue {
  return (value) => (value === null ? null : item(value));
}
"""


def render(module: Module, package: str) -> dict[str, str]:
    out = [
        "// Code generated by `orbit codegen`. DO NOT EDIT.",
        *[f"// Source: {source}" for source in module.sources],
        "/* eslint-disable */",
    ]
    out.extend(_PRELUDE.rstrip("\n").split("\n"))
    for record in module.records:
        out += ["", *_record(record)]
    for contract in module.contracts:
        out += ["", *_contract(contract)]
    for flow in module.workflows:
        const = upper_snake(flow.ident)
        _, enc_in = _codec(flow.input)
        dec_out, _ = _codec(flow.output)
        out += [
            "",
            *_comment(flow.doc, ""),
            f"export const {const}_WORKFLOW: WorkflowType<{ts_type(flow.input)}, "
            f"{ts_type(flow.output)}> = {{",
            f"  name: {json.dumps(flow.name)},",
            f"  version: {json.dumps(flow.version)},",
            f"  encodeInput: {enc_in},",
            f"  decodeOutput: {dec_out},",
            "};",
        ]
        for kind, messages in (("SIGNAL", flow.signals), ("QUERY", flow.queries)):
            for message in messages:
                dec, enc = _codec(message.type)
                out += [
                    *_comment(message.doc, ""),
                    f"export const {const}_{kind}_{upper_snake(message.name)}: "
                    f"MessageType<{ts_type(message.type)}> = {{",
                    f"  workflow: {json.dumps(flow.name)},",
                    f"  name: {json.dumps(message.name)},",
                    f"  encode: {enc},",
                    f"  decode: {dec},",
                    "};",
                ]
    return {f"{package}.ts": "\n".join(out) + "\n"}
