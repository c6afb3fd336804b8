#!/usr/bin/env node
// Classify digits with an MNIST .onnx file in Node.js, with ONNX Runtime Web (WebAssembly): the same file, the same
// runtime as the web page, no Python. Prints JSON: the model's input/output names, then one row of logits per image.
//
//   node web/classify.mjs MODEL.onnx IMAGES.npy [--invert | --preprocess mnist] [--show-input] [--time N]
//
//   IMAGES.npy   uint8 (0..255) or float32 (0..1) images [N, 28, 28] or [N, 1, 28, 28], white digit on black
//                (an image whose border is not dark is refused, as by helpers/predict.py);
//                with --preprocess mnist: uint8 RGBA drawings [N, H, W, 4] (dark strokes on a light or
//                transparent background), made into 28x28 inputs by web/preprocess.js, as the page does
//                (in Python: helpers/classify_drawing.py, with helpers/preprocess.py)
//   --invert     the images show a dark digit on a light background: use 1 - pixel
//   --show-input also print the 28x28 inputs the model saw (to compare with Python's preprocessing)
//   --time N     also time N single-image runs (after 10 warm-up runs) and print the median in microseconds
//
// Exit codes as helpers/predict.py: 0 ok, 2 usage, 3 model (missing, not ONNX, not [batch,1,28,28] -> [batch,10]),
// 4 input (missing or unreadable .npy, wrong dtype or shape, empty drawing, a background that is not dark).
import { readFileSync } from 'node:fs';
import * as ort from 'onnxruntime-web';
import { contractProblem, inkFromRGBA, mnistPreprocess } from './preprocess.js';

const USAGE = 'usage: node web/classify.mjs MODEL.onnx IMAGES.npy [--invert | --preprocess mnist] [--show-input] [--time N]';

function fail(code, message) {
  console.error(`error: ${message}`);
  process.exit(code);
}

// A .npy file: magic, version, header length, a Python-dict header, then the raw little-endian data.
function readNpy(path) {
  let bytes;
  try {
    bytes = readFileSync(path);
  } catch (err) {
    fail(4, `cannot read ${path}: ${err.code === 'ENOENT' ? 'file not found' : err.message}`);
  }
  if (bytes.length < 10 || bytes.toString('latin1', 0, 6) !== '\x93NUMPY') fail(4, `${path}: not a .npy file`);
  const headerLength = bytes[6] === 1 ? bytes.readUInt16LE(8) : bytes.readUInt32LE(8);
  const start = bytes[6] === 1 ? 10 : 12;
  const header = bytes.toString('latin1', start, start + headerLength);
  const descr = /'descr':\s*'([^']+)'/.exec(header)?.[1];
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)?.[1].split(',').filter(s => s.trim()).map(Number);
  if (!descr || !shape || /'fortran_order':\s*True/.test(header)) fail(4, `${path}: unsupported .npy header ${header.trim()}`);
  const offset = start + headerLength, count = shape.reduce((a, b) => a * b, 1);
  const body = bytes.subarray(offset);
  let data;
  if (descr === '|u1') data = Uint8Array.from(body.subarray(0, count));
  else if (descr === '<f4') data = new Float32Array(body.buffer.slice(body.byteOffset, body.byteOffset + 4 * count));
  else fail(4, `${path}: dtype ${descr} is not supported; expected uint8 or float32`);
  if (data.length !== count) fail(4, `${path}: truncated: ${data.length} of ${count} values`);
  return { descr, shape, data };
}

const args = process.argv.slice(2);
const flag = (name) => { const i = args.indexOf(name); return i < 0 ? undefined : args.splice(i, 2)[1]; };
const option = (name) => args.includes(name) ? (args.splice(args.indexOf(name), 1), true) : false;
const showInput = option('--show-input'), invert = option('--invert');
const preprocess = flag('--preprocess') ?? 'none';
const timeRuns = Number(flag('--time') ?? 0);
if (args.length !== 2 || !['none', 'mnist'].includes(preprocess) || !(timeRuns >= 0)) fail(2, USAGE);
if (invert && preprocess === 'mnist') fail(2, '--preprocess mnist finds the ink itself: drop --invert');
const [modelPath, imagesPath] = args;

// Open the model: the JS twin of ort.InferenceSession(path) in Python. Names come from the session, never typed.
ort.env.wasm.numThreads = 1;  // one thread, as in the page (and a fair batch-1 comparison with Python's one)
let session;
try {
  session = await ort.InferenceSession.create(readFileSync(modelPath));
} catch (err) {
  fail(3, err.code === 'ENOENT' ? `model file not found: ${modelPath}`
                                : `${modelPath} is not an ONNX model ONNX Runtime Web can load: ${err.message}`);
}
const problem = contractProblem(session);
if (problem) fail(3, `${modelPath}: ${problem}`);
const inputName = session.inputNames[0];    // like session.get_inputs()[0].name in Python
const outputName = session.outputNames[0];  // like session.get_outputs()[0].name

// The images as one float32 batch [n, 1, 28, 28] in 0..1.
const npy = readNpy(imagesPath);
let pixels, n;
if (preprocess === 'mnist') {
  const [count, height, width, channels] = npy.shape;
  if (npy.shape.length !== 4 || channels !== 4 || npy.descr !== '|u1')
    fail(4, `${imagesPath}: --preprocess mnist expects uint8 RGBA drawings [N, H, W, 4], got ${npy.descr} [${npy.shape}]`);
  n = count;
  pixels = new Float32Array(n * 28 * 28);
  for (let i = 0; i < n; i++) {
    const rgba = npy.data.subarray(i * height * width * 4, (i + 1) * height * width * 4);
    try {
      pixels.set(mnistPreprocess(inkFromRGBA(rgba, width, height), width, height), i * 28 * 28);
    } catch (err) {
      fail(4, `${imagesPath}[${i}]: ${err.message}`);
    }
  }
} else {
  const shape = npy.shape;
  const ok = (shape.length === 3 && shape[1] === 28 && shape[2] === 28) ||
             (shape.length === 4 && shape[1] === 1 && shape[2] === 28 && shape[3] === 28);
  if (!ok) fail(4, `${imagesPath}: array of shape [${shape}]; expected [N, 28, 28] or [N, 1, 28, 28]`);
  n = shape[0];
  pixels = npy.descr === '|u1' ? Float32Array.from(npy.data, v => v / 255) : npy.data;
  if (invert) pixels = pixels.map(v => 1 - v);
  // The model expects a light digit on black. Dark ink on light paper would be misread with high confidence: refuse
  // an image whose background (the median of its border pixels) is not dark, with helpers/predict.py's rule.
  const background = (i) => {
    const image = pixels.subarray(i * 784, (i + 1) * 784), border = [];
    for (let k = 0; k < 28; k++) border.push(image[k], image[27 * 28 + k], image[k * 28], image[k * 28 + 27]);
    border.sort((a, b) => a - b);
    return (border[55] + border[56]) / 2;
  };
  const light = Array.from({ length: n }, (_, i) => i).filter(i => background(i) > 0.25);
  if (light.length) {
    const hint = invert ? 'drop --invert for images that already are, or use'
                        : 'for a dark digit on a light or transparent background use --invert (28x28 images) or';
    fail(4, `${imagesPath}[${light[0]}]: the background is not dark${invert ? ' after --invert' : ''} (median of the ` +
            `border pixels ${background(light[0]).toFixed(2)}; ${light.length} such images in all): the model ` +
            `expects a light digit on black; ${hint} --preprocess mnist (drawings of any size)`);
  }
}

// Run the whole batch: one tensor [n, 1, 28, 28], fed by the input's name; the logits come back by the output's.
const tensor = new ort.Tensor('float32', pixels, [n, 1, 28, 28]);
const results = await session.run({ [inputName]: tensor });
const logits = results[outputName];
const classes = logits.dims[1];
const rows = [];
for (let i = 0; i < n; i++) rows.push(Array.from(logits.data.subarray(i * classes, (i + 1) * classes)));

const report = { model: modelPath, input: { name: inputName, dims: tensor.dims }, output: { name: outputName },
                 logits: rows };
if (showInput) report.inputs = Array.from({ length: n }, (_, i) => Array.from(pixels.subarray(i * 784, (i + 1) * 784)));
if (timeRuns > 0) {
  const one = new ort.Tensor('float32', pixels.slice(0, 784), [1, 1, 28, 28]);
  for (let i = 0; i < 10; i++) await session.run({ [inputName]: one });
  const times = [];
  for (let i = 0; i < timeRuns; i++) {
    const t0 = process.hrtime.bigint();
    await session.run({ [inputName]: one });
    times.push(Number(process.hrtime.bigint() - t0) / 1000);
  }
  times.sort((a, b) => a - b);
  report.latency_us = { median: times[Math.floor(times.length / 2)], runs: timeRuns };
}
console.log(JSON.stringify(report));
