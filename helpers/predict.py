"""Classify 28x28 digits (PNG or .npy) with an MNIST ``.onnx`` file using only numpy, onnxruntime and Pillow (notebook 03).

A deployment in one file: copy it next to a model and run ``python predict.py MODEL.onnx IMAGE...``. The lesson:

1. ``load_model``: an ``ort.InferenceSession`` on the file, on the CPU;
2. ``inspect_session``: the input's and the output's names, shapes and types read from the session, never typed;
3. ``read_inputs``: each 28x28 digit as float32 in 0..1, white on black (uint8 pixels divided by 255);
4. ``predict``: ``session.run([output_name], {input_name: batch})`` on the batch [N, 1, 28, 28];
5. ``softmax``: each row of logits made into probabilities; the digit is the most probable class.

Everything else is what a user meets when something does not fit, each refused with a message saying what was
expected and what came: a model that is not ``[batch, 1, H, W] float -> [batch, classes]`` (exit code 3);
a missing, unreadable or unrecognised file, a ``.npy`` array of the wrong shape, dtype or range, a corrupt,
truncated or oversized PNG (read by Pillow: the size from the header, every checksum before any pixel is
decoded), a blank image, a dark digit on a light background (exit code 4). Drawings of any size are notebook 04's:
``python -m helpers.classify_drawing`` puts the page's preprocessing (``helpers/preprocess.py``) in front of this
file.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import warnings
from pathlib import Path
from typing import NamedTuple

import numpy as np
import onnxruntime as ort
from onnxruntime.capi import onnxruntime_pybind11_state as _ort_state
from PIL import Image

EXIT_OK, EXIT_USAGE, EXIT_MODEL, EXIT_INPUT = 0, 2, 3, 4
# the program for drawings of any size (notebook 04), named where a refusal points to it
DRAWINGS = "python -m helpers.classify_drawing"

EXIT_CODES_HELP = """exit codes:
  0  every image was classified
  2  usage error (bad or missing command-line arguments)
  3  model error: the model file is missing, is not a valid ONNX model, does not look like an image
     classifier [batch, 1, H, W] -> [batch, classes], or failed while running
  4  input error: an image is missing, unreadable (e.g. permission denied) or a folder, has the wrong size,
     dtype, shape or value range, is blank, empty or ambiguous (which pixels are the ink?), or its
     background is not dark (a dark digit on a light background needs --invert; a drawing of any size,
     python -m helpers.classify_drawing)

examples:
  python -m helpers.predict artifacts/mnist_mlp_pytorch.onnx digit.png batch.npy
  python -m helpers.predict artifacts/mnist_mlp_keras.onnx drawn.png --invert --json
"""
ORT_FLOAT_TYPES = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(float16)": np.float16,
}
# what onnxruntime raises for a file it cannot load or run
ORT_ERRORS = tuple(
    v for v in vars(_ort_state).values() if isinstance(v, type) and issubclass(v, Exception)
)


class ModelError(Exception):
    """The model file cannot be used (exit code 3)."""


class InputError(Exception):
    """An input image cannot be used (exit code 4)."""


# ----------------------------------------------------------------------------------------- the model
class ModelSpec(NamedTuple):
    input_name: str
    # e.g. "tensor(float)"
    input_type: str
    # None: a dynamic batch dimension
    batch: int | None
    height: int
    width: int
    output_name: str


def inspect_session(session: ort.InferenceSession) -> ModelSpec:
    """The session's names, shapes and types; ``ModelError`` unless ``[batch, 1, H, W] float -> [batch, classes]``."""
    inputs, outputs = session.get_inputs(), session.get_outputs()
    if len(inputs) != 1 or not outputs:
        raise ModelError(
            f"expected a model with one input (an image batch) and an output, found inputs "
            f"{[i.name for i in inputs]} and {len(outputs)} outputs"
        )
    inp, out = inputs[0], outputs[0]
    shape = list(inp.shape)
    if len(shape) != 4 or shape[1] != 1 or not all(isinstance(s, int) and s > 0 for s in shape[2:]):
        raise ModelError(
            f"expected input {inp.name!r} shaped [batch, 1, height, width] with a fixed height and "
            f"width (one grayscale channel), found {shape}"
        )
    if inp.type not in ORT_FLOAT_TYPES:
        raise ModelError(
            f"expected a floating-point input ({', '.join(ORT_FLOAT_TYPES)}), "
            f"input {inp.name!r} is {inp.type}"
        )
    batch = shape[0] if isinstance(shape[0], int) else None
    if batch not in (None, 1):
        raise ModelError(
            f"input {inp.name!r} has a fixed batch size of {batch}; expected a dynamic batch or 1"
        )
    if len(out.shape) != 2:
        raise ModelError(
            f"expected output {out.name!r} shaped [batch, classes], found {list(out.shape)}"
        )
    return ModelSpec(inp.name, inp.type, batch, shape[2], shape[3], out.name)


def load_model(
    path: str | Path, threads: int | None = None
) -> tuple[ort.InferenceSession, ModelSpec]:
    """An ``InferenceSession`` on the CPU provider and its checked ``ModelSpec``; ``ModelError`` if unusable."""
    path = Path(path)
    if not path.is_file():
        raise ModelError(f"model file not found: {path}")
    options = ort.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    try:
        session = ort.InferenceSession(
            str(path), sess_options=options, providers=["CPUExecutionProvider"]
        )
    except ORT_ERRORS as err:
        raise ModelError(f"{path} is not a valid ONNX model onnxruntime can load: {err}") from err
    return session, inspect_session(session)


# ------------------------------------------------------------------------------------- reading files
def read_bytes(path: str | Path) -> bytes:
    """The file's bytes, read once; ``InputError`` naming the reason when it cannot be read."""
    try:
        return Path(path).read_bytes()
    except OSError as err:
        reason = {
            FileNotFoundError: "image file not found",
            IsADirectoryError: "this is a folder, not an image file",
            PermissionError: "permission denied: this user may not read the file",
        }.get(type(err))
        raise InputError(
            f"{path}: {reason or f'cannot read the file ({err.strerror or err})'}"
        ) from err


def decode_npy(data: bytes, path, expected_hw: tuple[int, int]) -> np.ndarray:
    """Images from a ``.npy`` file's bytes as float32 [N, H, W] in 0..1 (uint8 is divided by 255)."""
    try:
        # never unpickle: a pickle can run code
        array = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as err:
        raise InputError(f"{path}: not a readable .npy array ({err})") from err
    hw = tuple(expected_hw)
    if array.shape == hw or (array.ndim == 4 and array.shape[1:] == (1, *hw)):
        array = array.reshape(-1, *hw)
    if array.ndim != 3 or array.shape[1:] != hw:
        raise InputError(
            f"{path}: array of shape {array.shape}; the model expects {hw}, (N, {hw[0]}, {hw[1]}) "
            f"or (N, 1, {hw[0]}, {hw[1]})"
        )
    if len(array) == 0:
        raise InputError(f"{path}: the array holds no images (shape {array.shape})")
    if array.dtype == np.uint8:
        return array.astype(np.float32) / 255.0
    if not np.issubdtype(array.dtype, np.floating):
        raise InputError(
            f"{path}: dtype {array.dtype} is not supported; expected uint8 (0..255) or float (0..1), "
            f"e.g. array.astype(np.uint8)"
        )
    if not (np.isfinite(array).all() and array.min() >= 0.0 and array.max() <= 1.0):
        raise InputError(
            f"{path}: float values range {np.min(array):g}..{np.max(array):g}; expected finite "
            f"values in 0..1 (divide uint8 pixels by 255)"
        )
    return array.astype(np.float32)


def read_image_file(path: str | Path, expected_hw: tuple[int, int]) -> tuple[np.ndarray, bool]:
    """(float32 [N, H, W] in 0..1, is_png) from a PNG or ``.npy`` file told by its content, not its name."""
    data = read_bytes(path)
    if data.startswith(PNG_SIGNATURE):
        return decode_png(data, path, expected_hw)[None], True
    if data.startswith(NPY_SIGNATURE):
        return decode_npy(data, path, expected_hw), False
    raise InputError(f"{path}: neither a PNG image nor a .npy array (unrecognised content)")


def read_inputs(paths: list[str], spec: ModelSpec) -> tuple[np.ndarray, list[str]]:
    """Every file's images as one float32 batch [N, H, W] in 0..1, and a source name per image."""
    sources, batches = [], []
    for path in paths:
        images, is_png = read_image_file(path, (spec.height, spec.width))
        sources += [path] if is_png else [f"{path}[{i}]" for i in range(len(images))]
        batches.append(images)
    return np.concatenate(batches), sources


# ------------------------------------------------------------------------------------ PNG reading (Pillow)
PNG_SIGNATURE, NPY_SIGNATURE = b"\x89PNG\r\n\x1a\n", b"\x93NUMPY"
# what Pillow raises for a file it cannot read (its UnidentifiedImageError and "image file is truncated" are
# OSErrors, a broken checksum a SyntaxError)
PIL_ERRORS = (OSError, SyntaxError, ValueError, EOFError)


def _open_png(data: bytes, path) -> Image.Image:
    """Pillow's image of a PNG file's bytes, opened lazily: the header is read, no pixel is decoded yet."""
    with warnings.catch_warnings():
        # Pillow only warns between MAX_IMAGE_PIXELS and twice that: refuse those too
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            return Image.open(io.BytesIO(data), formats=["PNG"])
        except (Image.DecompressionBombError, Image.DecompressionBombWarning) as err:
            raise InputError(
                f"{path}: refused before decoding, its header declares too many pixels ({err})"
            ) from err
        except Image.UnidentifiedImageError as err:
            raise InputError(
                f"{path}: not a readable PNG (Pillow cannot read its header: corrupt or truncated)"
            ) from err
        except PIL_ERRORS as err:
            raise InputError(f"{path}: corrupt or truncated PNG ({err})") from err


def decode_png(
    data: bytes, path, expected_hw: tuple[int, int] | None = None, max_side: int | None = None
) -> np.ndarray:
    """A PNG file's bytes -> float32 gray [height, width] in 0..1 (read by Pillow); ``InputError`` saying why not.

    The size is checked from the header (``expected_hw``, or at most ``max_side`` a side when any size will do),
    and every chunk's checksum, before any pixel is decompressed."""
    image = _open_png(data, path)
    width, height = image.size
    if expected_hw is not None and (height, width) != tuple(expected_hw):
        raise InputError(
            f"{path}: image is {width}x{height} pixels; the model expects "
            f"{expected_hw[1]}x{expected_hw[0]} (width x height); drawings of any size "
            f"need {DRAWINGS}"
        )
    if expected_hw is None and max_side and not (width <= max_side and height <= max_side):
        raise InputError(
            f"{path}: image is {width}x{height} pixels; expected at most {max_side}x{max_side}"
        )
    try:
        # every chunk's checksum, up to IEND; Pillow then needs the file opened again
        image.verify()
        image = _open_png(data, path)
        image.load()
    except PIL_ERRORS as err:
        raise InputError(f"{path}: corrupt or truncated PNG ({err})") from err
    # 16-bit grey: Pillow keeps all 16 bits (other modes it reads as 8-bit)
    if image.mode == "I;16":
        gray = np.asarray(image, dtype=np.int64)
        samples = gray[..., None]
        # one grey value marked transparent (a tRNS chunk)
        if "transparency" in image.info:
            alpha = np.where(gray == image.info["transparency"], 0, 65535)
            samples = np.stack([gray, alpha], axis=-1)
        return gray_from_pixels(samples, 65535, path)
    # grey, palette, RGB (a transparent colour, a palette's alpha or an alpha channel: RGBA)
    pixels = image.convert("RGBA" if image.has_transparency_data else "RGB")
    return gray_from_pixels(np.asarray(pixels), 255, path)


def _transparent_background(gray: np.ndarray, alpha: np.ndarray, maximum: int, name) -> np.ndarray:
    """Gray values over paper of the colour opposite to the ink (white under dark strokes); ``InputError`` if mixed."""
    if alpha.sum() == 0:
        raise InputError(f"{name}: the image is fully transparent: there is no ink to classify")
    dark_share = alpha[gray < (maximum + 1) // 2].sum() / alpha.sum()
    if 0.05 < dark_share < 0.95:
        raise InputError(
            f"{name}: the image has transparent parts and its visible pixels are both dark "
            f"({dark_share:.0%} of the ink) and light, so ink and background cannot be told apart; "
            f"save it on an opaque background"
        )
    paper = maximum if dark_share >= 0.95 else 0
    return (gray * alpha + paper * (maximum - alpha) + maximum // 2) // maximum


def gray_from_pixels(samples: np.ndarray, maximum: int = 255, name="image") -> np.ndarray:
    """Integer pixels [H, W, 1..4 channels] -> float32 gray [H, W] in 0..1 (ITU-R 601 weights, as Pillow's "L")."""
    samples = np.asarray(samples)
    if (
        samples.ndim != 3
        or samples.shape[2] not in (1, 2, 3, 4)
        or not np.issubdtype(samples.dtype, np.integer)
    ):
        raise InputError(
            f"{name}: expected integer pixels [height, width, 1..4 channels], got {samples.dtype} "
            f"{samples.shape}"
        )
    samples, channels = samples.astype(np.int64), samples.shape[2]
    gray = samples[..., 0]
    if channels >= 3:
        gray = (
            samples[..., 0] * 19595 + samples[..., 1] * 38470 + samples[..., 2] * 7471 + 0x8000
        ) >> 16
    if channels in (2, 4) and (samples[..., -1] < maximum).any():
        gray = _transparent_background(gray, samples[..., -1], maximum, name)
    return (gray / maximum).astype(np.float32)


def read_png(path: str | Path, expected_hw: tuple[int, int] | None = None) -> np.ndarray:
    """``decode_png`` of a file: float32 gray values in 0..1, shape [height, width]."""
    return decode_png(read_bytes(path), Path(path), expected_hw)


# ------------------------------------------------------------------------- the contract: light ink on black
# a background (the median of the border pixels) at most this dark is black
DARK = 0.25


def background(images: np.ndarray) -> np.ndarray:
    """The median of the border pixels of each gray image [..., H, W]: its background, 0 black .. 1 white."""
    border = [images[..., 0, :], images[..., -1, :], images[..., :, 0], images[..., :, -1]]
    return np.median(np.concatenate(border, axis=-1), axis=-1)


def check_inputs(images: np.ndarray, sources: list[str], inverted: bool = False) -> None:
    """``InputError`` for a blank image or one whose background is not dark (it would be misread confidently)."""
    flat = images.reshape(len(images), -1)
    blank = np.flatnonzero(flat.max(axis=1) == flat.min(axis=1))
    if len(blank):
        i = blank[0]
        raise InputError(
            f"{sources[i]}: the image is blank (every pixel is {flat[i, 0]:.3g}): there is no digit "
            f"to classify" + (f" ({len(blank)} blank images in all)" if len(blank) > 1 else "")
        )
    light = np.flatnonzero(background(images) > DARK)
    if len(light):
        i = light[0]
        hint = (
            "drop --invert for images that already are, or use"
            if inverted
            else "for a dark digit on a light or transparent background use --invert (28x28 images) or"
        )
        raise InputError(
            f"{sources[i]}: the background is not dark{' after --invert' if inverted else ''} (median of "
            f"the border pixels {background(images[i]):.2f}; {len(light)} such images in all): the "
            f"model expects a light digit on black; {hint} {DRAWINGS} (drawings of any size)"
        )


# ----------------------------------------------------------------------------------- running the session
def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax, stable for large logits."""
    exp = np.exp(logits - logits.max(axis=1, keepdims=True))
    return exp / exp.sum(axis=1, keepdims=True)


def predict(session: ort.InferenceSession, spec: ModelSpec, images: np.ndarray) -> np.ndarray:
    """Class probabilities [N, classes] for float images [N, H, W] in 0..1."""
    images = np.asarray(images)
    if images.ndim != 3 or images.shape[1:] != (spec.height, spec.width):
        raise InputError(
            f"expected images shaped (N, {spec.height}, {spec.width}), got {images.shape}"
        )
    # [N, 1, H, W] in the model's dtype
    batch = images[:, None].astype(ORT_FLOAT_TYPES[spec.input_type])
    chunks = [batch] if spec.batch is None else [batch[i : i + 1] for i in range(len(batch))]
    try:
        logits = np.concatenate(
            [session.run([spec.output_name], {spec.input_name: c})[0] for c in chunks]
        )
    except ORT_ERRORS as err:
        raise ModelError(f"the model failed while running: {err}") from err
    if logits.shape[0] != len(batch) or logits.ndim != 2:
        raise ModelError(
            f"output {spec.output_name!r} has shape {logits.shape}; expected ({len(batch)}, classes)"
        )
    return softmax(logits.astype(np.float64))


# ------------------------------------------------------------------------------------------- the program
def format_output(
    model: str, spec: ModelSpec, sources: list[str], probabilities: np.ndarray, as_json: bool
) -> str:
    """A line per image (source, digit, probability), or the JSON report with every probability."""
    digits = probabilities.argmax(axis=1)
    if as_json:
        return json.dumps(
            {
                "model": model,
                "input": {
                    "name": spec.input_name,
                    "type": spec.input_type,
                    "height": spec.height,
                    "width": spec.width,
                },
                "output": spec.output_name,
                "predictions": [
                    {
                        "source": s,
                        "class": int(d),
                        "probability": float(p[d]),
                        "probabilities": p.tolist(),
                    }
                    for s, d, p in zip(sources, digits, probabilities)
                ],
            },
            indent=1,
        )
    width = max(len(s) for s in sources)
    return "\n".join(
        f"{s:<{width}}  {d}  {p[d]:.3f}" for s, d, p in zip(sources, digits, probabilities)
    )


def main(argv: list[str] | None = None) -> int:
    """The command line: exit 0 ok, 2 usage (argparse), 3 model, 4 input."""
    parser = argparse.ArgumentParser(
        prog="python -m helpers.predict",
        description="Classify 28x28 grayscale digits (PNG or .npy, many at once) with an MNIST .onnx model,\n"
        "using only numpy, onnxruntime and Pillow. Prints a line per image: source, digit, probability.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "model", help="the .onnx file (input [batch, 1, H, W] float, output [batch, classes])"
    )
    parser.add_argument(
        "images",
        nargs="+",
        metavar="IMAGE",
        help="PNG files, or .npy arrays of uint8 0..255 / float 0..1 shaped [H, W], [N, H, W] "
        "or [N, 1, H, W]; a light digit on black, as MNIST (checked on the border)",
    )
    parser.add_argument(
        "--invert",
        action="store_true",
        help="the images show a dark digit on a light background (MNIST is white on black)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print JSON (all probabilities) instead of text"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="N",
        help="onnxruntime intra-op threads (default: onnxruntime's choice)",
    )
    args = parser.parse_args(argv)
    if args.threads is not None and args.threads < 1:
        parser.error(f"--threads must be at least 1, got {args.threads}")
    try:
        session, spec = load_model(args.model, args.threads)
        images, sources = read_inputs(args.images, spec)
        if args.invert:
            images = 1.0 - images
        check_inputs(images, sources, args.invert)
        probabilities = predict(session, spec, images)
    except (ModelError, InputError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_MODEL if isinstance(err, ModelError) else EXIT_INPUT
    print(format_output(str(args.model), spec, sources, probabilities, args.json))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
