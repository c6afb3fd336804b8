// The page: draw on a canvas, preprocess the drawing like MNIST (preprocess.js), run the .onnx file with
// ONNX Runtime Web, show what the model saw and its ten probabilities. Everything is served by the local server
// (helpers/webserver.py): the runtime from node_modules, no CDN.
import * as ort from './ort/ort.wasm.min.mjs';
import { contractProblem, inkFromRGBA, mnistPreprocess, softmax } from './preprocess.js';

ort.env.wasm.wasmPaths = new URL('./ort/', document.baseURI).href;  // where the .wasm files are served
ort.env.wasm.numThreads = 1;  // threads need cross-origin isolation, which a page inside Jupyter does not have

const pad = document.getElementById('pad');
const padContext = pad.getContext('2d', { willReadFrequently: true });
const seen = document.getElementById('seen').getContext('2d');
const picker = document.getElementById('model');
const message = document.getElementById('message');
const status = document.getElementById('status');
const bars = document.getElementById('bars');

// What the tests (and a curious learner, in the console) can read back.
const state = window.digitPage = { ready: false, model: null, input: null, logits: null, probabilities: null,
                                   prediction: null, error: null, runMs: null, classifyNow, timeRuns };
let session = null;

function say(text, isError = false) {
  message.textContent = text;
  message.className = isError ? 'error' : '';
  state.error = isError ? text : null;
}

for (let digit = 0; digit < 10; digit++) {
  bars.insertAdjacentHTML('beforeend',
    `<span>${digit}</span><div class="bar" id="bar${digit}"><div></div></div><span id="p${digit}">–</span>`);
}

// --- opening a model ---------------------------------------------------------------------------------------------
// The picker's files come from the local server: fetched first, so that a server that has stopped (or a missing
// file) is reported as such, never as a bad model. `loaded` is the picker entry of the model in use.
const SERVER_GONE = 'the page\'s server is not running (start it with `python -m helpers.webserver` in the '
  + 'repository, or re-run the notebook cell that starts it, then open the address it prints)';
let loaded = null;

async function fetchModel(url, label) {
  let response;
  try {
    response = await fetch(url, { cache: 'no-store' });
  } catch (err) {  // no answer at all: connection refused, network error
    throw new Error(`could not fetch ${label}: ${SERVER_GONE}`);
  }
  if (!response.ok) throw new Error(`could not fetch ${label}: the server answered HTTP ${response.status}`);
  return new Uint8Array(await response.arrayBuffer());
}

async function openModel(source, label) {
  state.ready = false;
  say(`opening ${label} ...`);
  let candidate;
  try {
    const bytes = typeof source === 'string' ? await fetchModel(source, label) : source;
    try {
      candidate = await ort.InferenceSession.create(bytes);
    } catch (err) {
      throw new Error(`${label} is not an ONNX model ONNX Runtime Web can open: ${err.message ?? err}`);
    }
    const problem = contractProblem(candidate);
    if (problem) throw new Error(`${label} is not an MNIST digit classifier [batch, 1, 28, 28] → [batch, 10]: ${problem}`);
  } catch (err) {
    state.ready = session !== null;  // keep using the previous model, if any
    const still = state.model ? ` Still using ${state.model}.` : '';
    say(`${err.message}.${still}`, true);
    return false;
  }
  session = candidate;
  state.model = label;
  say(`${label}: input '${session.inputNames[0]}', output '${session.outputNames[0]}'`);
  state.ready = true;
  await classifyNow();
  return true;
}

async function loadPicker() {
  let models;
  try {
    const response = await fetch('models.json', { cache: 'no-store' });
    if (!response.ok) throw new Error(`the server answered HTTP ${response.status}`);
    models = await response.json();
  } catch (err) {
    say(`could not read the model list: ${err instanceof TypeError ? SERVER_GONE : err.message}`, true);
    return;
  }
  for (const m of models) picker.add(new Option(m.label, m.url));
  if (models.length === 0) say('no model files on the server yet: run notebooks 01, 02 and 05 first', true);
  else if (await openModel(models[0].url, models[0].label)) loaded = picker.options[0];
}

// The picker always shows the model in use: after a failed pick it returns to it (the message names the failure).
picker.addEventListener('change', async () => {
  const chosen = picker.selectedOptions[0];
  if (await openModel(chosen.value, chosen.text)) {
    picker.querySelector('option[data-own]')?.remove();
    loaded = chosen;
  } else if (loaded) loaded.selected = true;
});
document.getElementById('own').addEventListener('change', async (event) => {
  const file = event.target.files[0];
  if (!file) return;
  if (await openModel(new Uint8Array(await file.arrayBuffer()), file.name)) {
    picker.querySelector('option[data-own]')?.remove();  // the picker names your file while it is in use
    loaded = new Option(`your file: ${file.name}`, '', false, true);
    loaded.dataset.own = '';
    loaded.disabled = true;
    picker.add(loaded);
  } else if (loaded) loaded.selected = true;
});

// --- drawing -----------------------------------------------------------------------------------------------------
// Dark strokes on a transparent canvas (the white is the page's background): exactly what a canvas exports.
padContext.lineCap = padContext.lineJoin = 'round';
padContext.lineWidth = 20;
padContext.strokeStyle = '#000';
let last = null;

function point(event) {
  const box = pad.getBoundingClientRect();
  return [(event.clientX - box.left) * pad.width / box.width, (event.clientY - box.top) * pad.height / box.height];
}
pad.addEventListener('pointerdown', (event) => {
  pad.setPointerCapture(event.pointerId);
  last = point(event);
  padContext.beginPath();
  padContext.arc(last[0], last[1], padContext.lineWidth / 2, 0, 2 * Math.PI);
  padContext.fillStyle = padContext.strokeStyle;
  padContext.fill();
  scheduleClassify();
});
pad.addEventListener('pointermove', (event) => {
  if (!last) return;
  const next = point(event);
  padContext.beginPath();
  padContext.moveTo(...last);
  padContext.lineTo(...next);
  padContext.stroke();
  last = next;
  scheduleClassify();
});
for (const name of ['pointerup', 'pointercancel', 'pointerleave']) pad.addEventListener(name, () => { last = null; });
document.getElementById('clear').addEventListener('click', () => {
  padContext.clearRect(0, 0, pad.width, pad.height);
  classifyNow();
});

// --- classifying -------------------------------------------------------------------------------------------------
let pending = false;
function scheduleClassify() {  // at most once per frame while drawing
  if (pending) return;
  pending = true;
  requestAnimationFrame(() => { pending = false; classifyNow(); });
}

function showResult(input, probabilities) {
  const image = seen.createImageData(28, 28);
  for (let i = 0; i < 784; i++) {
    const v = Math.round((input ? input[i] : 0) * 255);
    image.data.set([v, v, v, 255], 4 * i);
  }
  seen.putImageData(image, 0, 0);
  const best = probabilities ? probabilities.indexOf(Math.max(...probabilities)) : -1;
  document.getElementById('prediction').textContent = best < 0 ? '–' : String(best);
  for (let digit = 0; digit < 10; digit++) {
    const p = probabilities ? probabilities[digit] : 0;
    const bar = document.getElementById(`bar${digit}`);
    bar.className = digit === best ? 'bar top' : 'bar';
    bar.firstElementChild.style.width = `${(100 * p).toFixed(1)}%`;
    document.getElementById(`p${digit}`).textContent = probabilities ? `${(100 * p).toFixed(1)} %` : '–';
  }
}

let running = Promise.resolve();
function classifyNow() {  // serialised: a run never overlaps the previous one
  running = running.then(classifyOnce, classifyOnce);
  return running;
}

async function classifyOnce() {
  const { width, height } = pad;
  const ink = inkFromRGBA(padContext.getImageData(0, 0, width, height).data, width, height);
  let input;
  try {
    input = mnistPreprocess(ink, width, height);
  } catch (err) {  // an empty canvas: nothing to classify
    Object.assign(state, { input: null, logits: null, probabilities: null, prediction: null });
    showResult(null, null);
    status.textContent = 'draw a digit';
    return;
  }
  if (!session) return;
  const tensor = new ort.Tensor('float32', input, [1, 1, 28, 28]);
  const t0 = performance.now();
  const results = await session.run({ [session.inputNames[0]]: tensor });
  const runMs = performance.now() - t0;
  const logits = Array.from(results[session.outputNames[0]].data);
  const probabilities = softmax(logits);
  Object.assign(state, { input: Array.from(input), logits, probabilities, runMs,
                         prediction: probabilities.indexOf(Math.max(...probabilities)) });
  showResult(input, probabilities);
  status.textContent = `${state.model}: session.run took ${runMs.toFixed(2)} ms (WebAssembly, 1 thread)`;
}

// Batch-1 latency in this browser, in microseconds: the median over `blocks` blocks of `perBlock` runs each
// (block means: a page that is not cross-origin isolated gets a coarse clock, about 0.1 ms, too coarse for one run).
async function timeRuns(blocks = 20, perBlock = 20) {
  const input = new ort.Tensor('float32', Float32Array.from(state.input ?? new Array(784).fill(0)), [1, 1, 28, 28]);
  const feeds = { [session.inputNames[0]]: input };
  for (let i = 0; i < 20; i++) await session.run(feeds);
  const means = [];
  for (let b = 0; b < blocks; b++) {
    const t0 = performance.now();
    for (let i = 0; i < perBlock; i++) await session.run(feeds);
    means.push((performance.now() - t0) * 1000 / perBlock);
  }
  means.sort((a, b) => a - b);
  return means[Math.floor(blocks / 2)];
}

loadPicker();
