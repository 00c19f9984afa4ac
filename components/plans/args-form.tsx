"use client";

import { useId, useState } from "react";

/** The part of JSON Schema (as zod's toJSONSchema writes it) that the generated form understands. */
export interface JsonSchema {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  enum?: unknown[];
  description?: string;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  minLength?: number;
  maxLength?: number;
  default?: unknown;
}

type Args = Record<string, unknown>;

const REFERENCE = /^\$[A-Za-z][\w-]*(\.[\w-]+)*$/;

/**
 * Problems the browser can see before sending: missing required values, wrong types, bounds,
 * unreadable JSON. The server validates again with the tool's zod schema.
 */
export function checkArgs(schema: JsonSchema, args: Args): Map<string, string> {
  const errors = new Map<string, string>();
  for (const [name, field] of Object.entries(schema.properties ?? {})) {
    const value = args[name];
    if (value === undefined || value === "") {
      if (schema.required?.includes(name) && !acceptsAnything(field)) errors.set(name, "Required");
      continue;
    }
    if (typeof value === "string" && REFERENCE.test(value)) continue; // checked on the server against dependencies
    const type = mainType(field);
    if (type === "integer" || type === "number") {
      if (typeof value !== "number" || Number.isNaN(value)) errors.set(name, "Enter a number");
      else if (type === "integer" && !Number.isInteger(value)) errors.set(name, "Enter a whole number");
      else if (field.minimum !== undefined && value < field.minimum)
        errors.set(name, `Must be at least ${field.minimum}`);
      else if (field.maximum !== undefined && value > field.maximum)
        errors.set(name, `Must be at most ${field.maximum}`);
      else if (field.exclusiveMinimum !== undefined && value <= field.exclusiveMinimum)
        errors.set(name, `Must be more than ${field.exclusiveMinimum}`);
    } else if (type === "string") {
      if (typeof value !== "string") errors.set(name, "Enter text");
      else if (field.minLength !== undefined && value.length < field.minLength)
        errors.set(name, field.minLength === 1 ? "Required" : `At least ${field.minLength} characters`);
      else if (field.maxLength !== undefined && value.length > field.maxLength)
        errors.set(name, `At most ${field.maxLength} characters`);
    } else if (type === "boolean" && typeof value !== "boolean") {
      errors.set(name, "Choose yes or no");
    }
  }
  return errors;
}

function mainType(field: JsonSchema): string | undefined {
  if (field.enum) return "enum";
  return Array.isArray(field.type) ? field.type.find((t) => t !== "null") : field.type;
}

function acceptsAnything(field: JsonSchema): boolean {
  return mainType(field) === undefined;
}

interface ArgsFormProps {
  /** Used to build unique element ids and accessible names. */
  stepId: string;
  schema: JsonSchema;
  value: Args;
  onChange(value: Args): void;
  /** Steps whose output may be referenced: the step's dependencies. */
  dependencies: string[];
  /** Errors per argument name (client checks and server issues), and for the whole object under "". */
  errors: Map<string, string>;
  /** Raw-JSON text problems are reported here so the editor can block saving. */
  onRawError(message: string | null): void;
}

/** A form generated from the tool's input schema, with a raw-JSON mode for anything it cannot show. */
export function ArgsForm({ stepId, schema, value, onChange, dependencies, errors, onRawError }: ArgsFormProps) {
  const [mode, setMode] = useState<"form" | "json">(schema.properties ? "form" : "json");
  const [rawText, setRawText] = useState(() => JSON.stringify(value, null, 2));
  const [rawError, setRawError] = useState<string | null>(null);
  const fields = Object.entries(schema.properties ?? {});
  const extraKeys = Object.keys(value).filter((key) => !schema.properties?.[key]);

  function switchMode(next: "form" | "json") {
    if (next === "json") setRawText(JSON.stringify(value, null, 2));
    if (next === "form" && rawError) return;
    setMode(next);
  }

  function editRaw(text: string) {
    setRawText(text);
    try {
      const parsed: unknown = JSON.parse(text);
      if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed))
        throw new Error("Arguments must be a JSON object");
      setRawError(null);
      onRawError(null);
      onChange(parsed as Args);
    } catch (error) {
      const message = `Not valid JSON: ${(error as Error).message}`;
      setRawError(message);
      onRawError(message);
    }
  }

  return (
    <fieldset className="args-form">
      <legend>Arguments</legend>
      <div className="row" role="group" aria-label={`How to edit the arguments of ${stepId}`}>
        <button
          type="button"
          aria-pressed={mode === "form"}
          onClick={() => switchMode("form")}
          disabled={!schema.properties}
        >
          Form
        </button>
        <button type="button" aria-pressed={mode === "json"} onClick={() => switchMode("json")}>
          Raw JSON
        </button>
      </div>
      {mode === "json" ? (
        <label className="field">
          <span>Arguments as JSON</span>
          <textarea
            className="mono"
            rows={Math.min(14, Math.max(4, rawText.split("\n").length))}
            value={rawText}
            spellCheck={false}
            onChange={(event) => editRaw(event.target.value)}
            aria-invalid={rawError || errors.get("") ? true : undefined}
          />
          {(rawError ?? errors.get("")) && (
            <span className="field-error" role="alert">
              {rawError ?? errors.get("")}
            </span>
          )}
          {[...errors]
            .filter(([key]) => key !== "")
            .map(([key, message]) => (
              <span key={key} className="field-error">
                {key}: {message}
              </span>
            ))}
        </label>
      ) : (
        <>
          {fields.map(([name, field]) => (
            <ArgField
              key={name}
              name={name}
              field={field}
              required={schema.required?.includes(name) ?? false}
              value={value[name]}
              dependencies={dependencies}
              error={errors.get(name)}
              onChange={(next) => {
                const copy = { ...value };
                if (next === undefined) delete copy[name];
                else copy[name] = next;
                onChange(copy);
              }}
            />
          ))}
          {extraKeys.length > 0 && (
            <p className="muted">
              Not in the tool&apos;s schema (edit in Raw JSON): <span className="mono">{extraKeys.join(", ")}</span>
            </p>
          )}
          {errors.get("") && <span className="field-error">{errors.get("")}</span>}
        </>
      )}
    </fieldset>
  );
}

interface ArgFieldProps {
  name: string;
  field: JsonSchema;
  required: boolean;
  value: unknown;
  dependencies: string[];
  error: string | undefined;
  onChange(value: unknown): void;
}

function ArgField({ name, field, required, value, dependencies, error, onChange }: ArgFieldProps) {
  const id = useId();
  const type = mainType(field);
  const isReference = typeof value === "string" && REFERENCE.test(value);
  const [jsonText, setJsonText] = useState(() => (value === undefined ? "" : JSON.stringify(value, null, 2)));
  const [jsonError, setJsonError] = useState<string | null>(null);
  const describedBy = [field.description && `${id}-hint`, (error ?? jsonError) && `${id}-error`]
    .filter(Boolean)
    .join(" ");
  const common = {
    id,
    "aria-invalid": error || jsonError ? true : undefined,
    "aria-describedby": describedBy || undefined,
  } as const;

  const control = (
    <ArgControl
      common={common}
      name={name}
      field={field}
      type={type}
      value={value}
      isReference={isReference}
      jsonText={jsonText}
      setJsonText={setJsonText}
      setJsonError={setJsonError}
      onChange={onChange}
    />
  );

  return (
    <div className={`field arg-field ${error || jsonError ? "has-error" : ""}`} data-arg={name}>
      <label htmlFor={id}>
        <span className="mono">{name}</span>
        {required && <span aria-hidden="true"> *</span>}
        {required && <span className="visually-hidden"> (required)</span>}
      </label>
      <div className="row">
        {control}
        {dependencies.length > 0 && (
          <select
            aria-label={`Use a step's output for ${name}`}
            value={isReference ? (value as string).slice(1).split(".")[0] : ""}
            onChange={(e) => {
              if (e.target.value) onChange(`$${e.target.value}`);
              else {
                setJsonText("");
                onChange(undefined);
              }
            }}
          >
            <option value="">{isReference ? "Enter a value instead" : "Use a step's output…"}</option>
            {dependencies.map((dep) => (
              <option key={dep} value={dep}>
                Output of {dep}
              </option>
            ))}
          </select>
        )}
      </div>
      {field.description && (
        <span id={`${id}-hint`} className="muted">
          {field.description}
        </span>
      )}
      {(error ?? jsonError) && (
        <span id={`${id}-error`} className="field-error">
          {error ?? jsonError}
        </span>
      )}
    </div>
  );
}

/** The input that fits the argument's type: a checkbox, a choice, a number, text, or JSON for anything else. */
function ArgControl({
  common,
  name,
  field,
  type,
  value,
  isReference,
  jsonText,
  setJsonText,
  setJsonError,
  onChange,
}: {
  common: { id: string; "aria-invalid": true | undefined; "aria-describedby": string | undefined };
  name: string;
  field: JsonSchema;
  type: ReturnType<typeof mainType>;
  value: unknown;
  isReference: boolean;
  jsonText: string;
  setJsonText(text: string): void;
  setJsonError(error: string | null): void;
  onChange(value: unknown): void;
}) {
  let control;
  if (isReference) {
    control = <input {...common} className="mono" value={value as string} readOnly />;
  } else if (type === "boolean") {
    control = (
      <input {...common} type="checkbox" checked={value === true} onChange={(e) => onChange(e.target.checked)} />
    );
  } else if (type === "enum") {
    control = (
      <select
        {...common}
        value={value === undefined ? "" : String(value)}
        onChange={(e) => onChange(e.target.value || undefined)}
      >
        <option value="">—</option>
        {field.enum!.map((option) => (
          <option key={String(option)} value={String(option)}>
            {String(option)}
          </option>
        ))}
      </select>
    );
  } else if (type === "integer" || type === "number") {
    control = (
      <input
        {...common}
        inputMode="decimal"
        value={value === undefined ? "" : String(value)}
        onChange={(e) => {
          const text = e.target.value.trim();
          // Keep what was typed when it is not a number, so the inline error can point at it.
          onChange(text === "" ? undefined : Number.isNaN(Number(text)) ? text : Number(text));
        }}
      />
    );
  } else if (type === "string") {
    const long = name === "content" || name === "command" || (field.maxLength ?? 0) > 200;
    control = long ? (
      <textarea
        {...common}
        rows={4}
        value={typeof value === "string" ? value : ""}
        onChange={(e) => onChange(e.target.value)}
      />
    ) : (
      <input {...common} value={typeof value === "string" ? value : ""} onChange={(e) => onChange(e.target.value)} />
    );
  } else {
    // Objects, arrays and values of any type: JSON, one field at a time.
    control = (
      <textarea
        {...common}
        className="mono"
        rows={3}
        value={jsonText}
        spellCheck={false}
        onChange={(e) => {
          setJsonText(e.target.value);
          readJsonArg(e.target.value, type, setJsonError, onChange);
        }}
      />
    );
  }

  return control;
}

/** Takes what was typed in a JSON field as the argument's value, or marks it as not valid JSON. */
function readJsonArg(
  text: string,
  type: string | undefined,
  setJsonError: (error: string | null) => void,
  onChange: (value: unknown) => void,
) {
  if (text.trim() === "") {
    setJsonError(null);
    onChange(undefined);
    return;
  }
  try {
    onChange(JSON.parse(text));
    setJsonError(null);
  } catch {
    // A bare word is taken as text, so `hello` needs no quotes.
    if (type === undefined && !/^[[{"]/.test(text.trim())) {
      onChange(text);
      setJsonError(null);
    } else {
      setJsonError("Not valid JSON");
    }
  }
}
