/**
 * An OTLP/HTTP trace receiver for tests: both encodings (protobuf decoded with protobufjs from the
 * OTLP trace definitions below, and JSON), every span kept in one shape.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import protobuf from 'protobufjs';

// The OTLP trace messages the receiver needs (opentelemetry-proto, trace/v1 and common/v1).
const OTLP_PROTO = `
syntax = "proto3";
package otlp;
message ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1; }
message ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2; string schema_url = 3; }
message Resource { repeated KeyValue attributes = 1; uint32 dropped_attributes_count = 2; }
message InstrumentationScope { string name = 1; string version = 2; }
message ScopeSpans { InstrumentationScope scope = 1; repeated Span spans = 2; string schema_url = 3; }
message Span {
  bytes trace_id = 1; bytes span_id = 2; string trace_state = 3; bytes parent_span_id = 4;
  string name = 5; int32 kind = 6; fixed64 start_time_unix_nano = 7; fixed64 end_time_unix_nano = 8;
  repeated KeyValue attributes = 9; uint32 dropped_attributes_count = 10; repeated Event events = 11;
  Status status = 15; fixed32 flags = 16;
}
message Event { fixed64 time_unix_nano = 1; string name = 2; repeated KeyValue attributes = 3; }
message Status { string message = 2; int32 code = 3; }
message KeyValue { string key = 1; AnyValue value = 2; }
message AnyValue {
  oneof value { string string_value = 1; bool bool_value = 2; int64 int_value = 3; double double_value = 4;
    ArrayValue array_value = 5; KeyValueList kvlist_value = 6; bytes bytes_value = 7; }
}
message ArrayValue { repeated AnyValue values = 1; }
message KeyValueList { repeated KeyValue values = 1; }
`;
const ExportRequest = protobuf.parse(OTLP_PROTO).root.lookupType('otlp.ExportTraceServiceRequest');

export const SPAN_KIND = { SERVER: 2, CLIENT: 3 } as const;

export interface SpanView {
  name: string;
  kind: number;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  start: bigint;
  end: bigint;
  attrs: Record<string, unknown>;
  events: string[];
  statusCode: number;
  resource: Record<string, unknown>;
}

export type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

function anyValue(v: unknown): unknown {
  if (!isObj(v)) return undefined;
  if ('stringValue' in v) return v.stringValue;
  if ('boolValue' in v) return v.boolValue;
  if ('intValue' in v) return Number(v.intValue);
  if ('doubleValue' in v) return Number(v.doubleValue);
  if ('arrayValue' in v && isObj(v.arrayValue)) return ((v.arrayValue.values as unknown[] | undefined) ?? []).map(anyValue);
  return undefined;
}

function attrsOf(list: unknown): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const kv of (list as Obj[] | undefined) ?? []) out[kv.key as string] = anyValue(kv.value);
  return out;
}

/** A decoded export request (protobuf decoded to the same camelCase shape OTLP/JSON has). */
function spansOf(req: Obj, hex: (v: unknown) => string): SpanView[] {
  const out: SpanView[] = [];
  for (const rs of (req.resourceSpans as Obj[] | undefined) ?? []) {
    const resource = attrsOf(isObj(rs.resource) ? rs.resource.attributes : undefined);
    for (const ss of (rs.scopeSpans as Obj[] | undefined) ?? []) {
      for (const s of (ss.spans as Obj[] | undefined) ?? []) {
        out.push({
          name: s.name as string,
          kind: Number(s.kind),
          traceId: hex(s.traceId),
          spanId: hex(s.spanId),
          parentSpanId: hex(s.parentSpanId),
          start: BigInt(String(s.startTimeUnixNano)),
          end: BigInt(String(s.endTimeUnixNano)),
          attrs: attrsOf(s.attributes),
          events: ((s.events as Obj[] | undefined) ?? []).map((e) => e.name as string),
          statusCode: isObj(s.status) ? Number(s.status.code ?? 0) : 0,
          resource,
        });
      }
    }
  }
  return out;
}

/** An OTLP/HTTP trace receiver: both encodings, every span kept. */
export async function startReceiver(): Promise<{ url: string; spans: SpanView[]; contentTypes: Set<string>; close(): Promise<void>; waitFor(pred: (s: SpanView[]) => boolean, what: string): Promise<void> }> {
  const spans: SpanView[] = [];
  const contentTypes = new Set<string>();
  const waiters = new Set<() => void>();
  const server = http.createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      const body = Buffer.concat(parts);
      const type = req.headers['content-type'] ?? '';
      contentTypes.add(type);
      if (req.url !== '/v1/traces' || req.method !== 'POST') {
        res.writeHead(404).end();
        return;
      }
      if (type.startsWith('application/x-protobuf')) {
        const msg = ExportRequest.toObject(ExportRequest.decode(body), { longs: String, bytes: Buffer, defaults: true });
        spans.push(...spansOf(msg, (v) => Buffer.from(v as Uint8Array).toString('hex')));
        res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
      } else {
        spans.push(...spansOf(JSON.parse(body.toString('utf8')) as Obj, (v) => (typeof v === 'string' ? v.toLowerCase() : '')));
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      }
      for (const w of waiters) w();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    spans,
    contentTypes,
    close: () => new Promise<void>((r) => server.close(() => r())),
    waitFor: (pred, what) =>
      new Promise<void>((resolve, reject) => {
        if (pred(spans)) return resolve();
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`no spans for ${what}; got ${JSON.stringify(spans.map((s) => s.name))}`));
        }, 5000);
        const check = (): void => {
          if (!pred(spans)) return;
          clearTimeout(timer);
          waiters.delete(check);
          resolve();
        };
        waiters.add(check);
      }),
  };
}

export type Receiver = Awaited<ReturnType<typeof startReceiver>>;
