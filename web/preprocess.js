// The MNIST preprocessing, written out: a drawing (RGBA pixels of any size) -> the 28x28 input the model expects.
//
// MNIST digits were made like this (LeCun et al.): the digit's bounding box was scaled so that its longest side
// is 20 pixels (aspect ratio kept, anti-aliased), then placed in a 28x28 field so that its centre of mass sits at
// the centre of the field; white digit on black. A drawing on a canvas needs the same steps, or the model sees
// something it never saw in training. helpers/preprocess.py, this module's Python twin, does exactly the same steps
// (helpers/classify_drawing.py runs them before helpers/predict.py); tests/test_web.py checks that both give the same
// 28x28 images.
//
// An ES module with no dependencies: the web page imports it, and so does web/classify.mjs under Node.js.

export const INK_THRESHOLD = 0.1;  // pixels with at least this much ink define the bounding box
export const BOX_SIDE = 20;        // the longest side of the digit after scaling
export const FIELD_SIDE = 28;      // the model's input is FIELD_SIDE x FIELD_SIDE

// Step 0: how much ink each pixel holds, 0..1, from RGBA bytes (a canvas' getImageData().data).
// Dark strokes on a light or a transparent background: ink = darkness x opacity. The gray value uses the
// ITU-R 601 weights (as Pillow and helpers/predict.py do), all in integers so both languages round alike.
export function inkFromRGBA(rgba, width, height) {
  const ink = new Float64Array(width * height);
  for (let i = 0; i < width * height; i++) {
    const [r, g, b, a] = [rgba[4 * i], rgba[4 * i + 1], rgba[4 * i + 2], rgba[4 * i + 3]];
    const gray = (r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16;
    ink[i] = Math.floor(((255 - gray) * a + 127) / 255) / 255;
  }
  return ink;
}

// Area resampling weights [nOut][nIn]: output pixel i is the average of the input it covers.
function areaWeights(nIn, nOut) {
  const scale = nIn / nOut;
  const rows = [];
  for (let i = 0; i < nOut; i++) {
    const low = i * scale, high = (i + 1) * scale;
    const row = new Float64Array(nIn);
    for (let j = Math.floor(low); j < Math.min(Math.ceil(high), nIn); j++) {
      row[j] = (Math.min(high, j + 1) - Math.max(low, j)) / scale;
    }
    rows.push(row);
  }
  return rows;
}

// Resize an image [height x width] (row-major Float64Array) to [newH x newW]: rows first, then columns.
function resize(pixels, width, height, newW, newH) {
  const wy = areaWeights(height, newH), wx = areaWeights(width, newW);
  const tmp = new Float64Array(newH * width);  // tmp = wy @ pixels
  for (let i = 0; i < newH; i++)
    for (let y = 0; y < height; y++) {
      const w = wy[i][y];
      if (w === 0) continue;
      for (let x = 0; x < width; x++) tmp[i * width + x] += w * pixels[y * width + x];
    }
  const out = new Float64Array(newH * newW);   // out = tmp @ wx.T
  for (let i = 0; i < newH; i++)
    for (let k = 0; k < newW; k++) {
      let sum = 0;
      for (let x = 0; x < width; x++) sum += tmp[i * width + x] * wx[k][x];
      out[i * newW + k] = sum;
    }
  return out;
}

// Steps 1-3: ink [height x width] -> Float32Array(28 * 28) in 0..1, white digit on black.
//   centre = 'mass' (MNIST), 'box' (bounding-box centre: the centre-of-mass step skipped),
//   'none' (no crop, no centring: the whole drawing resized to 28x28).
// Throws an Error when there is no ink at all (an empty canvas is not a digit).
export function mnistPreprocess(ink, width, height, centre = 'mass') {
  // 1. crop to the bounding box of the inked pixels
  let top = height, bottom = -1, left = width, right = -1;
  for (let y = 0; y < height; y++)
    for (let x = 0; x < width; x++)
      if (ink[y * width + x] >= INK_THRESHOLD) {
        top = Math.min(top, y); bottom = Math.max(bottom, y);
        left = Math.min(left, x); right = Math.max(right, x);
      }
  if (bottom < 0) throw new Error('no ink found: the drawing is empty');
  const field = new Float64Array(FIELD_SIDE * FIELD_SIDE);
  if (centre === 'none') {
    field.set(resize(ink, width, height, FIELD_SIDE, FIELD_SIDE));
    return Float32Array.from(field, v => Math.min(Math.max(v, 0), 1));
  }
  const cropW = right - left + 1, cropH = bottom - top + 1;
  const crop = new Float64Array(cropW * cropH);
  for (let y = 0; y < cropH; y++)
    for (let x = 0; x < cropW; x++) crop[y * cropW + x] = ink[(top + y) * width + left + x];

  // 2. scale so that the longest side is 20 pixels, keeping the aspect ratio
  const longest = Math.max(cropW, cropH);
  const newH = Math.max(1, Math.floor(cropH * BOX_SIDE / longest + 0.5));
  const newW = Math.max(1, Math.floor(cropW * BOX_SIDE / longest + 0.5));
  const small = resize(crop, cropW, cropH, newW, newH);

  // 3. place it in the 28x28 field with its centre of mass at the field's centre
  let centreY = (newH - 1) / 2, centreX = (newW - 1) / 2;
  if (centre === 'mass') {
    let total = 0, sumY = 0, sumX = 0;
    for (let y = 0; y < newH; y++)
      for (let x = 0; x < newW; x++) {
        const v = small[y * newW + x];
        total += v; sumY += v * y; sumX += v * x;
      }
    centreY = sumY / total; centreX = sumX / total;
  }
  const middle = (FIELD_SIDE - 1) / 2;  // 13.5: the centre in pixel-index coordinates
  const clamp = (v, hi) => Math.min(Math.max(v, 0), hi);
  const y0 = clamp(Math.floor(middle - centreY + 0.5), FIELD_SIDE - newH);
  const x0 = clamp(Math.floor(middle - centreX + 0.5), FIELD_SIDE - newW);
  for (let y = 0; y < newH; y++)
    for (let x = 0; x < newW; x++) field[(y0 + y) * FIELD_SIDE + x0 + x] = small[y * newW + x];
  return Float32Array.from(field, v => Math.min(Math.max(v, 0), 1));
}

// Softmax of one row of logits: the ten probabilities shown as bars.
export function softmax(logits) {
  const max = Math.max(...logits);
  const exps = Array.from(logits, v => Math.exp(v - max));
  const sum = exps.reduce((a, b) => a + b, 0);
  return exps.map(v => v / sum);
}

// The file's contract, checked from the session's metadata before anything runs: one input
// [batch, 1, 28, 28] float32, first output [batch, 10]. Returns null when it holds, else what is wrong.
export function contractProblem(session) {
  if (session.inputNames.length !== 1)
    return `expected one input (an image batch), the model has ${session.inputNames.length}: ${session.inputNames.join(', ')}`;
  const input = session.inputMetadata[0], output = session.outputMetadata[0];
  const shape = (input && input.isTensor) ? input.shape : [];
  if (shape.length !== 4 || shape[1] !== 1 || shape[2] !== FIELD_SIDE || shape[3] !== FIELD_SIDE)
    return `expected input '${session.inputNames[0]}' shaped [batch, 1, 28, 28], found [${shape.join(', ')}]`;
  if (input.type !== 'float32')
    return `expected a float32 input, '${session.inputNames[0]}' is ${input.type}`;
  const outShape = (output && output.isTensor) ? output.shape : [];
  if (outShape.length !== 2 || outShape[1] !== 10)
    return `expected output '${session.outputNames[0]}' shaped [batch, 10], found [${outShape.join(', ')}]`;
  return null;
}
