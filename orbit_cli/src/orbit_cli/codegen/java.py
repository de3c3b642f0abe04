"""Java: records annotated for Jackson, in one final class per file set.

`DIR/<package path>/<Name>.java` holds `public final class <Name>` (the
package's last part in PascalCase) with one nested record per ORBIT record,
one `TaskContract` constant and one handler interface per contract. Jackson
(databind, which the Java SDK already uses) reads the records through their
canonical constructors: required fields are `required = true`, defaults are
filled in by the compact constructor (defaulted fields are boxed so that
"absent" is visible), unknown properties are ignored. Int is `long`, Float
`double`, Bool `boolean` (boxed when optional or defaulted), Bytes `byte[]`
(Jackson's base64), UUID `java.util.UUID`, JSON `JsonNode`, Duration
`java.time.Duration` and Timestamp `java.time.OffsetDateTime` with the
(de)serializers written here (core Jackson has no java.time support).
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
    camel,
    pascal,
    upper_snake,
)

_PRIM = {
    "string": "String",
    "int": "long",
    "float": "double",
    "bool": "boolean",
    "bytes": "byte[]",
    "duration": "Duration",
    "timestamp": "OffsetDateTime",
    "uuid": "UUID",
    "json": "JsonNode",
}
_BOXED = {"long": "Long", "double": "Double", "boolean": "Boolean"}
_KEYWORDS = frozenset(
    # Java's reserved words, and Object's methods (no record component may take their names).
    (
        "abstract",
        "assert",
        "boolean",
        "break",
        "byte",
        "case",
        "catch",
        "char",
        "class",
        "const",
        "continue",
        "default",
        "do",
        "double",
        "else",
        "enum",
        "extends",
        "final",
        "finally",
        "float",
        "for",
        "goto",
        "if",
        "implements",
        "import",
        "instanceof",
        "int",
        "interface",
        "long",
        "native",
        "new",
        "package",
        "private",
        "protected",
        "public",
        "return",
        "short",
        "static",
        "strictfp",
        "super",
        "switch",
        "synchronized",
        "this",
        "throw",
        "throws",
        "transient",
        "try",
        "void",
        "volatile",
        "while",
        "true",
        "false",
        "null",
        "var",
        "yield",
        "record",
        "sealed",
        "permits",
        "_",
        "clone",
        "finalize",
        "getClass",
        "hashCode",
        "notify",
        "notifyAll",
        "toString",
        "wait",
        "equals",
    )
)


def java_type(ref: Ref, boxed: bool = False) -> str:
    match ref:
        case Prim(kind):
            plain = _PRIM[kind]
            return _BOXED.get(plain, plain) if boxed else plain
        case ListOf(items):
            return f"List<{java_type(items, True)}>"
        case MapOf(values):
            return f"Map<String, {java_type(values, True)}>"
        case Opt(inner):
            return java_type(inner, True)
        case Named(name):
            return name


def member(name: str) -> str:
    plain = camel(name)
    return plain + "_" if plain in _KEYWORDS else plain


def _annotations(ref: Ref) -> list[str]:
    plain = ref.inner if isinstance(ref, Opt) else ref
    if plain == Prim("duration"):
        return [
            "@JsonSerialize(using = DurationMs.Writer.class)",
            "@JsonDeserialize(using = DurationMs.Reader.class)",
        ]
    if plain == Prim("timestamp"):
        return [
            "@JsonSerialize(using = Rfc3339.Writer.class)",
            "@JsonDeserialize(using = Rfc3339.Reader.class)",
        ]
    if isinstance(plain, ListOf) and plain.items in (Prim("duration"), Prim("timestamp")):
        which = "DurationMs" if plain.items == Prim("duration") else "Rfc3339"
        return [
            f"@JsonSerialize(contentUsing = {which}.Writer.class)",
            f"@JsonDeserialize(contentUsing = {which}.Reader.class)",
        ]
    if isinstance(plain, MapOf) and plain.values in (Prim("duration"), Prim("timestamp")):
        which = "DurationMs" if plain.values == Prim("duration") else "Rfc3339"
        return [
            f"@JsonSerialize(contentUsing = {which}.Writer.class)",
            f"@JsonDeserialize(contentUsing = {which}.Reader.class)",
        ]
    return []


def _javadoc(doc: str | None, indent: str) -> list[str]:
    if not doc:
        return []
    lines = doc.replace("*/", "* /").replace("<", "&lt;").replace(">", "&gt;").splitlines()
    if len(lines) == 1:
        return [f"{indent}/** {lines[0]} */"]
    return [f"{indent}/**", *[f"{indent} * {line}".rstrip() for line in lines], f"{indent} */"]


def _boxed(f: FieldDecl) -> bool:
    return f.has_default or not f.required


def _default(f: FieldDecl, record: Record) -> str:
    plain = f.type.inner if isinstance(f.type, Opt) else f.type
    value = f.default
    if value is None:
        return "null"
    if isinstance(plain, Prim):
        if plain.kind == "string" and isinstance(value, str):
            return json.dumps(value)
        if plain.kind in ("int", "duration") and isinstance(value, int):
            return f"{value}L" if plain.kind == "int" else f"Duration.ofMillis({value}L)"
        if plain.kind == "float" and isinstance(value, int | float):
            return f"{float(value)!r}"
        if plain.kind == "bool" and isinstance(value, bool):
            return "true" if value else "false"
    text = json.dumps(json.dumps(value, separators=(",", ":")))
    type_ref = java_type(f.type, True)
    if "<" in type_ref:
        return f"Defaults.read({text}, new TypeReference<{type_ref}>() {{}})"
    return f"Defaults.read({text}, {type_ref}.class)"


def _record(record: Record) -> list[str]:
    out = [*_javadoc(record.doc, "  ")]
    out.append("  @JsonIgnoreProperties(ignoreUnknown = true)")
    if not record.fields:
        return [*out, f"  public record {record.name}() {{}}"]
    out.append(f"  public record {record.name}(")
    params = []
    for f in record.fields:
        lines = [*_javadoc(f.doc, "      ")]
        required = "true" if f.required else "false"
        annotations = [
            f"@JsonProperty(value = {json.dumps(f.name)}, required = {required})",
            *_annotations(f.type),
        ]
        typ = java_type(f.type, _boxed(f))
        lines.append(f"      {' '.join(annotations)} {typ} {member(f.name)}")
        params.append(lines)
    for i, lines in enumerate(params):
        if i < len(params) - 1:
            lines[-1] += ","
        out.extend(lines)
    defaulted = [f for f in record.fields if f.has_default and f.default is not None]
    required_refs = [f for f in record.fields if f.required and java_type(f.type) not in _BOXED]
    if not defaulted and not required_refs:
        out.append("  ) {}")
        return out
    out.append("  ) {")
    out.append(f"    public {record.name} {{")
    for f in required_refs:
        out.append(f'      Objects.requireNonNull({member(f.name)}, "{f.name}");')
    for f in defaulted:
        out.append(f"      if ({member(f.name)} == null) {{")
        out.append(f"        {member(f.name)} = {_default(f, record)};")
        out.append("      }")
    out.append("    }")
    out.append("  }")
    return out


def _contract(contract: Contract) -> list[str]:
    ident = contract.ident
    document = json.dumps(contract.document, sort_keys=True, separators=(",", ":"))
    i, o = java_type(contract.input, True), java_type(contract.output, True)
    doc = contract.doc or contract.description or f"The `{contract.task}@{contract.version}` task."
    return [
        *_javadoc(doc, "  "),
        f"  public static final TaskContract<{i}, {o}> {upper_snake(ident)} =",
        "      new TaskContract<>(",
        f"          {json.dumps(contract.task)},",
        f"          {json.dumps(contract.version)},",
        f'          "{contract.hash}",',
        f"          {json.dumps(document)},",
        f"          {i}.class,",
        f"          {o}.class);",
        "",
        f"  /** A handler of {{@code {contract.task}}}; {{@code C}} is the SDK's context. */",
        "  @FunctionalInterface",
        f"  public interface {ident}Handler<C> {{",
        f"    {o} handle({i} input, C ctx) throws Exception;",
        "  }",
    ]


_PRELUDE = """
import com.fasterxml.jackson.annotation.JsonIgnoreProperties;
import com.fasterxml.jackson.annotation.JsonProperty;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.DeserializationContext;
import com.fasterxml.jackson.databind.JsonDeserializer;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.JsonSerializer;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializerProvider;
import com.fasterxml.jackson.databind.annotation.JsonDeserialize;
import com.fasterxml.jackson.databind.annotation.JsonSerialize;
import java.io.IOException;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeParseException;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.UUID;
"""

_SUPPORT = """
  /**
   * A task contract: name, version, hash and the record types of its input and output.
   *
   * @param contractHash {@code sha256:} + 64 hex digits; the runtime refuses a worker whose hash
   *     differs
   * @param contract the hashed contract document, as canonical JSON
   */
  public record TaskContract<I, O>(
      String name,
      String version,
      String contractHash,
      String contract,
      Class<I> inputType,
      Class<O> outputType) {}

  /** A workflow a client starts. */
  public record WorkflowType(String name, String version) {}

  /** ORBIT's Duration: whole milliseconds on the wire. */
  public static final class DurationMs {
    private DurationMs() {}

    /** Writes milliseconds. */
    public static final class Writer extends JsonSerializer<Duration> {
      @Override
      public void serialize(Duration value, JsonGenerator gen, SerializerProvider provider)
          throws IOException {
        gen.writeNumber(value.toMillis());
      }
    }

    /** Reads a non-negative integer of milliseconds. */
    public static final class Reader extends JsonDeserializer<Duration> {
      @Override
      public Duration deserialize(JsonParser parser, DeserializationContext context)
          throws IOException {
        if (parser.currentToken() != JsonToken.VALUE_NUMBER_INT || parser.getLongValue() < 0) {
          return (Duration)
              context.handleUnexpectedToken(
                  Duration.class, parser.currentToken(), parser,
                  "expected a non-negative number of milliseconds");
        }
        return Duration.ofMillis(parser.getLongValue());
      }
    }
  }

  /** ORBIT's Timestamp: an RFC 3339 string on the wire. */
  public static final class Rfc3339 {
    private Rfc3339() {}

    /** Writes ISO-8601 / RFC 3339. */
    public static final class Writer extends JsonSerializer<OffsetDateTime> {
      @Override
      public void serialize(OffsetDateTime value, JsonGenerator gen, SerializerProvider provider)
          throws IOException {
        gen.writeString(value.format(DateTimeFormatter.ISO_OFFSET_DATE_TIME));
      }
    }

    /** Reads every form ORBIT accepts ({@code t} or a space for {@code T}, {@code z}). */
    public static final class Reader extends JsonDeserializer<OffsetDateTime> {
      @Override
      public OffsetDateTime deserialize(JsonParser parser, DeserializationContext context)
          throws IOException {
        String text = parser.getValueAsString();
        if (text == null || text.length() < 11) {
          return (OffsetDateTime)
              context.handleWeirdStringValue(
                  OffsetDateTime.class, String.valueOf(text), "expected an RFC 3339 timestamp");
        }
        String normal = text.substring(0, 10) + "T" + text.substring(11).toUpperCase(Locale.ROOT);
        try {
          return OffsetDateTime.parse(normal, DateTimeFormatter.ISO_OFFSET_DATE_TIME);
        } catch (DateTimeParseException e) {
          return (OffsetDateTime)
              context.handleWeirdStringValue(
                  OffsetDateTime.class, text, "expected an RFC 3339 timestamp");
        }
      }
    }
  }

  /** Reads the defaults that are not plain literals from their JSON text. */
  static final class Defaults {
    private static final ObjectMapper MAPPER = new ObjectMapper();

    private Defaults() {}

    static <T> T read(String json, Class<T> type) {
      try {
        return MAPPER.readValue(json, type);
      } catch (IOException e) {
        throw new IllegalStateException("invalid default " + json, e);
      }
    }

    static <T> T read(String json, TypeReference<T> type) {
      try {
        return MAPPER.readValue(json, type);
      } catch (IOException e) {
        throw new IllegalStateException("invalid default " + json, e);
      }
    }
  }
"""


def render(module: Module, package: str) -> dict[str, str]:
    parts = [p for p in package.split(".") if p] or ["contracts"]
    parts = [p.lower() + "_" if p.lower() in _KEYWORDS else p.lower() for p in parts]
    cls = pascal(parts[-1])
    out = [
        "// Code generated by `orbit codegen`. DO NOT EDIT.",
        *[f"// Source: {source}" for source in module.sources],
        "",
        f"package {'.'.join(parts)};",
    ]
    out.extend(_PRELUDE.rstrip("\n").split("\n"))
    out += [
        "",
        "/** Typed ORBIT task contracts and workflow payloads (generated). */",
        f"public final class {cls} {{",
        f"  private {cls}() {{}}",
    ]
    out.extend(_SUPPORT.rstrip("\n").split("\n"))
    for record in module.records:
        out += ["", *_record(record)]
    for contract in module.contracts:
        out += ["", *_contract(contract)]
    for flow in module.workflows:
        out += [
            "",
            *_javadoc(flow.doc or f"Workflow {flow.name}@{flow.version}.", "  "),
            f"  public static final WorkflowType {upper_snake(flow.ident)}_WORKFLOW =",
            f"      new WorkflowType({json.dumps(flow.name)}, {json.dumps(flow.version)});",
        ]
    out.append("}")
    return {"/".join(parts) + f"/{cls}.java": "\n".join(out) + "\n"}
