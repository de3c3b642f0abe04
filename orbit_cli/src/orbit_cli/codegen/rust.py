"""Rust: serde structs, a `Task` trait per contract, and typed handler aliases.

The file is a module (`mod contracts;`) depending on serde (derive) and
serde_json, the crates the Rust SDK already uses: JSON is
`serde_json::Value`, and defaults that are not plain literals are read from
their JSON text. Int is i64, Float f64, List `Vec`, Map `std::collections::BTreeMap`
(a stable order), optional `Option`; Bytes, Duration, Timestamp and UUID are newtypes
here with their own serde impls (padded base64; milliseconds over
`std::time::Duration`; checked RFC 3339 and UUID strings), so they nest in
`Option`, `Vec` and maps. rustfmt formats the output when it is installed.
"""

from __future__ import annotations

import json

from orbit_cli.codegen.model import (
    Contract,
    FieldDecl,
    ListOf,
    MapOf,
    Module,
    Named,
    Opt,
    Prim,
    Record,
    Ref,
    snake,
    upper_snake,
)

_PRIM = {
    "string": "String",
    "int": "i64",
    "float": "f64",
    "bool": "bool",
    "bytes": "Bytes",
    "duration": "Duration",
    "timestamp": "Timestamp",
    "uuid": "Uuid",
    "json": "serde_json::Value",
}
_KEYWORDS = {
    "as", "break", "const", "continue", "crate", "else", "enum", "extern", "false", "fn", "for",
    "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return",
    "self", "Self", "static", "struct", "super", "trait", "true", "type", "unsafe", "use",
    "where", "while", "async", "await", "dyn", "abstract", "become", "box", "do", "final",
    "macro", "override", "priv", "typeof", "unsized", "virtual", "yield", "try", "gen",
}  # fmt: skip


def rust_type(ref: Ref) -> str:
    match ref:
        case Prim(kind):
            return _PRIM[kind]
        case ListOf(items):
            return f"Vec<{rust_type(items)}>"
        case MapOf(values):
            return f"std::collections::BTreeMap<String, {rust_type(values)}>"
        case Opt(inner):
            return f"Option<{rust_type(inner)}>"
        case Named(name):
            return name


def field_name(name: str) -> str:
    plain = snake(name)
    if plain in ("self", "Self", "super", "crate"):
        return plain + "_"
    return f"r#{plain}" if plain in _KEYWORDS else plain


def _comment(doc: str | None, indent: str) -> list[str]:
    if not doc:
        return []
    return [f"{indent}/// {line}".rstrip() for line in doc.splitlines()]


def _default_fn(record: Record, f: FieldDecl) -> tuple[str, list[str]]:
    name = f"default_{snake(record.name)}_{snake(f.name)}"
    typ = rust_type(f.type)
    value = f.default
    plain = f.type.inner if isinstance(f.type, Opt) else f.type
    body: str | None = None
    if isinstance(plain, Prim) and value is not None:
        if plain.kind == "string" and isinstance(value, str):
            body = f"{json.dumps(value)}.to_owned()"
        elif plain.kind == "int" and isinstance(value, int):
            body = f"{value}"
        elif plain.kind == "float" and isinstance(value, int | float):
            body = f"{float(value)!r}_f64".replace("inf", "f64::INFINITY")
        elif plain.kind == "bool" and isinstance(value, bool):
            body = "true" if value else "false"
        if body is not None and isinstance(f.type, Opt):
            body = f"Some({body})"
    if value is None and isinstance(f.type, Opt):
        body = "None"
    if body is None:
        text = json.dumps(value, separators=(",", ":"))
        body = f'serde_json::from_str(r#"{text}"#).expect("the default of `{f.name}` is valid")'
    return name, [f"fn {name}() -> {typ} {{", f"    {body}", "}"]


def _record(record: Record) -> list[str]:
    out = [
        *_comment(record.doc, ""),
        "#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]",
        f"pub struct {record.name} {{",
    ]
    defaults: list[str] = []
    for f in record.fields:
        out.extend(_comment(f.doc, "    "))
        rename = f.name != snake(f.name)
        attrs: list[str] = []
        if rename:
            attrs.append(f"rename = {json.dumps(f.name)}")
        if f.has_default:
            fn, lines = _default_fn(record, f)
            attrs.append(f'default = "{fn}"')
            defaults += ["", *lines]
        elif isinstance(f.type, Opt):
            attrs.append("default")
        if attrs:
            out.append(f"    #[serde({', '.join(attrs)})]")
        out.append(f"    pub {field_name(f.name)}: {rust_type(f.type)},")
    out.append("}")
    return out + defaults


def _contract(contract: Contract) -> list[str]:
    ident = contract.ident
    document = json.dumps(contract.document, sort_keys=True, separators=(",", ":"))
    i, o = rust_type(contract.input), rust_type(contract.output)
    doc = contract.doc or contract.description or f"The `{contract.task}@{contract.version}` task."
    return [
        *_comment(doc, ""),
        "#[derive(Debug, Clone, Copy, PartialEq, Eq)]",
        f"pub struct {ident};",
        "",
        f"impl Task for {ident} {{",
        f"    type Input = {i};",
        f"    type Output = {o};",
        f"    const NAME: &'static str = {json.dumps(contract.task)};",
        f"    const VERSION: &'static str = {json.dumps(contract.version)};",
        f'    const CONTRACT_HASH: &\'static str = "{contract.hash}";',
        f'    const CONTRACT: &\'static str = r#"{document}"#;',
        "}",
        "",
        f"/// A handler of `{contract.task}`: `C` is the SDK's context, `E` its error.",
        f"pub type {ident}Handler<C, E> = fn({i}, &C) -> Result<{o}, E>;",
        "",
        f"/// `{contract.task}` as a value.",
        f"pub const {upper_snake(ident)}: {ident} = {ident};",
    ]


_PRELUDE = r"""
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A task contract: its input and output types, name, version and hash.
pub trait Task {
    type Input: Serialize + for<'de> Deserialize<'de>;
    type Output: Serialize + for<'de> Deserialize<'de>;
    const NAME: &'static str;
    const VERSION: &'static str;
    /// `sha256:` + 64 hex digits; the runtime refuses a worker whose hash differs.
    const CONTRACT_HASH: &'static str;
    /// The hashed contract document, as canonical JSON.
    const CONTRACT: &'static str;
}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// ORBIT's `Bytes`: padded standard base64 on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Bytes(pub Vec<u8>);

impl Serialize for Bytes {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = String::with_capacity(self.0.len().div_ceil(3) * 4);
        for chunk in self.0.chunks(3) {
            let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
            let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
            for (i, shift) in [18u32, 12, 6, 0].into_iter().enumerate() {
                if i <= chunk.len() {
                    out.push(char::from(BASE64[((n >> shift) & 63) as usize]));
                } else {
                    out.push('=');
                }
            }
        }
        serializer.serialize_str(&out)
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        let invalid = || serde::de::Error::custom("expected standard padded base64");
        if text.len() % 4 != 0 {
            return Err(invalid());
        }
        let body = text.trim_end_matches('=');
        if text.len() - body.len() > 2 {
            return Err(invalid());
        }
        let mut out = Vec::with_capacity(body.len() * 3 / 4);
        let (mut bits, mut count) = (0u32, 0u32);
        for c in body.bytes() {
            let value = BASE64.iter().position(|&b| b == c).ok_or_else(invalid)?;
            bits = (bits << 6) | u32::try_from(value).map_err(|_| invalid())?;
            count += 6;
            if count >= 8 {
                count -= 8;
                out.push(u8::try_from((bits >> count) & 0xff).map_err(|_| invalid())?);
            }
        }
        Ok(Bytes(out))
    }
}

/// ORBIT's `Duration`: a non-negative number of milliseconds on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Duration(pub std::time::Duration);

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(u64::try_from(self.0.as_millis()).unwrap_or(u64::MAX))
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let ms = u64::deserialize(deserializer)?;
        Ok(Duration(std::time::Duration::from_millis(ms)))
    }
}

/// ORBIT's `Timestamp`: an RFC 3339 string, checked when read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Timestamp(String);

impl Timestamp {
    /// The timestamp as it was written.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for Timestamp {
    type Error = String;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        let b = text.as_bytes();
        let digits = |range: std::ops::Range<usize>| {
            b.get(range).is_some_and(|s| s.iter().all(u8::is_ascii_digit))
        };
        let mut ok = b.len() >= 20
            && digits(0..4)
            && b[4] == b'-'
            && digits(5..7)
            && b[7] == b'-'
            && digits(8..10)
            && matches!(b[10], b'T' | b't' | b' ')
            && digits(11..13)
            && b[13] == b':'
            && digits(14..16)
            && b[16] == b':'
            && digits(17..19);
        if ok {
            let mut rest = &b[19..];
            if rest.first() == Some(&b'.') {
                let n = rest[1..].iter().take_while(|c| c.is_ascii_digit()).count();
                ok = n > 0;
                rest = &rest[1 + n..];
            }
            ok = ok
                && match rest {
                    [b'Z' | b'z'] => true,
                    [b'+' | b'-', h1, h2, b':', m1, m2] => {
                        [h1, h2, m1, m2].iter().all(|c| c.is_ascii_digit())
                    }
                    _ => false,
                };
        }
        if ok {
            Ok(Timestamp(text))
        } else {
            Err(format!("expected an RFC 3339 timestamp, found {text:?}"))
        }
    }
}

impl From<Timestamp> for String {
    fn from(value: Timestamp) -> Self {
        value.0
    }
}

/// ORBIT's `UUID`: a hyphenated string of hex digits, checked when read.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Uuid(String);

impl Uuid {
    /// The UUID as it was written.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for Uuid {
    type Error = String;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        let ok = text.len() == 36
            && text.bytes().enumerate().all(|(i, c)| {
                if matches!(i, 8 | 13 | 18 | 23) {
                    c == b'-'
                } else {
                    c.is_ascii_hexdigit()
                }
            });
        if ok {
            Ok(Uuid(text))
        } else {
            Err(format!("expected a hyphenated UUID, found {text:?}"))
        }
    }
}

impl From<Uuid> for String {
    fn from(value: Uuid) -> Self {
        value.0
    }
}
"""


def render(module: Module, package: str) -> dict[str, str]:
    name = snake(package) or "contracts"
    out = [
        "// Code generated by `orbit codegen`. DO NOT EDIT.",
        *[f"// Source: {source}" for source in module.sources],
        "",
        "//! Typed ORBIT task contracts and workflow payloads (generated).",
        "#![allow(dead_code)]",
    ]
    out.extend(_PRELUDE.rstrip("\n").split("\n"))
    for record in module.records:
        out += ["", *_record(record)]
    for contract in module.contracts:
        out += ["", *_contract(contract)]
    for flow in module.workflows:
        out += [
            "",
            *_comment(flow.doc, ""),
            f"/// Workflow `{flow.name}@{flow.version}`.",
            f"pub const {upper_snake(flow.ident)}_WORKFLOW: (&str, &str) = "
            f"({json.dumps(flow.name)}, {json.dumps(flow.version)});",
        ]
        for message in (*flow.signals, *flow.queries):
            if not isinstance(message.type, Named):
                alias = f"{flow.ident}{''.join(w.capitalize() for w in snake(message.name).split('_'))}Query"
                out += [
                    f"/// The answer of query `{message.name}`.",
                    f"pub type {alias} = {rust_type(message.type)};",
                ]
    return {f"{name}.rs": "\n".join(out) + "\n"}
