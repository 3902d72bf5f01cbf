/**
 * Writes tiny ONNX models for tests, with protobufjs and the subset of onnx.proto they need (field
 * numbers as in onnx/onnx.proto). No model hub is needed: the graph is a sentence-transformers
 * model in miniature — an embedding table looked up with Gather, a masked mean over the sequence,
 * an L2 normalisation — with BERT-style input names, so it goes through the same load, validation,
 * batching and pooling code as a real export.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import protobuf from 'protobufjs';

const ONNX_PROTO = `
syntax = "proto3";
package onnx;
message AttributeProto {
  enum AttributeType { UNDEFINED = 0; FLOAT = 1; INT = 2; STRING = 3; TENSOR = 4; GRAPH = 5; FLOATS = 6; INTS = 7; STRINGS = 8; }
  string name = 1;
  AttributeType type = 20;
  float f = 2;
  int64 i = 3;
  bytes s = 4;
  repeated float floats = 7;
  repeated int64 ints = 8;
}
message ValueInfoProto { string name = 1; TypeProto type = 2; string doc_string = 3; }
message NodeProto {
  repeated string input = 1;
  repeated string output = 2;
  string name = 3;
  string op_type = 4;
  string domain = 7;
  repeated AttributeProto attribute = 5;
}
message StringStringEntryProto { string key = 1; string value = 2; }
message OperatorSetIdProto { string domain = 1; int64 version = 2; }
message TensorProto {
  repeated int64 dims = 1;
  int32 data_type = 2;
  repeated float float_data = 4;
  repeated int64 int64_data = 7;
  string name = 8;
  bytes raw_data = 9;
}
message TensorShapeProto {
  message Dimension { oneof value { int64 dim_value = 1; string dim_param = 2; } }
  repeated Dimension dim = 1;
}
message TypeProto {
  message Tensor { int32 elem_type = 1; TensorShapeProto shape = 2; }
  oneof value { Tensor tensor_type = 1; }
}
message GraphProto {
  repeated NodeProto node = 1;
  string name = 2;
  repeated TensorProto initializer = 5;
  string doc_string = 10;
  repeated ValueInfoProto input = 11;
  repeated ValueInfoProto output = 12;
}
message ModelProto {
  int64 ir_version = 1;
  repeated OperatorSetIdProto opset_import = 8;
  string producer_name = 2;
  string producer_version = 3;
  string domain = 4;
  int64 model_version = 5;
  string doc_string = 6;
  GraphProto graph = 7;
  repeated StringStringEntryProto metadata_props = 14;
}
`;

const root = protobuf.parse(ONNX_PROTO, { keepCase: true }).root;
const ModelProto = root.lookupType('onnx.ModelProto');

/** onnx.TensorProto.DataType */
const FLOAT = 1;
const INT64 = 7;
/** onnx.AttributeProto.AttributeType */
const ATTR_INT = 2;
const ATTR_INTS = 7;

type Dim = number | string;

interface ValueInfo {
  name: string;
  type: { tensor_type: { elem_type: number; shape: { dim: Array<{ dim_value: number } | { dim_param: string }> } } };
}

function valueInfo(name: string, elemType: number, dims: readonly Dim[]): ValueInfo {
  return {
    name,
    type: { tensor_type: { elem_type: elemType, shape: { dim: dims.map((d) => (typeof d === 'number' ? { dim_value: d } : { dim_param: d })) } } },
  };
}

interface Attr {
  name: string;
  type: number;
  i?: number;
  ints?: number[];
}

function node(op: string, inputs: string[], outputs: string[], attribute: Attr[] = []): object {
  return { op_type: op, input: inputs, output: outputs, name: `${op}_${outputs[0] ?? ''}`, attribute };
}

const intAttr = (name: string, i: number): Attr => ({ name, type: ATTR_INT, i });
const intsAttr = (name: string, ints: number[]): Attr => ({ name, type: ATTR_INTS, ints });

function floatTensor(name: string, dims: number[], data: ArrayLike<number>): object {
  return { name, dims, data_type: FLOAT, float_data: Array.from(data) };
}

function int64Tensor(name: string, dims: number[], data: number[]): object {
  return { name, dims, data_type: INT64, int64_data: data };
}

export interface TinyModelOptions {
  /** rows = vocabulary size, columns = embedding size */
  table: number[][];
  /** `sentence_embedding` [batch, dim] (pooled + normalised in the graph) or `last_hidden_state` [batch, seq, dim]. */
  output?: 'pooled' | 'token';
  /** Adds a `token_type_ids` input whose rows of `typeTable` are added to every token vector. */
  typeTable?: number[][];
  /** Input names, to build a model that does not fit (default BERT names). */
  names?: { ids?: string; mask?: string; types?: string };
  /** Name of the output (default `sentence_embedding` / `last_hidden_state`). */
  outputName?: string;
  /** Written as the model's metadata_props. */
  metadata?: Record<string, string>;
  producer?: string;
  /** Dense layers (token = tanh(token · W)) after the lookup: real work per token, for benchmarks. */
  layers?: number[][][];
}

/** The ONNX model bytes. */
export function buildTinyModel(opts: TinyModelOptions): Uint8Array {
  const vocab = opts.table.length;
  const dim = opts.table[0]?.length ?? 0;
  const ids = opts.names?.ids ?? 'input_ids';
  const mask = opts.names?.mask ?? 'attention_mask';
  const types = opts.names?.types ?? 'token_type_ids';
  const pooled = (opts.output ?? 'pooled') === 'pooled';
  const outName = opts.outputName ?? (pooled ? 'sentence_embedding' : 'last_hidden_state');

  const inputs = [valueInfo(ids, INT64, ['batch', 'sequence']), valueInfo(mask, INT64, ['batch', 'sequence'])];
  const initializer: object[] = [floatTensor('embedding_table', [vocab, dim], opts.table.flat())];
  const nodes: object[] = [node('Gather', ['embedding_table', ids], ['word_vectors'], [intAttr('axis', 0)])];
  let tokens = 'word_vectors';
  if (opts.typeTable) {
    inputs.push(valueInfo(types, INT64, ['batch', 'sequence']));
    initializer.push(floatTensor('type_table', [opts.typeTable.length, dim], opts.typeTable.flat()));
    nodes.push(node('Gather', ['type_table', types], ['type_vectors'], [intAttr('axis', 0)]));
    nodes.push(node('Add', ['word_vectors', 'type_vectors'], ['token_vectors']));
    tokens = 'token_vectors';
  }

  (opts.layers ?? []).forEach((w, i) => {
    initializer.push(floatTensor(`dense_${i}`, [dim, dim], w.flat()));
    nodes.push(node('MatMul', [tokens, `dense_${i}`], [`dense_${i}_mm`]), node('Tanh', [`dense_${i}_mm`], [`dense_${i}_out`]));
    tokens = `dense_${i}_out`;
  });

  let outputs: ValueInfo[];
  if (pooled) {
    initializer.push(int64Tensor('axes_last', [1], [-1]), int64Tensor('axes_seq', [1], [1]));
    initializer.push(floatTensor('eps_count', [], [1e-9]), floatTensor('eps_norm', [], [1e-12]));
    nodes.push(
      node('Cast', [mask], ['mask_f'], [intAttr('to', FLOAT)]),
      node('Unsqueeze', ['mask_f', 'axes_last'], ['mask_3d']),
      node('Mul', [tokens, 'mask_3d'], ['masked']),
      node('ReduceSum', ['masked', 'axes_seq'], ['summed'], [intAttr('keepdims', 0)]),
      node('ReduceSum', ['mask_3d', 'axes_seq'], ['count'], [intAttr('keepdims', 0)]),
      node('Max', ['count', 'eps_count'], ['count_safe']),
      node('Div', ['summed', 'count_safe'], ['mean']),
      node('ReduceL2', ['mean'], ['norm'], [intsAttr('axes', [1]), intAttr('keepdims', 1)]),
      node('Max', ['norm', 'eps_norm'], ['norm_safe']),
      node('Div', ['mean', 'norm_safe'], [outName]),
    );
    outputs = [valueInfo(outName, FLOAT, ['batch', dim])];
  } else {
    // The mask is an input of a real transformer; here it only has to be consumed.
    nodes.push(node('Identity', [tokens], [outName]));
    outputs = [valueInfo(outName, FLOAT, ['batch', 'sequence', dim])];
    nodes.push(node('Cast', [mask], ['mask_unused'], [intAttr('to', FLOAT)]));
  }

  const model = {
    ir_version: 8,
    opset_import: [{ domain: '', version: 13 }],
    producer_name: opts.producer ?? 'switchyard-tests',
    producer_version: '1',
    model_version: 1,
    graph: { name: 'tiny_embedder', node: nodes, initializer, input: inputs, output: outputs },
    metadata_props: Object.entries(opts.metadata ?? {}).map(([key, value]) => ({ key, value })),
  };
  const err = ModelProto.verify(model);
  if (err) throw new Error(`tiny ONNX model: ${err}`);
  return ModelProto.encode(ModelProto.fromObject(model)).finish();
}

export function writeTinyModel(path: string, opts: TinyModelOptions): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, buildTinyModel(opts));
}

/** A deterministic pseudo-random table (values in [-1, 1)), so tests need no fixtures. */
export function randomTable(rows: number, cols: number, seed = 1): number[][] {
  let s = seed >>> 0 || 1;
  const next = (): number => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s / 2 ** 31 - 1;
  };
  // Round through float32: the model stores float32, so the reference must use the same values.
  return Array.from({ length: rows }, () => Array.from(Float32Array.from({ length: cols }, next)));
}
